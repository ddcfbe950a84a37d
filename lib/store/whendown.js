'use strict'

// What a RedisStore answers while its circuit is open (Redis found down), by its `whenDown`
// policy: 'error' (reject), 'allow' (admit, fail open), 'deny' (refuse until the next probe,
// fail closed) or 'local' (an embedded store in this process decides, from zero). Every answer
// made here is flagged degraded. The calls are the store's queued call tuples (lib/store/redis.js).

const { SluiceError, fromNative } = require('../errors')

const WHEN_DOWN = ['error', 'allow', 'deny', 'local']
const LIMIT_RESET = -2
const LIMIT_ADJUST = -1
const LIMIT_PEEK = -3
const LIMIT_BLOCK = -4
const SLIDING_TAKE = 0
const SLIDING_RESET = 2
const SLIDING_BLOCK = 3
const QUOTA_USE = 3
const CONCURRENT = { acquire: 1, release: 2, extend: 3, poll: 4, cancel: 5, stats: 6 }

class WhenDown {
  /**
   * `mode`: the policy; `probeIntervalMs`: how long a caller refused for want of Redis should
   * wait (until the next probe); `makeLocal()`: a fresh embedded store; `nowUs()`: local time.
   */
  constructor(mode, probeIntervalMs, { makeLocal, nowUs }) {
    this.mode = mode
    this.retryUs = probeIntervalMs * 1000
    this._probeIntervalMs = probeIntervalMs
    this._makeLocal = makeLocal
    this._nowUs = nowUs
    /** the error calls get while down ('error', and what cannot be answered without Redis) */
    this.error = null
    /** 'local': the embedded store deciding during this outage */
    this.local = null
  }

  /** The outage began: Redis was found down by `cause`. */
  begin(cause) {
    this.error = new SluiceError(
      'ERR_STORE_UNAVAILABLE',
      `Redis is down (${cause.code}: ${cause.message}); probing every ${this._probeIntervalMs} ms`,
      { cause },
    )
    if (this.mode === 'local') this.local = this._makeLocal()
  }

  /** The outage ended (or the store closed): the local counts are dropped. */
  end() {
    this.error = null
    const local = this.local
    this.local = null
    if (local !== null) local.close()
  }

  /** The concurrent-limiter operations of one batch. */
  concurrent(calls, resolve, reject) {
    if (this.mode === 'local') return this._concurrentLocal(calls, resolve, reject)
    this.answer(calls, resolve, reject, (c) => this._concurrentOne(c))
  }

  /** answers each of `calls` with `answer(call)` (a value, or throws: that call rejects) */
  answer(calls, resolve, reject, answer) {
    for (let e = 0; e < calls.length; e++) {
      let value
      try {
        value = answer(calls[e])
      } catch (err) {
        reject[e](fromNative(err))
        continue
      }
      resolve[e](value)
    }
  }

  /**
   * a pacer call answered without Redis: 'allow' admits (no delay), 'deny'
   * refuses rateLimit() until the next probe (and rejects pace(), which cannot refuse),
   * 'local' decides on the embedded store
   */
  pacer([owner, weight, k, a]) {
    const keys = typeof k === 'string' ? [k] : k
    let out
    if (this.mode === 'local') {
      out = this.local._group(keys, a)
    } else {
      out = new Float64Array(3 * keys.length)
      if (this.mode === 'deny') {
        if (a[1] === 1) throw this.error
        for (let i = 0; i < keys.length; i++) out[3 * i] = this.retryUs
      }
    }
    return owner._outcome(out, 0, weight, true)
  }

  /**
   * a rate-limiter call answered without Redis: 'allow' admits, 'deny' refuses
   * until the next probe, 'local' decides on the embedded store. A refund (adjust) is
   * dropped; a reset needs Redis (it rejects) except under 'local'.
   */
  limit([owner, key, kind, weight, limit, intervalUs, maxWaitUs]) {
    if (this.mode === 'local') {
      const io = this.local._limit(key, kind, weight, limit, intervalUs, maxWaitUs)
      return owner._decision(io, 0, true)
    }
    if (maxWaitUs === LIMIT_RESET || maxWaitUs === LIMIT_BLOCK) throw this.error
    if (maxWaitUs === LIMIT_ADJUST) return owner._decision([1, limit, 0, 0], 0, true)
    if (this.mode === 'allow') {
      return owner._decision([1, maxWaitUs === LIMIT_PEEK ? limit : Math.max(0, limit - weight), 0, 0], 0, true)
    }
    const retryUs = this.retryUs
    return owner._decision([0, 0, retryUs, retryUs], 0, true)
  }

