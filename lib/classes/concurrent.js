'use strict'
// ConcurrentLimiter and Lease: a distributed semaphore with a FIFO queue of waiters. Its calls
// are the concurrent kind's (lib/kinds/concurrent.js); waiters queue in the store's Waiters.

const { randomBytes } = require('node:crypto')
const { invalidArgument, invalidConfig } = require('../base/errors')
const { longTimeout } = require('../base/timers')
const {
  limiterOptions,
  checkInteger,
  checkSignal,
  withinOptions,
  overLimit,
  aborted,
  MAX_LIMIT,
  MAX_MS,
} = require('./base')
const { modeOption, unruled, ruleOf, modeOf, event } = require('./ruled')
const CONCURRENT = require('../kinds/concurrent')
const { status: STATUS, token: TOKEN, earliest_expiry_us: EARLIEST_US, now_us: NOW_US } = CONCURRENT.RESULT.lease
const { ok: OK } = CONCURRENT.RESULT.done
const S = { ...CONCURRENT.RESULT.stats } // a plain copy: read at every stats()
const { storeKey } = require('../store/keys')

const { acquire: ACQUIRE, release: RELEASE, extend: EXTEND, poll: POLL, cancel: CANCEL, stats: STATS } = CONCURRENT.OP

// Lease and waiter ids: unique across processes (random process tag) and within one.
const PROCESS_TAG = randomBytes(8).toString('hex')
let sequence = 0
const nextId = () => `${PROCESS_TAG}-${(++sequence).toString(36)}`

/** A slot of a ConcurrentLimiter, held until released or until its lock time passes. */
class Lease {
  constructor(limiter, name, token, degraded = false) {
    this._limiter = limiter
    this._id = name // `id|token|acquiredUs` for a lease taken at once, the id for a handed-over one
    /** Fencing token: strictly increasing per limiter; pass it to the resource you protect. */
    this.token = token
    /** Granted without Redis (by the store's `whenDown` policy); its token fences nothing. */
    this.degraded = degraded
  }

  /**
   * @internal a lease granted under whenDown 'allow', or by a rule (an allow, a shadow admission),
   * exists nowhere: nothing to ask
   */
  get _free() {
    return this._unheld === true || (this.degraded && this._limiter._store.whenDown === 'allow')
  }

  /** Gives the slot back; true if the lease was still valid (not expired and reclaimed). */
  async release() {
    if (this._free) return true
    const values = await this._limiter._op(RELEASE, this._id, 0)
    return values[OK] === 1
  }

  /** Extends the lease to `ms` (default lockTimeoutMs) from now; false if it had expired. */
  async extend(ms) {
    const lockMs = ms === undefined ? this._limiter._lockTimeoutMs : ms
    // the limiter's keys are only guaranteed to live ttlMs / 2 past any operation
    checkInteger('ms', lockMs, 1, Math.floor(this._limiter._ttlMs / 2), invalidArgument)
    if (this._free) return true
    const values = await this._limiter._op(EXTEND, this._id, 0, lockMs)
    return values[OK] === 1
  }
}

/**
 * A distributed semaphore: at most `limit` leases at once across every process sharing the
 * store (`limit: 1` is a distributed mutex). Waiters queue first come, first served, and a
 * release hands its slot to the next one at once (Redis: pushed over pub/sub, no polling, no
 * blocked connection). A lease not released within `lockTimeoutMs` (its holder crashed, or
 * ran over) is reclaimed.
 */
