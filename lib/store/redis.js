'use strict'
// A Redis (or Redis Cluster) store over one native connection pool and, on a standalone
// Redis, a direct connection: the store's calls of every kind, its lifetime (connect, close)
// and what it shows (status, batching). Lanes, the circuit, waiters and the statistics writer
// are in files of their own.

const EventEmitter = require('node:events')
const native = require('../native')
const { SluiceError, fromNative, invalidConfig } = require('../errors')
const { encodeParts, appendPart } = require('../codec')
const { StatsBook } = require('../stats')
const { DirectConnection } = require('./direct')
const { DenyCache } = require('./denycache')
const { WhenDown } = require('./whendown')
const { redisOptions } = require('./options')
const { Circuit } = require('./circuit')
const { Lanes } = require('./lanes')
const { Waiters, Channels } = require('./waiters')
const { StatsWriter } = require('./stats-writer')
const { MemoryStore } = require('./memory')
const { closedError } = require('./errors')

const PRIVATE = Symbol('sluice.private')
const LIMIT_RESET = -2
const LIMIT_ADJUST = -1
const SLIDING_TAKE = 0
const SLIDING_RESET = 2

/**
 * A Redis (or Redis Cluster) store over one native connection pool. Calls are batched per kind
 * (see lanes.js): a call goes out at once when its queue has room, and calls arriving while
 * round trips are under way leave together, one napi crossing and one script call per 64 of
 * them (per hash slot on a cluster).
 *
 * When Redis is found down (a call fails with ERR_STORE_UNAVAILABLE or ERR_TIMEOUT) the
 * circuit opens: `status` turns 'down', 'down' is emitted, and no call goes to Redis (none
 * waits for `commandTimeoutMs` any more) until a probe, every `probeIntervalMs`, gets an
 * answer: then 'up'. Meanwhile calls are answered by `whenDown` (see whendown.js).
 */
class RedisStore extends EventEmitter {
  constructor(token, nativeStore, direct, o) {
    if (token !== PRIVATE) throw invalidConfig('use `await RedisStore.connect(options)`')
    super()
    const { keyPrefix, clock } = o
    this.keyPrefix = keyPrefix
    this.clock = clock
    this._native = nativeStore
    this._commandTimeoutMs = o.commandTimeoutMs
    this._closed = false
    this._sync = false
    // concurrent limiters: this process's waiters and the grant channels they listen on
    this._waiters = new Waiters()
    this._channels = new Channels(this)
    // the circuit breaker and the store-down policy
    const policy = new WhenDown(o.whenDown, o.probeIntervalMs, {
      // whenDown 'local': counts from zero for the outage; its grants wake this store's waiters
      makeLocal: () => {
        const local = new MemoryStore({ keyPrefix, clock, stats: false })
        local._waiters = this._waiters
        local._sharedWaiters = true
        return local
      },
      nowUs: () => this._localUs(),
    })
    this._circuit = new Circuit(this, o.probeIntervalMs, policy)
    this._denyCache = o.denyCacheKeys > 0 ? new DenyCache(o.denyCacheKeys) : null
    // statistics: counted here, written every statsFlushMs (one pipeline per slot) and on close
    this._stats = o.stats ? new StatsBook(() => this._nowMsLocal(), false) : null
    this._statsWriter = new StatsWriter(this, o.statsTtlMs, o.statsFlushMs)
    // One queue per kind. Its batches go on the direct connection when it is up, else on one
    // pool connection (its lane): either way they reach Redis in call order.
    this._lanes = new Lanes(this, direct, o.connectTimeoutMs)
    const queue = (lane, send) => this._lanes.queue(lane, send)
    this._pacerCalls = queue(0, (c, res, rej, q) => this._sendPacer(c, res, rej, q))
    this._limitCalls = queue(1, (c, res, rej, q) => this._sendLimits(c, res, rej, q))
    this._concurrentCalls = queue(2, (c, res, rej, q) => this._sendConcurrent(c, res, rej, q))
    this._slidingCalls = queue(3, (c, res, rej, q) => this._sendSliding(c, res, rej, q))
    this._quotaCalls = queue(4, (c, res, rej, q) => this._sendQuota(c, res, rej, q))
    this._fairCalls = queue(5, (c, res, rej, q) => this._sendFair(c, res, rej, q))
  }