  /** a sliding-window call answered without Redis (as `limit`) */
  sliding([owner, key, nums]) {
    if (this.mode === 'local') return owner._decision(this.local._sliding(key, nums), 0, true)
    if (nums[0] === SLIDING_RESET || nums[0] === SLIDING_BLOCK) throw this.error
    const windows = nums[2]
    const out = new Float64Array(2 + 2 * windows)
    if (this.mode === 'allow') {
      out[0] = 1
      const charge = nums[0] === SLIDING_TAKE ? nums[1] : 0
      for (let i = 0; i < windows; i++) out[2 + 2 * i] = Math.max(0, nums[3 + 2 * i] - charge)
    } else {
      out[1] = this.retryUs
      for (let i = 0; i < windows; i++) out[3 + 2 * i] = this.retryUs
    }
    return owner._decision(out, 0, true)
  }

  /**
   * a quota call answered without Redis, flagged `degraded`: 'allow' grants what
   * was requested, 'deny' grants nothing (every quota reached), 'local' decides on the
   * embedded store; `useQuotas` is dropped under 'allow' and 'deny'
   */
  quota([keys, nums, mode, timestamp]) {
    let out
    if (this.mode === 'local') {
      out = Float64Array.from(this.local._quota(keys, nums, mode, timestamp))
    } else {
      // nums: [counters, (window, granularity) per counter, requests, (amount, quotas, (counter, limit) per quota) per request]
      const counters = nums[0]
      let i = 1 + 2 * counters
      const requests = nums[i++]
      const values = [timestamp >= 0 ? timestamp : Math.floor(this._nowUs() / 1e6)]
      const allow = this.mode === 'allow'
      for (let r = 0; r < requests; r++) {
        const amount = nums[i]
        const quotas = nums[i + 1]
        i += 2 + 2 * quotas
        values.push(allow ? amount : 0)
        for (let j = 0; j < quotas; j++) values.push(allow ? 0 : 1)
      }
      out = new Float64Array(mode === QUOTA_USE ? 0 : values.length)
      if (mode !== QUOTA_USE) out.set(values)
    }
    out.degraded = true
    return out
  }

  /**
   * a fair-tenant assignment answered without Redis, flagged `degraded`: 'local' counts on
   * the embedded store; 'allow' and 'deny' count nothing (no rule matches: the job keeps its
   * default queue, and the enqueue goes on)
   */
  fair([key, id, nums]) {
    const out = this.mode === 'local' ? Float64Array.from(this.local._fair(key, id, nums)) : new Float64Array(nums[1])
    out.degraded = true
    return out
  }

  /**
   * a concurrent-limiter operation answered without Redis, flagged `degraded`:
   * 'allow' grants every lease, 'deny' none (a waiter gives up); releasing or extending a
   * lease Redis holds cannot be confirmed (false: it is reclaimed after its lock time).
   * Statistics need Redis.
   */
  _concurrentOne([, , op]) {
    const out = new Float64Array(9)
    const nowUs = this._nowUs()
    const allow = this.mode === 'allow'
    switch (op) {
      case CONCURRENT.acquire:
        out[0] = allow ? 1 : 0
        out[2] = allow ? 0 : nowUs + this.retryUs
        out[3] = nowUs
        break
      case CONCURRENT.poll:
        out[0] = allow ? 1 : -1
        out[3] = nowUs
        break
      case CONCURRENT.release:
      case CONCURRENT.extend:
        break // 0: not confirmed (a lease granted under 'allow' never asks, see Lease)
      case CONCURRENT.stats:
        throw this.error
      default:
        break
    }
    out.degraded = true
    return out
  }

  _concurrentLocal(calls, resolve, reject) {
    const local = this.local
    for (let e = 0; e < calls.length; e++) {
      const [key, id, op, nums] = calls[e]
      local._concurrent(key, op, id, nums).then((values) => {
        const out = Float64Array.from(values)
        out.degraded = true
        resolve[e](out)
      }, reject[e])
    }
  }
}

/**
 * A call's marker in its result from Redis (the field that is never negative otherwise: a
 * limiter's `remaining`, a pacer member's delay, a sliding call's retry, a quota call's
 * timestamp, a fair call's first count, a concurrent operation's first value; see
 * src/store/redis/mod.rs `WRONG_TYPE`): its key holds a value of another type, another
 * writer's, and nothing of the call was applied. Only that call rejects, with `wrongType`.
 */
WhenDown.WRONG_TYPE = -2

/**
 * The error of such a call: ERR_SCRIPT, naming the limiter's kind and the key prefix, never
 * the key (a name can be a user's data).
 */
WhenDown.wrongType = (kind, keyPrefix) =>
  new SluiceError(
    'ERR_SCRIPT',
    `the key of this ${kind} holds a value of another type: another writer uses sluice's key prefix ` +
      `${JSON.stringify(keyPrefix)}; this call was not applied`,
  )

module.exports = { WhenDown, WHEN_DOWN }
