'use strict'

const native = require('../index.js')
const { SluiceError, fromNative, invalidConfig } = require('./errors')
const { ManualClock } = require('./clock')

const PRIVATE = Symbol('sluice.private')
/** Calls per native call (and script call): big enough to amortise the napi crossing and the
 * round trip, small enough that Redis works on one chunk while Node handles the previous one.
 * The native side sends the chunks in call order. */
const MAX_BATCH = 64
/** New keys between two checks whether the memory store should drop expired keys. */
const SWEEP_EVERY = 4096

function storeOptions(options, allowed) {
  if (options === undefined || options === null) options = {}
  if (typeof options !== 'object' || Array.isArray(options)) throw invalidConfig('store options must be an object')
  for (const name of Object.keys(options)) {
    if (!allowed.includes(name)) throw invalidConfig(`unknown store option ${JSON.stringify(name)}`)
  }
  const keyPrefix = options.keyPrefix === undefined ? 'sluice' : options.keyPrefix
  if (typeof keyPrefix !== 'string' || keyPrefix.length === 0 || keyPrefix.length > 128 || /[{}\n]/.test(keyPrefix)) {
    throw invalidConfig('keyPrefix must be a string of 1..128 characters without braces or newlines')
  }
  const clock = options.clock === undefined ? null : options.clock
  if (clock !== null && !(clock instanceof ManualClock)) throw invalidConfig('clock must be a ManualClock')
  return { keyPrefix, clock }
}

const closedError = () => new SluiceError('ERR_CLOSED', 'the store is closed')

/**
 * The calls of one tick, flushed together on the next: `add(call)` queues one call (an
 * array of its fields) and resolves with what `flush({ calls, resolve, reject })` gives it.
 */
class TickQueue {
  constructor(flush) {
    this._flush = flush
    this._batch = null
  }

  add(call) {
    return new Promise((resolve, reject) => {
      if (this._batch === null) {
        this._batch = { calls: [], resolve: [], reject: [] }
        process.nextTick(() => {
          const batch = this._batch
          this._batch = null
          this._flush(batch)
        })
      }
      this._batch.calls.push(call)
      this._batch.resolve.push(resolve)
      this._batch.reject.push(reject)
    })
  }
}

/**
 * The concurrent-limiter waiters of this process, by waiter id. A grant message
 * (`"<id> <token>"`) resolves its waiter; `"*"` asks every waiter to re-poll (a grant may
 * have been missed while the listener reconnected).
 */
class Waiters {
  constructor() {
    this._map = new Map()
  }
  get size() {
    return this._map.size
  }
  add(id, waiter) {
    this._map.set(id, waiter)
  }
  delete(id) {
    this._map.delete(id)
  }
  wake(message) {
    if (message === '*') {
      for (const waiter of this._map.values()) waiter.resync()
      return
    }
    const space = message.indexOf(' ')
    const waiter = this._map.get(message.slice(0, space))
    if (waiter) waiter.grant(Number(message.slice(space + 1)))
  }
}

/**
 * The embedded store: state in this process, decisions synchronous in native code (no thread
 * hop), the same semantics as Redis. For tests, single-process apps and the demo.
 */
class MemoryStore {
  constructor(options) {
    const { keyPrefix, clock } = storeOptions(options, ['keyPrefix', 'clock'])
    this.keyPrefix = keyPrefix
    this.clock = clock
    this._io = new Float64Array(6) // numbers in, decision out (see memoryPacerStep)
    this._handle = native.memoryStoreNew(this._io)
    this._ids = new Map() // store key -> interned id; cleared whenever a sweep frees ids
    this._untilSweep = SWEEP_EVERY
    this._closed = false
    this._sync = true
    this._waiters = new Waiters()
  }

  /** @internal one pacer call, synchronous; returns the shared result buffer */
  _step(key, weight, qps, maxBurst, factor, pace) {
    if (this._closed) throw closedError()
    const nowUs = this.clock ? this.clock._nowUs() : -1
    try {
      const id = this._id(key, nowUs)
      const io = this._io
      io[0] = weight
      io[1] = qps
      io[2] = maxBurst
      io[3] = factor
      io[4] = pace ? 1 : 0
      io[5] = nowUs
      native.memoryPacerStep(this._handle, id)
    } catch (err) {
      throw fromNative(err)
    }
    return this._io
  }