  /**
   * Connects a pool and waits until every connection is up (and, on a cluster, the slot map
   * is known). Accepts a URL string or options.
   */
  static async connect(options) {
    const o = redisOptions(options)
    let nativeStore
    try {
      nativeStore = await native.connectRedis(o.pool)
    } catch (err) {
      throw fromNative(err)
    }
    let direct = null
    if (o.directConnection && !nativeStore.isCluster) {
      const timeouts = { connectTimeoutMs: o.connectTimeoutMs, commandTimeoutMs: o.commandTimeoutMs }
      direct = nativeStore.startedUp
        ? await DirectConnection.open(o.url, timeouts)
        : DirectConnection.idle(o.url, timeouts)
    }
    const store = new RedisStore(PRIVATE, nativeStore, direct, o)
    if (!nativeStore.startedUp) {
      // Redis could not be reached: the store starts with its circuit open, answering by
      // whenDown, and its connections keep dialling until a probe gets through
      const reason = `cannot connect to Redis within ${o.connectTimeoutMs} ms`
      store._circuit.trip(new SluiceError('ERR_STORE_UNAVAILABLE', reason), undefined)
    }
    return store
  }

  /** 'up', or 'down' from the first call that found Redis unreachable until a probe finds it back. */
  get status() {
    return this._circuit.status
  }

  /** The store-down policy: 'error', 'allow', 'deny' or 'local'. */
  get whenDown() {
    return this._circuit.policy.mode
  }

  /** Calls answered "refused" by the local deny cache, without a round trip. */
  get localDenials() {
    return this._denyCache === null ? 0 : this._denyCache.hits
  }

  /** Whether this store talks to a Redis Cluster. */
  get isCluster() {
    return this._native.isCluster
  }

  /**
   * How the calls made so far were batched: `calls` store calls went out in `batches` native
   * calls (each one script call per hash slot), `direct` of them on the direct connection.
   */
  get batching() {
    return this._lanes.batching
  }

  _nowUs() {
    return this.clock ? this.clock._nowUs() : -1
  }

  /** @internal the local clock, µs (the deny cache's) */
  _localUs() {
    return this.clock ? this.clock._nowUs() : Date.now() * 1000
  }

  /** @internal ms on the store's clock as this process sees it */
  _nowMsLocal() {
    return this.clock ? this.clock.now() : Date.now()
  }

  /** @internal one pacer call */
  _pacer(owner, key, weight, qps, maxBurst, factor, pace) {
    if (this._closed) return Promise.reject(closedError())
    const cache = this._denyCache
    let sig = null
    let atUs = 0
    if (cache !== null && !pace) {
      sig = owner._sig
      atUs = this._localUs()
      const hit = cache.get(key, sig, weight, atUs)
      if (hit !== null) {
        const v = hit.values
        return Promise.resolve(owner._outcome([hit.untilUs - atUs, v[1], v[2]], 0, weight, false))
      }
    }
    return this._pacerCalls.batcher.add([
      owner,
      weight,
      key,
      [1, pace ? 1 : 0, weight, qps, maxBurst, factor],
      sig,
      atUs,
    ])
  }

  /** @internal one composite call: its members' keys, args in the flat batch encoding */
  _pacerGroup(owner, weight, keys, args) {
    if (this._closed) return Promise.reject(closedError())
    return this._pacerCalls.batcher.add([owner, weight, keys, args, null, 0])
  }

  _sendPacer(calls, resolve, reject, q) {
    const keys = []
    const args = []
    for (const [, , k, a] of calls) {
      if (typeof k === 'string') keys.push(k)
      else for (const key of k) keys.push(key)
      for (const x of a) args.push(x)
    }
    const nowUs = this._nowUs()
    const k = encodeParts(keys)
    const a = new Float64Array(args)
    return this._lanes.batch(
      q,
      reject,
      () => native.redisPacerDirect(this._native, k, a, nowUs),
      (lane) => native.redisPacerBatch(this._native, k, a, nowUs, lane),
      (out) => {
        let offset = 0
        const cache = this._denyCache
        for (let e = 0; e < calls.length; e++) {
          const [owner, weight, k, , sig, atUs] = calls[e]
          const members = typeof k === 'string' ? 1 : k.length
          let wrong = false
          for (let m = 0; m < members; m++) wrong ||= out[offset + 3 * m] === WhenDown.WRONG_TYPE
          if (wrong) {
            reject[e](WhenDown.wrongType(members === 1 ? 'pacer' : 'pacer composite', this.keyPrefix))
          } else {
            if (sig !== null && out[offset] > 0)
              cache.set(k, sig, weight, atUs, out[offset], out.slice(offset, offset + 3))
            resolve[e](owner._outcome(out, offset, weight, false))
          }
          offset += 3 * members
        }
      },
      () => this._circuit.policy.answer(calls, resolve, reject, (c) => this._circuit.policy.pacer(c)),
      keys[0],
    )
  }

