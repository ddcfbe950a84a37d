// @ts-check
'use strict'
// The embedded store: limiter state in this process, decisions made synchronously in native
// code (no thread hop), with the same semantics as Redis. For tests, single-process apps,
// the demo, and a RedisStore's whenDown 'local'.

const { MemoryRules } = require('./rules/rules')
const native = require('../native')
const { fromNative } = require('../base/errors')
const { StatsBook, byLastUse } = require('./stats')
const { memoryOptions, STORE } = require('./options')
const { Waiters } = require('./waiters')
const { Spares } = require('./spares')
const { closedError, statsOffError } = require('./errors')

/** New keys between two checks whether the memory store should drop expired keys. */
const SWEEP_EVERY = 4096

/** @typedef {import('./store').MemoryStoreInternals} MemoryStoreInternals the store interface this store implements */

/**
 * The embedded store: state in this process, decisions synchronous in native code (no thread
 * hop), the same semantics as Redis. For tests, single-process apps and the demo.
 * @implements {MemoryStoreInternals}
 */
class MemoryStore {
  /**
   * `options`: the public ones (lib/entries/types/store.d.ts). `waiters` (@internal): the
   * concurrent-limiter waiters of the RedisStore this store decides for under whenDown
   * 'local': its grants wake them, and closing this store leaves them to their store.
   */
  constructor(options, waiters = null) {
    const { keyPrefix, clock, stats } = memoryOptions(options)
    this.keyPrefix = keyPrefix
    this.clock = clock
    /** The operators' rules (DESIGN §9): this store is one process, its rules a table here. */
    this.rules = new MemoryRules(this)
    // statistics: the process's counts are this store's counts
    this._stats = stats ? new StatsBook(() => (clock ? clock.now() : Date.now())) : null
    this._io = new Float64Array(6) // numbers in, decision out (see memoryStep)
    this._handle = native.memoryStoreNew(this._io)
    this._ids = new Map() // store key -> interned id; cleared whenever a sweep frees ids
    this._untilSweep = SWEEP_EVERY
    this._closed = false
    this._waiters = waiters ?? new Waiters()
    this._sharedWaiters = waiters !== null
    this._spares = new Spares() // slots given back in this process (lib/store/spares.js)
    this._denyCache = null // a RedisStore's only
  }

  /** @internal the mark limiters check a store by (see lib/store/options.js) */
  get [STORE]() {
    return true
  }

  /**
   * @internal one call of `kind` (see lib/kinds/), decided now, synchronously, in native code;
   * resolves with the kind's decoded result
   */
  _call(kind, c) {
    try {
      return Promise.resolve(kind.memory(this, c, false))
    } catch (err) {
      return Promise.reject(fromNative(err))
    }
  }

  /** @internal a call begins: ERR_CLOSED once closed; the time to decide at, µs (-1: the system clock) */
  _begin() {
    if (this._closed) throw closedError()
    return this.clock ? this.clock._nowUs() : -1
  }

  /** @internal the interned id of a key (interning it, and now and then sweeping expired keys) */
  _id(key, nowUs) {
    let id = this._ids.get(key)
    if (id === undefined) {
      if (--this._untilSweep <= 0) this._sweep(nowUs)
      id = native.memoryIntern(this._handle, key)
      this._ids.set(key, id)
    }
    return id
  }

  /** @internal a call names `keys` keys not interned: sweeps when that many new keys are due */
  _sweepFor(keys, nowUs) {
    if ((this._untilSweep -= keys) <= 0) this._sweep(nowUs)
  }

  _sweep(nowUs) {
    this._untilSweep = SWEEP_EVERY
    if (native.memorySweep(this._handle, nowUs)) this._ids.clear()
  }

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
   * The limiters used through this store, newest first: `{ kind, name, options, lastUse }`
   * (lastUse in ms since the epoch). At most 10,000: a full registry forgets the least recently
   * used names seen in one period (5 s) first, never for a name seen once (see lib/store/stats.js).
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