class ConcurrentLimiter {
  constructor(store, options) {
    const common = limiterOptions(store, options, ['limit', 'lockTimeoutMs', 'maxWaiters', 'mode'])
    this._store = store
    this._name = common.name
    this._waitTimeoutMs = common.waitTimeoutMs
    this._policy = common.policy
    this._ttlMs = common.ttlMs
    this._limit = checkInteger('limit', common.options.limit, 1, MAX_LIMIT)
    const lockTimeoutMs = common.options.lockTimeoutMs === undefined ? 30_000 : common.options.lockTimeoutMs
    this._lockTimeoutMs = checkInteger('lockTimeoutMs', lockTimeoutMs, 1, MAX_MS)
    // waiters this process queues on this name at most (each costs a few KB); beyond it an
    // acquire that cannot be granted at once is refused at once (OverLimitError)
    this._maxWaiters =
      common.options.maxWaiters === undefined
        ? Infinity
        : checkInteger('maxWaiters', common.options.maxWaiters, 0, MAX_LIMIT)
    if (this._ttlMs < 2 * (this._lockTimeoutMs + this._waitTimeoutMs)) {
      // the keys must outlive every lease and waiter they hold; their TTL is refreshed at
      // most every ttlMs / 2
      throw invalidConfig('ttlMs must be at least 2 * (lockTimeoutMs + waitTimeoutMs)')
    }
    this._storeKey = storeKey(store, 'concurrent', common.name)
    this._channel = `${this._storeKey}:wake`
    this._statsKind = 'concurrent'
    this._statsName = common.name
    /** 'enforce', or 'shadow': a lease when one is free, else admitted at once holding none */
    this._mode = modeOption(common.options.mode)
  }

  /** @internal the options shown by `store.limiters()` */
  _statsOptions() {
    return { limit: this._limit, lockTimeoutMs: this._lockTimeoutMs }
  }

  /** @internal counts an acquisition: a lease (admitted) or none (refused); a rule's answer is counted already */
  _count(got) {
    const book = this._store._stats
    if (got === DENIED || (got instanceof Lease && got._byRule === true)) return
    if (book !== null)
      book.decision(this, got instanceof Lease, 1, false, got instanceof Lease && got.degraded === true)
  }

  /**
   * @internal an acquisition answered under the rule of store.rules that applies to this limiter
   * (counted here), or undefined when it goes on as enforced (its limit the rule's): DENIED; an
   * allow's lease, which holds no slot; in shadow mode a lease when one is free now, else one
   * that holds none (`reason: 'shadow'`, counted in `shadowRefused`), never a wait
   */
  async _ruledAcquire() {
    const rule = ruleOf(this)
    const book = this._store._stats
    if (rule !== undefined && rule.access === 'deny') {
      if (book !== null) book.decision(this, false, 1, false, false)
      event(this, 'denied')
      return DENIED
    }
    if (rule !== undefined && rule.access === 'allow') {
      if (book !== null) book.decision(this, true, 0, false, false)
      return unheld(this)
    }
    if (modeOf(this, rule) !== 'shadow') return undefined
    const id = nextId()
    const values = await this._op(ACQUIRE, id, 0)
    const degraded = values.degraded === true
    if (book !== null) book.decision(this, true, 1, false, degraded)
    if (values[STATUS] === 1) {
      const got = lease(this, id, values)
      got._byRule = true
      return got
    }
    event(this, 'shadowRefused')
    const got = unheld(this)
    got.reason = 'shadow'
    return got
  }

  /** @internal the limit in force: a rule's (store.rules), or this limiter's */
  get _limitNow() {
    if (unruled(this)) return this._limit
    const rule = ruleOf(this)
    return rule !== undefined && rule.limit !== undefined ? rule.limit : this._limit
  }

  get name() {
    return this._name
  }
  get limit() {
    return this._limit
  }

  /** @internal one operation: `[limit, lockUs, waitUs, ttlMs]` */
  _op(op, id, waitMs, lockMs = this._lockTimeoutMs) {
    const nums = new Float64Array([this._limitNow, lockMs * 1000, waitMs * 1000, this._ttlMs])
    return this._store._call(CONCURRENT, new CONCURRENT.Call(this._storeKey, op, id, nums))
  }

  /** A lease if a slot is free now and nobody is queued; otherwise null. Never waits. */
  async tryAcquire() {
    if (!unruled(this)) {
      const got = await this._ruledAcquire()
      if (got !== undefined) return got === DENIED ? null : got
    }
    const id = nextId()
    const values = await this._op(ACQUIRE, id, 0)
    const got = values[STATUS] === 1 ? lease(this, id, values) : null
    const book = this._store._stats
    if (book !== null) book.decision(this, got !== null, 1, false, values.degraded === true)
    return got
  }