  /** The interned id of a key (interning it, and now and then sweeping expired keys). */
  _id(key, nowUs) {
    let id = this._ids.get(key)
    if (id === undefined) {
      if (--this._untilSweep <= 0) this._sweep(nowUs)
      id = native.memoryIntern(this._handle, key)
      this._ids.set(key, id)
    }
    return id
  }

  _sweep(nowUs) {
    this._untilSweep = SWEEP_EVERY
    if (native.memorySweep(this._handle, nowUs)) this._ids.clear()
  }

  /**
   * @internal runs `call(nowUs)` on the engine (nowUs -1: the system clock): ERR_CLOSED once
   * closed, native errors with their codes
   */
  _run(call) {
    if (this._closed) throw closedError()
    try {
      return call(this.clock ? this.clock._nowUs() : -1)
    } catch (err) {
      throw fromNative(err)
    }
  }

  /** @internal one composite call: keys[i] with args of the flat batch encoding */
  _group(keys, args) {
    return this._run((nowUs) => {
      if ((this._untilSweep -= keys.length) <= 0) this._sweep(nowUs)
      return native.memoryPacerBatch(this._handle, keys.join('\n'), new Float64Array(args), nowUs)
    })
  }

  /** @internal one rate-limiter call, synchronous: `[allowed, remaining, retryAfterUs, resetAfterUs]` */
  _limit(key, kind, weight, limit, intervalUs, maxWaitUs) {
    if (this._closed) throw closedError()
    const nowUs = this.clock ? this.clock._nowUs() : -1
    try {
      const id = this._id(key, nowUs)
      const io = this._io
      io[0] = kind
      io[1] = weight
      io[2] = limit
      io[3] = intervalUs
      io[4] = maxWaitUs
      io[5] = nowUs
      native.memoryLimitStep(this._handle, id)
    } catch (err) {
      throw fromNative(err)
    }
    return this._io
  }

  /** @internal one sliding-window call, synchronous (see memorySliding) */
  _sliding(key, nums) {
    return this._run((nowUs) => native.memorySliding(this._handle, key, new Float64Array(nums), nowUs))
  }

  /** @internal one quota call, synchronous (see memoryQuota) */
  _quota(keys, nums, mode, timestamp) {
    return this._run((nowUs) => native.memoryQuota(this._handle, keys, nums, mode, timestamp, nowUs))
  }

  /** @internal one concurrent-limiter operation; grants go to the waiters of this process */
  async _concurrent(key, op, id, nums) {
    const reply = this._run((nowUs) => native.memoryConcurrent(this._handle, key, op, id, nums, nowUs))
    for (const grant of reply.grants) this._waiters.wake(grant)
    return reply.values
  }

  /** @internal the in-process waiters of concurrent limiters (grants come from `_concurrent`) */
  async _listen() {
    if (this._closed) throw closedError()
  }

  _unlisten() {}

  _wakeLoop() {}

  _waiterDone() {}

  async close() {
    this._closed = true
  }
}

/**
 * A Redis (or Redis Cluster) store over one native connection pool. Calls made in the same
 * tick are decided together: one napi crossing, and one script call per 64 of them (per hash
 * slot on a cluster), so a busy process pays the round trip once per batch, not per call.
 */
class RedisStore {
  constructor(token, nativeStore, keyPrefix, clock) {
    if (token !== PRIVATE) throw invalidConfig('use `await RedisStore.connect(options)`')
    this.keyPrefix = keyPrefix
    this.clock = clock
    this._native = nativeStore
    this._closed = false
    this._sync = false
    this._keys = []
    this._args = []
    this._owners = [] // the pacer or composite that builds each entry's outcome
    this._weights = []
    this._resolve = []
    this._reject = []
    this._members = []
    this._scheduled = false
    this._lane = 0 // every chunk of one flush goes on one connection, so it keeps call order
    this._flushBound = () => this._flush()
    // rate-limiter calls of this tick (same batching as the pacer's, their own script)
    this._lkeys = []
    this._largs = []
    this._lowners = []
    this._lresolve = []
    this._lreject = []
    this._lscheduled = false
    this._lflushBound = () => this._flushLimits()
    // concurrent limiters: subscribed grant channels and this process's waiters
    this._waiters = new Waiters()
    this._channels = new Map() // channel -> { count, ready }
    this._listening = false
    // concurrent, sliding-window and quota calls of this tick
    this._concurrentCalls = new TickQueue((batch) => this._flushConcurrent(batch))
    this._slidingCalls = new TickQueue((batch) => this._flushSliding(batch))
    this._quotaCalls = new TickQueue((batch) => this._flushQuota(batch))
  }