  /** @internal one rate-limiter call */
  _limit(owner, key, kind, weight, limit, intervalUs, maxWaitUs, count = false) {
    if (this._closed) return Promise.reject(closedError())
    const cache = this._denyCache
    let atUs = 0
    if (cache !== null) {
      atUs = this._localUs()
      if (maxWaitUs === 0) {
        const hit = cache.get(key, owner._sig, weight, atUs)
        if (hit !== null) {
          const v = hit.values
          const resetUs = Math.max(0, v[3] - (atUs - hit.atUs))
          const d = owner._decision([0, v[1], hit.untilUs - atUs, resetUs], 0, false)
          if (count) owner._count(d, weight)
          return Promise.resolve(d)
        }
      } else if (maxWaitUs === LIMIT_RESET || maxWaitUs === LIMIT_ADJUST) {
        cache.delete(key)
      }
    }
    return this._limitCalls.batcher.add([owner, key, kind, weight, limit, intervalUs, maxWaitUs, atUs, count])
  }

  _sendLimits(calls, resolve, reject, q) {
    const n = calls.length
    const args = new Float64Array(n * 5)
    let keys = ''
    for (let e = 0; e < n; e++) {
      const c = calls[e]
      keys = appendPart(keys, c[1])
      args.set([c[2], c[3], c[4], c[5], c[6]], e * 5)
    }
    const nowUs = this._nowUs()
    return this._lanes.batch(
      q,
      reject,
      () => native.redisLimitDirect(this._native, keys, args, nowUs),
      (lane) => native.redisLimitBatch(this._native, keys, args, nowUs, lane),
      (out) => {
        const cache = this._denyCache
        for (let e = 0; e < n; e++) {
          const c = calls[e]
          if (out[4 * e + 1] === WhenDown.WRONG_TYPE) {
            reject[e](WhenDown.wrongType(`${c[0]._statsKind} limiter`, this.keyPrefix))
            continue
          }
          if (cache !== null && c[6] === 0 && out[4 * e] === 0) {
            cache.set(c[1], c[0]._sig, c[3], c[7], out[4 * e + 2], out.slice(4 * e, 4 * e + 4))
          }
          const d = c[0]._decision(out, 4 * e, false)
          if (c[8]) c[0]._count(d, c[3])
          resolve[e](d)
        }
      },
      () =>
        this._circuit.policy.answer(calls, resolve, reject, (c) => {
          const d = this._circuit.policy.limit(c)
          if (c[8]) c[0]._count(d, c[3])
          return d
        }),
      calls[0][1],
    )
  }

  /** @internal one sliding-window call */
  _slidingCall(owner, key, nums) {
    if (this._closed) return Promise.reject(closedError())
    const cache = this._denyCache
    let atUs = 0
    if (cache !== null) {
      atUs = this._localUs()
      if (nums[0] === SLIDING_TAKE) {
        const hit = cache.get(key, owner._sig, nums[1], atUs)
        if (hit !== null) {
          const out = hit.values.slice()
          const elapsedUs = atUs - hit.atUs
          out[1] = hit.untilUs - atUs
          for (let i = 3; i < out.length; i += 2) out[i] = Math.max(0, out[i] - elapsedUs)
          return Promise.resolve(owner._decision(out, 0, false))
        }
      } else if (nums[0] === SLIDING_RESET) {
        cache.delete(key)
      }
    }
    return this._slidingCalls.batcher.add([owner, key, nums, atUs])
  }