  /**
   * A lease, waiting up to `waitTimeoutMs` in the queue; then OverLimitError (whatever the
   * policy: `policy` applies to withinLimit). `signal` aborts the wait (ERR_ABORTED).
   */
  async acquire(options) {
    const { signal } = withinOptions(options, ['signal'], 'acquire')
    checkSignal(signal)
    const got = await this._acquire(signal)
    this._count(got)
    if (got instanceof Lease) return got
    throw refusal(this, got)
  }

  /** @internal a Lease, DENIED (a rule), or the retry hint (ms) when the wait timed out */
  async _acquire(signal) {
    if (!unruled(this)) {
      const got = await this._ruledAcquire()
      if (got !== undefined) return got
    }
    const store = this._store
    const full = store._waiters.count(this._channel) >= this._maxWaiters
    if (full || store.status === 'down' || !store._waiters.listening(this._channel)) {
      // fast path: a free slot needs no subscription. While Redis is down, the store's
      // policy answers at once; only under 'local' do waiters queue (on the embedded store).
      const id = nextId()
      const values = await this._op(ACQUIRE, id, 0)
      if (values[STATUS] === 1) return lease(this, id, values)
      if (full || this._waitTimeoutMs === 0 || (values.degraded && store.whenDown !== 'local')) {
        return hintMs(values[EARLIEST_US], values[NOW_US])
      }
    }
    return this._wait(nextId(), signal)
  }

  /** @internal queues waiter `id`; a Lease when granted, the retry hint when timed out */
  async _wait(id, signal) {
    const store = this._store
    let settle
    const outcome = new Promise((resolve) => (settle = resolve))
    let cancelDeadline = null
    let cancelExpiry = null
    // A lease can be reclaimed once it expires: poll then, if that is before the deadline.
    // Grants otherwise arrive pushed (waiter.grant); nothing polls on an interval.
    const armExpiry = (earliest, nowUs) => {
      if (cancelExpiry) cancelExpiry()
      cancelExpiry = null
      if (!(earliest > 0)) return
      const ms = Math.max(1, Math.ceil((earliest - nowUs) / 1000) + 1)
      if (ms < this._waitTimeoutMs) cancelExpiry = timer(store, ms, poll)
    }
    let polling = false
    const poll = async () => {
      if (polling) return
      polling = true
      try {
        const [status, token, earliest, nowUs] = await this._op(POLL, id, 0)
        if (status === 1) settle({ token })
        else if (status === -1) settle({ timeout: true })
        else armExpiry(earliest, nowUs)
      } catch (error) {
        settle({ error })
      } finally {
        polling = false
      }
    }
    const onAbort = () => settle({ aborted: true })
    // listen before anything is sent: an abort during the round trips is kept in `outcome`
    if (signal) signal.addEventListener('abort', onAbort, { once: true })
    const waiter = {
      grant: (token) => settle({ token }),
      resync: poll,
      // the store is closing: give up at once with ERR_CLOSED
      closed: (error) => settle({ error }),
    }
    try {
      await store._waiters.enter(id, waiter, this._channel)
      try {
        const values = await this._op(ACQUIRE, id, this._waitTimeoutMs)
        const status = values[STATUS]
        const earliest = values[EARLIEST_US]
        const nowUs = values[NOW_US]
        if (status === 1) return lease(this, id, values)
        if (values.degraded && store.whenDown !== 'local') {
          // Redis went down on the way: the policy answered, do not wait
          const c = await this._op(CANCEL, id, 0)
          if (c[STATUS] === 1) return new Lease(this, id, c[TOKEN], true)
          return hintMs(c[EARLIEST_US] || earliest, c[NOW_US] || nowUs)
        }
        armExpiry(earliest, nowUs)
        cancelDeadline = timer(store, this._waitTimeoutMs, () => settle({ timeout: true }))
        const result = await outcome
        // queued on the embedded store (Redis down, whenDown 'local'): a local grant
        const local = values.degraded === true
        if (result.token !== undefined) return new Lease(this, id, result.token, local)
        if (result.error) throw result.error
        // timed out or aborted: leave the queue; a grant that raced the timeout is still ours
        const cancelled = await this._op(CANCEL, id, 0)
        const [cstatus, ctoken, cearliest, cnow] = cancelled
        if (cstatus === 1) {
          const granted = new Lease(this, id, ctoken, cancelled.degraded === true)
          if (!result.aborted) return granted
          await granted.release().catch(() => {})
        }
        if (result.aborted) throw aborted(signal)
        return hintMs(cearliest, cnow)
      } finally {
        store._waiters.leave(id, this._channel)
      }
    } finally {
      if (cancelDeadline) cancelDeadline()
      if (cancelExpiry) cancelExpiry()
      if (signal) signal.removeEventListener('abort', onAbort)
    }
  }