  /**
   * Connects a pool and waits until every connection is up (and, on a cluster, the slot map
   * is known). Accepts a URL string or options.
   */
  static async connect(options) {
    if (typeof options === 'string') options = { url: options }
    const names = ['keyPrefix', 'clock', 'url', 'cluster', 'poolSize', 'commandTimeoutMs', 'connectTimeoutMs']
    const { keyPrefix, clock } = storeOptions(options, names)
    const o = options || {}
    if (o.url !== undefined && typeof o.url !== 'string') throw invalidConfig('url must be a string')
    if (o.cluster !== undefined) {
      if (!Array.isArray(o.cluster) || o.cluster.length === 0 || !o.cluster.every((u) => typeof u === 'string')) {
        throw invalidConfig('cluster must be a non-empty array of redis:// URLs')
      }
    }
    for (const name of ['poolSize', 'commandTimeoutMs', 'connectTimeoutMs']) {
      if (o[name] !== undefined && typeof o[name] !== 'number') throw invalidConfig(`${name} must be a number`)
    }
    let nativeStore
    try {
      nativeStore = await native.connectRedis({
        url: o.url,
        cluster: o.cluster,
        poolSize: o.poolSize,
        commandTimeoutMs: o.commandTimeoutMs,
        connectTimeoutMs: o.connectTimeoutMs,
      })
    } catch (err) {
      throw fromNative(err)
    }
    return new RedisStore(PRIVATE, nativeStore, keyPrefix, clock)
  }

  /** Whether this store talks to a Redis Cluster. */
  get isCluster() {
    return this._native.isCluster
  }

  _enqueue(owner, weight, keyCount, resolve, reject) {
    this._owners.push(owner)
    this._weights.push(weight)
    this._resolve.push(resolve)
    this._reject.push(reject)
    this._members.push(keyCount)
    if (!this._scheduled) {
      this._scheduled = true
      process.nextTick(this._flushBound)
    }
  }

  /** @internal one pacer call, decided with the other calls of this tick */
  _pacer(owner, key, weight, qps, maxBurst, factor, pace) {
    if (this._closed) return Promise.reject(closedError())
    return new Promise((resolve, reject) => {
      this._keys.push(key)
      this._args.push(1, pace ? 1 : 0, weight, qps, maxBurst, factor)
      this._enqueue(owner, weight, 1, resolve, reject)
    })
  }

  /** @internal one composite call */
  _pacerGroup(owner, weight, keys, args) {
    if (this._closed) return Promise.reject(closedError())
    return new Promise((resolve, reject) => {
      for (const k of keys) this._keys.push(k)
      for (const a of args) this._args.push(a)
      this._enqueue(owner, weight, keys.length, resolve, reject)
    })
  }

  _flush() {
    this._scheduled = false
    const {
      _keys: keys,
      _args: args,
      _owners: owners,
      _weights: weights,
      _resolve: resolve,
      _reject: reject,
      _members: members,
    } = this
    this._keys = []
    this._args = []
    this._owners = []
    this._weights = []
    this._resolve = []
    this._reject = []
    this._members = []
    const nowUs = this.clock ? this.clock._nowUs() : -1
    const batch = { owners, weights, resolve, reject, members, lane: (this._lane = (this._lane + 1) >>> 0) }
    let entry = 0
    let key = 0
    let arg = 0
    while (entry < owners.length) {
      const end = Math.min(entry + MAX_BATCH, owners.length)
      let keyEnd = key
      for (let e = entry; e < end; e++) keyEnd += members[e]
      const argEnd = arg + 2 * (end - entry) + 4 * (keyEnd - key)
      this._send(
        keys.slice(key, keyEnd).join('\n'),
        new Float64Array(args.slice(arg, argEnd)),
        nowUs,
        entry,
        end,
        batch,
      )
      entry = end
      key = keyEnd
      arg = argEnd
    }
  }

