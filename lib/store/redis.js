// @ts-check
'use strict'
// A Redis (or Redis Cluster) store over one native connection pool and, on a standalone
// Redis, a direct connection: the store's calls of every kind, its lifetime (connect, close)
// and what it shows (status, batching). Lanes, the circuit, waiters and the statistics writer
// are in files of their own.

const EventEmitter = require('node:events')
const { RedisRules } = require('./rules/rules')
const native = require('../native')
const { SluiceError, fromNative, invalidConfig, orThrow } = require('../base/errors')
const { StatsBook } = require('./stats')
const { DirectConnection } = require('./direct')
const { SentinelWatcher } = require('./sentinel')
const { checkEviction } = require('./eviction')
const { DenyCache } = require('./denycache')
const { WhenDown } = require('./whendown')
const { redisOptions, STORE } = require('./options')
const { Circuit } = require('./circuit')
const { Lanes } = require('./lanes')
const { RedisWaiters } = require('./waiters')
const { Spares } = require('./spares')
const { StatsWriter } = require('./stats-writer')
const { MemoryStore } = require('./memory')
const { closedError, atServer, statsOffError } = require('./errors')
const slots = require('./slots')

/** @typedef {import('./store').RedisStoreInternals} RedisStoreInternals the store interface this store implements */

const PRIVATE = Symbol('sluice.private')

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
/** @implements {RedisStoreInternals} */
class RedisStore extends EventEmitter {
  /** @internal the mark limiters check a store by (see lib/store/options.js) */
  get [STORE]() {
    return true
  }

  /**
   * Made by `connect`: `direct` the direct connection (or null), `sentinel` the
   * SentinelWatcher following the master (or null), `warnings` what connect found risky.
   */
  constructor(token, nativeStore, direct, o, sentinel = null, warnings = []) {
    if (token !== PRIVATE) throw invalidConfig('use `await RedisStore.connect(options)`')
    super()
    const { keyPrefix, clock } = o
    this.keyPrefix = keyPrefix
    this.clock = clock
    this._native = nativeStore
    // behind Sentinel: what follows the master, and whether a failover is under way (from a
    // sentinel's start until the store is on the new master): no call is sent then, since
    // what the old master counts may be lost
    this._sentinel = sentinel
    this._failingOver = false
    /** What connect found risky (ERR_CONFIG_RISK errors, each also emitted as 'warning'). */
    this.warnings = warnings
    // results come back through the process's result buffer and slots (see slots.js)
    native.redisAttach(nativeStore, slots.OUT, slots.announced)
    this._commandTimeoutMs = o.commandTimeoutMs
    /** The server its failures name (host:port, never credentials; lib/store/options.js serverOf). */
    this._server = o.server
    this._closed = false
    // concurrent limiters: this process's waiters and the grant channels they listen on
    this._waiters = new RedisWaiters(this)
    /** The operators' rules (DESIGN §9): in Redis, cached in this process. */
    this.rules = new RedisRules(this)
    this._spares = new Spares() // slots given back in this process (lib/store/spares.js)
    /** the leases of this process's limiters that hold tokens or must say they hold none (lib/classes/lease.js) */
    this._leases = new Set()
    /** this process's id in the lease gauges (see StatsWriter._leaseGauges) */
    this._processId = Math.floor(Math.random() * 2 ** 48).toString(36)
    // the circuit breaker and the store-down policy
    const policy = new WhenDown(o.whenDown, o.probeIntervalMs, {
      // whenDown 'local': counts from zero for the outage; its grants wake this store's waiters
      makeLocal: () => new MemoryStore({ keyPrefix, clock, stats: false }, this._waiters),
      nowUs: () => this._localUs(),
    })
    this._circuit = new Circuit(this, o.probeIntervalMs, policy)
    this._denyCache = o.denyCacheKeys > 0 ? new DenyCache(o.denyCacheKeys) : null
    // statistics: counted here, written every statsFlushMs (one pipeline per slot) and on close
    this._stats = o.stats ? new StatsBook(() => this._nowMsLocal(), false) : null
    this._statsWriter = new StatsWriter(this, o.statsTtlMs, o.statsFlushMs)
    // One queue per kind, made at the kind's first call (see _queue). Its batches go on the
    // direct connection when it is up, else on one pool connection (its lane): either way they
    // reach Redis in call order.
    this._lanes = new Lanes(this, direct, o.connectTimeoutMs)
    this._queues = []
  }

