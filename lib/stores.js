'use strict'

const native = require('../index.js')
const { SluiceError, fromNative, invalidConfig } = require('./errors')
const { ManualClock } = require('./clock')

const PRIVATE = Symbol('sluice.private')
/** Entries per script call: big enough to amortise the napi crossing and the round trip,
 * small enough that Redis works on one chunk while Node handles the previous one. */
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
  }

  /** @internal one pacer call, synchronous; returns the shared result buffer */
  _step(key, weight, qps, maxBurst, factor, pace) {
    if (this._closed) throw closedError()
    const nowUs = this.clock ? this.clock._nowUs() : -1
    try {
      let id = this._ids.get(key)
      if (id === undefined) {
        if (--this._untilSweep <= 0) this._sweep(nowUs)
        id = native.memoryIntern(this._handle, key)
        this._ids.set(key, id)
      }
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

  _sweep(nowUs) {
    this._untilSweep = SWEEP_EVERY
    if (native.memorySweep(this._handle, nowUs)) this._ids.clear()
  }

  /** @internal one composite call: keys[i] with args of the flat batch encoding */
  _group(keys, args) {
    if (this._closed) throw closedError()
    try {
      if ((this._untilSweep -= keys.length) <= 0) this._sweep(this.clock ? this.clock._nowUs() : -1)
      return native.memoryPacerBatch(
        this._handle,
        keys.join('\n'),
        new Float64Array(args),
        this.clock ? this.clock._nowUs() : -1,
      )
    } catch (err) {
      throw fromNative(err)
    }
  }

  async close() {
    this._closed = true
  }
}

/**
 * A Redis (or Redis Cluster) store over one native connection pool. Calls made in the same
 * tick are decided together: one napi crossing and one script call per 64 of them (per hash
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

module.exports = { MemoryStore, RedisStore }