  _send(keys, args, nowUs, start, end, { owners, weights, resolve, reject, members, lane }) {
    const fail = (err) => {
      const error = fromNative(err)
      for (let e = start; e < end; e++) reject[e](error)
    }
    if (this._closed) return fail(closedError())
    let pending
    try {
      pending = native.redisPacerBatch(this._native, keys, args, nowUs, lane)
    } catch (err) {
      return fail(err)
    }
    pending.then((out) => {
      let offset = 0
      for (let e = start; e < end; e++) {
        resolve[e](owners[e]._outcome(out, offset, weights[e]))
        offset += 3 * members[e]
      }
    }, fail)
  }

  /** @internal one rate-limiter call, decided with the other calls of this tick */
  _limit(owner, key, kind, weight, limit, intervalUs, maxWaitUs) {
    if (this._closed) return Promise.reject(closedError())
    return new Promise((resolve, reject) => {
      this._lkeys.push(key)
      this._largs.push(kind, weight, limit, intervalUs, maxWaitUs)
      this._lowners.push(owner)
      this._lresolve.push(resolve)
      this._lreject.push(reject)
      if (!this._lscheduled) {
        this._lscheduled = true
        process.nextTick(this._lflushBound)
      }
    })
  }

  _flushLimits() {
    this._lscheduled = false
    const { _lkeys: keys, _largs: args, _lowners: owners, _lresolve: resolve, _lreject: reject } = this
    this._lkeys = []
    this._largs = []
    this._lowners = []
    this._lresolve = []
    this._lreject = []
    const nowUs = this.clock ? this.clock._nowUs() : -1
    const lane = (this._lane = (this._lane + 1) >>> 0)
    this._chunks(
      keys.length,
      reject,
      (start, end) => {
        const chunk = new Float64Array(args.slice(start * 5, end * 5))
        return native.redisLimitBatch(this._native, keys.slice(start, end).join('\n'), chunk, nowUs, lane)
      },
      (out, start, end) => {
        for (let e = start; e < end; e++) resolve[e](owners[e]._decision(out, 4 * (e - start)))
      },
    )
  }

  /**
   * @internal sends `count` queued calls in native calls of up to MAX_BATCH: `send(start, end)`
   * makes one, `done(out, start, end)` settles its calls; a failure rejects them all
   */
  _chunks(count, reject, send, done) {
    for (let start = 0; start < count; start += MAX_BATCH) {
      const end = Math.min(start + MAX_BATCH, count)
      const fail = (err) => {
        const error = fromNative(err)
        for (let e = start; e < end; e++) reject[e](error)
      }
      if (this._closed) {
        fail(closedError())
        continue
      }
      let pending
      try {
        pending = send(start, end)
      } catch (err) {
        fail(err)
        continue
      }
      pending.then((out) => done(out, start, end), fail)
    }
  }

  /** @internal one sliding-window call, decided with the other calls of this tick */
  _slidingCall(owner, key, nums) {
    if (this._closed) return Promise.reject(closedError())
    return this._slidingCalls.add([owner, key, nums])
  }

  _flushSliding({ calls, resolve, reject }) {
    const owners = calls.map((c) => c[0])
    const keys = calls.map((c) => c[1])
    const nums = calls.map((c) => c[2])
    const nowUs = this.clock ? this.clock._nowUs() : -1
    const lane = (this._lane = (this._lane + 1) >>> 0)
    this._chunks(
      keys.length,
      reject,
      (start, end) =>
        native.redisSlidingBatch(
          this._native,
          keys.slice(start, end).join('\n'),
          new Float64Array(nums.slice(start, end).flat()),
          nowUs,
          lane,
        ),
      (out, start, end) => {
        let o = 0
        for (let e = start; e < end; e++) {
          resolve[e](owners[e]._decision(out, o))
          o += 2 * nums[e][2] + 2 // allowed, retry, then remaining and retry per window
        }
      },
    )
  }

  /**
   * @internal one quota call (timestamp -1: Redis' clock), sent with the other quota calls of
   * this tick (one napi crossing; consecutive checkAndUse calls on one slot share one script
   * call); resolves with its flat result
   */
  _quotaCall(keys, nums, mode, timestamp) {
    if (this._closed) return Promise.reject(closedError())
    return this._quotaCalls.add([keys, nums, mode, timestamp])
  }

