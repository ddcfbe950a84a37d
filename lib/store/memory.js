'use strict'
// The embedded store: limiter state in this process, decisions made synchronously in native
// code (no thread hop), with the same semantics as Redis. For tests, single-process apps,
// the demo, and a RedisStore's whenDown 'local'.

const native = require('../native')
const { fromNative } = require('../errors')
const { encodeParts } = require('../codec')
const { StatsBook, byLastUse } = require('../stats')
const { memoryOptions } = require('./options')
const { Waiters } = require('./waiters')
const { closedError, statsOffError } = require('./errors')

/** New keys between two checks whether the memory store should drop expired keys. */
const SWEEP_EVERY = 4096

/**
 * The embedded store: state in this process, decisions synchronous in native code (no thread
 * hop), the same semantics as Redis. For tests, single-process apps and the demo.
 */
class MemoryStore {
  constructor(options) {
    const { keyPrefix, clock, stats } = memoryOptions(options)
    this.keyPrefix = keyPrefix
    this.clock = clock
    // statistics: the process's counts are this store's counts
    this._stats = stats ? new StatsBook(() => (clock ? clock.now() : Date.now())) : null
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
      return native.memoryPacerBatch(this._handle, encodeParts(keys), new Float64Array(args), nowUs)
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
    return this._run((nowUs) => native.memorySliding(this._handle, encodeParts([key]), new Float64Array(nums), nowUs))
  }

  /** @internal one quota call, synchronous (see memoryQuota) */
  _quota(keys, nums, mode, timestamp) {
    return this._run((nowUs) => native.memoryQuota(this._handle, keys, nums, mode, timestamp, nowUs))
  }

  /** @internal blocks a pacer (see memoryPacerBlock); resolves with µs until the block ends */
  async _pacerBlock(key, nums) {
    return this._run((nowUs) => native.memoryPacerBlock(this._handle, key, nums, nowUs))
  }

  /** @internal one fair-tenant assignment, synchronous (see memoryFair): a count per rule */
  _fair(key, id, nums) {
    return this._run((nowUs) => native.memoryFair(this._handle, encodeParts([key]), encodeParts([id]), nums, nowUs))
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

  /** @internal the statistics of `kind:name` */
  async _statsOf(kind, name) {
    if (this._closed) throw closedError()
    if (this._stats === null) throw statsOffError()
    return this._stats.local(kind, name)
  }

  /**
   * @internal statistics and per-minute history (last 30 minutes) of each `{ kind, name }`:
   * `[{ stats, history: [{ t, admitted, refused }] }]` (the dashboard reads this)
   */
  async _statsDetail(list) {
    if (this._closed) throw closedError()
    if (this._stats === null) throw statsOffError()
    return list.map((l) => ({ stats: this._stats.local(l.kind, l.name), history: this._stats.history(l.kind, l.name) }))
  }

  /**
   * The limiters used through this store (at most 10,000, the least recently used dropped
   * first), newest first: `{ kind, name, options, lastUse }` (lastUse in ms since the epoch).
   */
  async limiters() {
    if (this._closed) throw closedError()
    if (this._stats === null) throw statsOffError()
    return byLastUse(this._stats.seen())
  }

  /** Statistics events lost (see README); always 0 on a MemoryStore unless limiters were evicted. */
  get statsDropped() {
    return this._stats === null ? 0 : this._stats.dropped
  }

  /** Closes the store: later calls reject with ERR_CLOSED, and so do the waiters queued now. */
  async close() {
    this._closed = true
    // the embedded store of a RedisStore's whenDown 'local' shares its waiters: they stay
    if (!this._sharedWaiters) this._waiters.closeAll(closedError())
  }
}

module.exports = { MemoryStore }