  _sendSliding(calls, resolve, reject, q) {
    const keys = encodeParts(calls.map((c) => c[1]))
    const nums = new Float64Array(calls.flatMap((c) => c[2]))
    const nowUs = this._nowUs()
    return this._lanes.batch(
      q,
      reject,
      () => native.redisSlidingDirect(this._native, keys, nums, nowUs),
      (lane) => native.redisSlidingBatch(this._native, keys, nums, nowUs, lane),
      (out) => {
        const cache = this._denyCache
        let o = 0
        for (let e = 0; e < calls.length; e++) {
          const [owner, key, n, atUs] = calls[e]
          const length = 2 * n[2] + 2 // allowed, retry, then remaining and retry per window
          if (out[o + 1] === WhenDown.WRONG_TYPE) {
            reject[e](WhenDown.wrongType('sliding-window limiter', this.keyPrefix))
            o += length
            continue
          }
          if (cache !== null && n[0] === SLIDING_TAKE && out[o] === 0) {
            cache.set(key, owner._sig, n[1], atUs, out[o + 1], out.slice(o, o + length))
          }
          resolve[e](owner._decision(out, o, false))
          o += length
        }
      },
      () => this._circuit.policy.answer(calls, resolve, reject, (c) => this._circuit.policy.sliding(c)),
      calls[0][1],
    )
  }

  /**
   * @internal one quota call (timestamp -1: Redis' clock); consecutive checkAndUse calls on
   * one slot share one script call; resolves with its flat result
   */
  _quotaCall(keys, nums, mode, timestamp) {
    if (this._closed) return Promise.reject(closedError())
    return this._quotaCalls.batcher.add([keys, nums, mode, timestamp])
  }

  _sendQuota(calls, resolve, reject, q) {
    let length = 0
    for (const c of calls) length += c[1].length
    const flat = new Float64Array(length)
    const heads = new Float64Array(calls.length * 3)
    let at = 0
    for (let e = 0; e < calls.length; e++) {
      const [, nums, mode, timestamp] = calls[e]
      flat.set(nums, at)
      at += nums.length
      heads[3 * e] = nums.length
      heads[3 * e + 1] = mode
      heads[3 * e + 2] = timestamp
    }
    const keys = calls.map((c) => c[0])
    return this._lanes.batch(
      q,
      reject,
      () => native.redisQuotaDirect(this._native, keys, heads, flat),
      (lane) => native.redisQuotaBatch(this._native, keys, heads, flat, lane),
      (out) => {
        let o = 0
        for (let e = 0; e < calls.length; e++) {
          const length = out[o]
          // the timestamp is the marker
          if (out[o + 1] === WhenDown.WRONG_TYPE) reject[e](WhenDown.wrongType('quota', this.keyPrefix))
          else resolve[e](out.subarray(o + 1, o + 1 + length))
          o += 1 + length
        }
      },
      () => this._circuit.policy.answer(calls, resolve, reject, (c) => this._circuit.policy.quota(c)),
      keys[0],
    )
  }

  /**
   * @internal blocks a pacer on lane 0; resolves with µs until the block ends. While Redis
   * is down, only 'local' can record it (in this process).
   */
  async _pacerBlock(key, nums) {
    if (this._closed) throw closedError()
    if (this.status === 'down') {
      if (this._circuit.policy.mode === 'local') return this._circuit.policy.local._pacerBlock(key, nums)
      throw this._circuit.policy.error
    }
    try {
      const out = await native.redisPacerBlock(this._native, key, nums, this._nowUs(), 0)
      return out[0]
    } catch (err) {
      const error = fromNative(err)
      if (this._circuit.opens(error)) this._circuit.trip(error, key)
      throw error
    }
  }

  /** @internal one fair-tenant assignment; resolves with a count per rule */
  _fairCall(key, id, nums) {
    if (this._closed) return Promise.reject(closedError())
    return this._fairCalls.batcher.add([key, id, nums])
  }

  _sendFair(calls, resolve, reject, q) {
    const keys = encodeParts(calls.map((c) => c[0]))
    const ids = encodeParts(calls.map((c) => c[1]))
    let length = 0
    for (const c of calls) length += c[2].length
    const nums = new Float64Array(length)
    let at = 0
    for (const c of calls) {
      nums.set(c[2], at)
      at += c[2].length
    }
    const nowUs = this._nowUs()
    return this._lanes.batch(
      q,
      reject,
      () => native.redisFairDirect(this._native, keys, ids, nums, nowUs),
      (lane) => native.redisFairBatch(this._native, keys, ids, nums, nowUs, lane),
      (out) => {
        let o = 0
        for (let e = 0; e < calls.length; e++) {
          const rules = calls[e][2][1]
          if (out[o] === WhenDown.WRONG_TYPE) reject[e](WhenDown.wrongType('fair-tenant rule set', this.keyPrefix))
          else resolve[e](out.subarray(o, o + rules))
          o += rules
        }
      },
      () => this._circuit.policy.answer(calls, resolve, reject, (c) => this._circuit.policy.fair(c)),
      calls[0][0],
    )
  }