  /**
   * Runs `fn(lease)` holding a slot, and releases it in every outcome. Over the limit after
   * `waitTimeoutMs`: OverLimitError (policy 'raise') or undefined without running `fn`
   * (policy 'skip').
   */
  async withinLimit(fn, options) {
    if (typeof fn !== 'function') throw invalidArgument('fn must be a function')
    const { signal } = withinOptions(options, ['signal'], 'withinLimit')
    checkSignal(signal)
    const lease = await this._acquire(signal)
    this._count(lease)
    if (!(lease instanceof Lease)) {
      if (this._policy === 'skip') return undefined
      throw refusal(this, lease)
    }
    let failed = false
    try {
      return await fn(lease)
    } catch (err) {
      failed = true
      throw err
    } finally {
      const released = lease.release()
      // after a failure of fn, its error wins over a failure to release
      if (failed) await released.catch(() => {})
      else await released
    }
  }

  /**
   * Counters since the limiter's keys were created (they live `ttlMs` after the last
   * operation): leases `held` and `heldTimeMs`, `immediate` and `waited` acquisitions,
   * `waitTimeMs`, `overages` (leases that outlived lockTimeoutMs), `reclaimed`, and the
   * `current` holders and `waiting` waiters; and the fields every limiter has (`admitted`,
   * `refused`: a tryAcquire that returned null or an acquire that timed out, ...).
   */
  async stats() {
    const [v, common] = await Promise.all([this._op(STATS, 'stats', 0), this._store._statsOf('concurrent', this._name)])
    return {
      ...common,
      held: v[S.held],
      heldTimeMs: Math.round(v[S.held_us] / 1000),
      immediate: v[S.immediate],
      waited: v[S.waited],
      waitTimeMs: Math.round(v[S.wait_us] / 1000),
      overages: v[S.overages],
      reclaimed: v[S.reclaimed],
      current: v[S.current],
      waiting: v[S.waiters],
    }
  }
}

/** What a denied acquisition answers (a rule of store.rules), counted where the rule answered. */
const DENIED = Object.freeze({ denied: true })

/** The OverLimitError of a refused acquisition: DENIED, or the retry hint (ms). */
const refusal = (limiter, got) => (got === DENIED ? overLimit(limiter, 0, 'denied') : overLimit(limiter, got))

/** A lease a rule granted, holding no slot (an allow, a shadow admission): its token fences nothing. */
function unheld(limiter) {
  const got = new Lease(limiter, '', 0)
  got._unheld = true
  got._byRule = true
  return got
}

/** The lease of an ACQUIRE reply that granted it at once */
function lease(limiter, id, values) {
  const token = values[TOKEN]
  return new Lease(limiter, `${id}|${token}|${values[NOW_US]}`, token, values.degraded === true)
}

/**
 * Calls `fn` after `ms` on the store's clock, however long (waitTimeoutMs and lockTimeoutMs
 * go up to 10 years: setTimeout alone would fire after 1 ms); returns a function that cancels
 * it.
 */
function timer(store, ms, fn) {
  return longTimeout(fn, ms, { clock: store.clock })
}

function hintMs(earliest, nowUs) {
  return earliest > 0 ? Math.max(0, Math.ceil((earliest - nowUs) / 1000)) : 0
}

module.exports = { ConcurrentLimiter, Lease }