  /**
   * Connects a pool and waits until every connection is up (and, on a cluster, the slot map
   * is known). Accepts a URL string or options.
   */
  static async connect(options) {
    const o = redisOptions(options)
    let nativeStore
    try {
      nativeStore = orThrow(await native.connectRedis(o.pool))
    } catch (err) {
      throw atServer(fromNative(err), o.server)
    }
    let direct = null
    let url = o.url
    let watcher = null
    /** the store, once made: what the sentinels' news is for */
    let store = null
    if (o.sentinel) {
      // the direct lane's server: the master the sentinels name now (the pool asks them itself)
      watcher = new SentinelWatcher(
        o.sentinel,
        ({ host, port }) => {
          if (direct !== null) direct.retarget(host, port)
          // calls stay held off until the pool is on the new master too
          const held = store
          if (held) held._failoverStarts()
          nativeStore.reconnect().then(
            () => held && held._failoverEnds(),
            () => held && held._failoverEnds(),
          )
        },
        (on) => {
          if (!store) return
          if (on) store._failoverStarts()
          else store._failoverEnds()
        },
      )
      const master = await watcher.ask(o.connectTimeoutMs)
      url = master === null ? null : masterUrl(master, o.sentinel.password)
    }
    // an evicting server: warnings for the store to emit, or a refusal ('refuse')
    let warnings = []
    if (nativeStore.startedUp) {
      try {
        warnings = await checkEviction(nativeStore, o.evictingServer)
      } catch (err) {
        await nativeStore.close().catch(() => {})
        throw err
      }
    }
    if (o.directConnection && !nativeStore.isCluster && url !== null) {
      const timeouts = { connectTimeoutMs: o.connectTimeoutMs, commandTimeoutMs: o.commandTimeoutMs }
      direct = nativeStore.startedUp ? await DirectConnection.open(url, timeouts) : DirectConnection.idle(url, timeouts)
    }
    if (watcher !== null) watcher.start()
    store = new RedisStore(PRIVATE, nativeStore, direct, o, watcher, warnings)
    if (!nativeStore.startedUp) {
      // Redis could not be reached: the store starts with its circuit open, answering by
      // whenDown, and its connections keep dialling until a probe gets through
      const reason = `cannot connect to Redis within ${o.connectTimeoutMs} ms`
      store._circuit.trip(atServer(new SluiceError('ERR_STORE_UNAVAILABLE', reason), o.server), undefined)
    }
    // the rules in force before the first decision (when Redis is up), kept fresh from now on
    await store.rules._start()
    // emitted from a later turn: a listener added just after `await connect()` still hears them
    if (warnings.length > 0) setImmediate(() => warnings.forEach((w) => store.emit('warning', w)))
    return store
  }