  /** @internal one concurrent-limiter operation; resolves with its reply */
  _concurrent(key, op, id, nums) {
    if (this._closed) return Promise.reject(closedError())
    return this._concurrentCalls.batcher.add([key, id, op, nums])
  }

  _sendConcurrent(calls, resolve, reject, q) {
    const keys = encodeParts(calls.map((c) => c[0]))
    const ids = encodeParts(calls.map((c) => c[1]))
    const nums = new Float64Array(calls.flatMap(([, , op, n]) => [op, n[0], n[1], n[2], n[3]]))
    const nowUs = this._nowUs()
    return this._lanes.batch(
      q,
      reject,
      () => native.redisConcurrentDirect(this._native, keys, ids, nums, nowUs),
      (lane) => native.redisConcurrentBatch(this._native, keys, ids, nums, nowUs, lane),
      ({ values, grants }) => {
        // this process's own waiters are woken from the reply, before the published message
        for (const grant of grants) this._waiters.wake(grant)
        for (let e = 0; e < calls.length; e++) {
          if (values[9 * e] === WhenDown.WRONG_TYPE) reject[e](WhenDown.wrongType('concurrent limiter', this.keyPrefix))
          else resolve[e](values.subarray(9 * e, 9 * (e + 1)))
        }
      },
      () => this._circuit.policy.concurrent(calls, resolve, reject),
      calls[0][0],
    )
  }

  /** @internal subscribes to a grant channel (see Channels.listen) */
  _listen(channel) {
    return this._channels.listen(channel)
  }

  _unlisten(channel) {
    this._channels.unlisten(channel)
  }

  _wakeLoop() {
    this._channels.wakeLoop()
  }

  _waiterDone() {
    this._channels.waiterDone()
  }

  /** @internal writes the counts taken since the last flush (see StatsWriter.flush) */
  _flushStats() {
    return this._statsWriter.flush()
  }

  _statsKey(kind, name) {
    return this._statsWriter.statsKey(kind, name)
  }

  _registryKeys() {
    return this._statsWriter.registryKeys()
  }

  /** @internal the statistics of `kind:name`: the store's, plus this process's unwritten counts */
  async _statsOf(kind, name) {
    return (await this._statsWriter.detail([{ kind, name }]))[0].stats
  }

  /**
   * @internal statistics and per-minute history (last 30 minutes) of each `{ kind, name }`, in
   * one script call per hash slot: `[{ stats, history: [{ t, admitted, refused }] }]`
   */
  _statsDetail(list) {
    return this._statsWriter.detail(list)
  }

  /**
   * The limiters used through any store on this Redis (with this key prefix) within
   * `statsTtlMs`, at most 10,000 (the least recently used dropped first), newest first:
   * `{ kind, name, options, lastUse }` (lastUse in ms since the epoch).
   */
  limiters() {
    return this._statsWriter.limiters()
  }

  /** Statistics events this store could not write (Redis was down when it closed) or forgot. */
  get statsDropped() {
    return this._stats === null ? 0 : this._stats.dropped
  }

  /**
   * Writes the last statistics, then closes: later calls reject with ERR_CLOSED, and so do
   * the concurrent-limiter waiters queued now (at once, not at their deadlines).
   */
  close() {
    if (this._closing === undefined) this._closing = this._close()
    return this._closing
  }

  async _close() {
    if (this._closed) return
    await this._statsWriter.close()
    this._closed = true
    // batches already written settle with their real replies (Redis may have applied them: a
    // charge, a lease); calls not yet sent were refused with ERR_CLOSED above and never go.
    await this._lanes.drain(2 * this._commandTimeoutMs + 100)
    this._waiters.closeAll(closedError())
    this._circuit.close()
    this._lanes.close()
    try {
      await this._native.close()
    } catch (err) {
      throw fromNative(err)
    }
  }
}

module.exports = { RedisStore }