  _flushQuota({ calls, resolve, reject }) {
    const keys = calls.map((c) => c[0])
    const nums = calls.map((c) => c[1])
    const heads = calls.flatMap((c) => [c[1].length, c[2], c[3]])
    const lane = (this._lane = (this._lane + 1) >>> 0)
    this._chunks(
      keys.length,
      reject,
      (start, end) => {
        let length = 0
        for (let e = start; e < end; e++) length += nums[e].length
        const flat = new Float64Array(length)
        let at = 0
        for (let e = start; e < end; e++) {
          flat.set(nums[e], at)
          at += nums[e].length
        }
        const head = new Float64Array(heads.slice(start * 3, end * 3))
        return native.redisQuotaBatch(this._native, keys.slice(start, end), head, flat, lane)
      },
      (out, start, end) => {
        let o = 0
        for (let e = start; e < end; e++) {
          const length = out[o]
          resolve[e](out.subarray(o + 1, o + 1 + length))
          o += 1 + length
        }
      },
    )
  }

  /**
   * @internal one concurrent-limiter operation, sent with the other operations of this tick
   * (one napi crossing, pipelined on one connection); resolves with its reply
   */
  _concurrent(key, op, id, nums) {
    if (this._closed) return Promise.reject(closedError())
    return this._concurrentCalls.add([key, id, op, nums])
  }

  _flushConcurrent({ calls, resolve, reject }) {
    const keys = calls.map((c) => c[0])
    const ids = calls.map((c) => c[1])
    const nums = calls.flatMap(([, , op, n]) => [op, n[0], n[1], n[2], n[3]])
    const nowUs = this.clock ? this.clock._nowUs() : -1
    const lane = (this._lane = (this._lane + 1) >>> 0)
    this._chunks(
      keys.length,
      reject,
      (start, end) =>
        native.redisConcurrentBatch(
          this._native,
          keys.slice(start, end).join('\n'),
          ids.slice(start, end).join('\n'),
          new Float64Array(nums.slice(start * 5, end * 5)),
          nowUs,
          lane,
        ),
      ({ values, grants }, start, end) => {
        // this process's own waiters are woken from the reply, before the published message
        for (const grant of grants) this._waiters.wake(grant)
        for (let e = start; e < end; e++) resolve[e](values.subarray(9 * (e - start), 9 * (e - start + 1)))
      },
    )
  }

  /** @internal subscribes to a grant channel (shared by the waiters of this process) */
  _listen(channel) {
    if (this._closed) return Promise.reject(closedError())
    let entry = this._channels.get(channel)
    if (!entry) {
      entry = { count: 0, ready: null }
      entry.ready = native.redisSubscribe(this._native, channel).catch((err) => {
        if (this._channels.get(channel) === entry) this._channels.delete(channel)
        throw fromNative(err)
      })
      this._channels.set(channel, entry)
    }
    entry.count++
    return entry.ready
  }

  _unlisten(channel) {
    const entry = this._channels.get(channel)
    if (!entry || --entry.count > 0) return
    this._channels.delete(channel)
    entry.ready.then(
      () => native.redisUnsubscribe(this._native, channel).catch(() => {}),
      () => {},
    )
  }

  /** @internal starts the loop that hands grant messages to waiters, while any wait */
  _wakeLoop() {
    if (this._listening || this._closed) return
    this._listening = true
    const loop = async () => {
      try {
        while (this._waiters.size > 0 && !this._closed) {
          const messages = await native.redisNextWakes(this._native)
          for (const m of messages) this._waiters.wake(m)
        }
      } catch {
        // the store closed under the loop; waiters time out through their own deadlines
      } finally {
        this._listening = false
      }
    }
    loop()
  }

  /** @internal a waiter left; ends the pending wake call when none is left */
  _waiterDone() {
    if (this._waiters.size === 0 && this._listening) native.redisStopWakes(this._native)
  }

  /** Closes the pool. Calls made afterwards reject with ERR_CLOSED. */
  async close() {
    if (this._closed) return
    this._closed = true
    try {
      await this._native.close()
    } catch (err) {
      throw fromNative(err)
    }
  }
}

module.exports = { MemoryStore, RedisStore, Waiters }