  /**
   * @internal a failure of a call as the caller gets it (see fromNative), naming the server
   * when it says Redis is unreachable or too slow (`... (Redis at 127.0.0.1:6379)`)
   */
  _failure(err) {
    return atServer(fromNative(err), this._server)
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

  /**
   * @internal one call of `kind` (see lib/kinds/): answered by the local deny cache when it
   * can, else queued for the next batch of its kind; a call that is never batched (`alone`)
   * goes at once. Resolves with the kind's decoded result.
   */
  _call(kind, c) {
    if (this._closed) return Promise.reject(closedError())
    if (c.alone === true) return this._alone(kind, c)
    if (this._denyCache !== null && kind.cached !== undefined) {
      const hit = kind.cached(this._denyCache, c, this._localUs())
      if (hit !== undefined) return Promise.resolve(hit)
    }
    return (this._queues[kind.code] ?? this._queue(kind)).batcher.add(c)
  }

  /**
   * @internal the queue of `kind`, made at its first call: the store runs the kinds it is
   * given and requires none (lib/kinds/ is a layer above it)
   */
  _queue(kind) {
    const q = this._lanes.queue(kind.lane, (calls, resolve, reject, q) => this._send(kind, calls, resolve, reject, q))
    this._queues[kind.code] = q
    return q
  }

  /** @internal sends one batch of `kind` on queue `q` (see Lanes.batch) */
  _send(kind, calls, resolve, reject, q) {
    return this._lanes.batch(q, kind, calls, resolve, reject, () =>
      this._circuit.policy.answer(kind, calls, resolve, reject),
    )
  }

  /**
   * @internal a call that is never batched, on its kind's lane. While Redis is down it is
   * answered as a batched call is: under 'error' it rejects with the store's error, else its
   * kind's `whenDown` answers (a pacer's block: only 'local' can record it, in this process);
   * the call that finds Redis down is answered by the policy too.
   */
  async _alone(kind, c) {
    const circuit = this._circuit
    const byPolicy = () => {
      try {
        return kind.whenDown(circuit.policy, c)
      } catch (err) {
        throw fromNative(err)
      }
    }
    if (circuit.status === 'down') {
      if (circuit.policy.mode === 'error') throw circuit.policy.error
      return byPolicy()
    }
    try {
      if (this._failingOver) throw failingOver()
      return await kind.alone(this, c, this._nowUs())
    } catch (err) {
      const error = this._failure(err)
      if (circuit.opens(error)) {
        circuit.trip(error, kind.keyOf(c))
        if (circuit.policy.mode !== 'error') return byPolicy()
      }
      throw error
    }
  }

  /** @internal a failover (Sentinel) has begun: no call is sent until it is over */
  _failoverStarts() {
    this._failingOver = true
  }

  /** @internal the failover (Sentinel) is over: calls go to Redis again, the circuit probes at once */
  _failoverEnds() {
    this._failingOver = false
    if (this._circuit.status === 'down') this._circuit._probe()
  }

  /** @internal one call of kind `code` outside any batch, on pool lane `lane`: a promise of its result */
  _poolCall(code, text, nums, nowUs, lane) {
    return slots.call(this._native, code, text, nums, nowUs, lane)
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

  /** @internal the tokens every process holds on lease for `kind:name` (their last flush's) */
  _leasedOutstanding(kind, name) {
    if (this._stats === null) return Promise.reject(statsOffError())
    return this._statsWriter.leased(kind, name)
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
    // the tokens held on lease go back first, then the statistics (the gauges say none is held)
    await Promise.all([...this._leases].map((l) => l.end()))
    await this._statsWriter.close()
    this._closed = true
    this.rules._close()
    // batches already written settle with their real replies (Redis may have applied them: a
    // charge, a lease); calls not yet sent were refused with ERR_CLOSED above and never go.
    await this._lanes.drain(2 * this._commandTimeoutMs + 100)
    this._waiters.closeAll(closedError())
    this._circuit.close()
    this._lanes.close()
    if (this._sentinel) this._sentinel.close()
    try {
      await this._native.close()
    } catch (err) {
      throw fromNative(err)
    }
  }
}

/** The error of a call made while the master fails over (see `_failingOver`). */
function failingOver() {
  return new SluiceError(
    'ERR_STORE_UNAVAILABLE',
    'the master is failing over (Sentinel): nothing is sent until the switch',
  )
}

/** The `redis://` URL of a master found through Sentinel, with its password. */
function masterUrl({ host, port }, password) {
  const auth = password === undefined ? '' : `:${encodeURIComponent(password)}@`
  return `redis://${auth}${host.includes(':') ? `[${host}]` : host}:${port}`
}

module.exports = { RedisStore }
