'use strict'

const native = require('./native')
const { SluiceError, fromNative, invalidConfig, ownProps } = require('./errors')
const { ManualClock } = require('./clock')
const { Batcher } = require('./batcher')
const { DirectConnection } = require('./direct')
const { DenyCache } = require('./denycache')
const { WhenDown, WHEN_DOWN } = require('./whendown')
const {
  StatsBook,
  statsFrom,
  historyFrom,
  escapeKey,
  stateLifetimeMs,
  FIELDS: STATS_FIELDS,
  MAX_LIMITERS,
  SERIES,
  MINUTE_MS,
} = require('./stats')
const EventEmitter = require('node:events')
const { encodeParts, appendPart } = require('./codec')

const PRIVATE = Symbol('sluice.private')
/** How each kind's calls are batched (see lib/batcher.js). `maxBatch`: calls per native call
 * and per script call, big enough to amortise the crossing and the round trip, small enough
 * that one script call never runs for long. `maxInFlight`: batches under way per kind before
 * new calls wait to leave together (group commit). */
/** The defaults of `RedisStore.connect` (the native side has the same). */
const DEFAULT_URL = 'redis://127.0.0.1:6379'
const DEFAULT_COMMAND_TIMEOUT_MS = 2000
const DEFAULT_CONNECT_TIMEOUT_MS = 5000
const BATCHING = { maxBatch: 64, maxInFlight: Number(process.env.SLUICE_MAX_IN_FLIGHT) || 2 }
/** Errors that say Redis itself is unreachable or too slow (they open the circuit). */
const STORE_FAILURES = new Set(['ERR_STORE_UNAVAILABLE', 'ERR_TIMEOUT'])
/** Failures of one call while a cluster changes its topology (see `_opensCircuit`). */
const TOPOLOGY_CHANGE = /Too many failed write attempts|Max attempts reached|TRYAGAIN/
const DEFAULT_STATS_FLUSH_MS = 5000
const DEFAULT_STATS_TTL_MS = 7 * 86_400_000
/** How often a limiter's registry record (last use, options) is refreshed, at most. */
const STATS_REFRESH_MS = 60_000
const DEFAULT_PROBE_INTERVAL_MS = 1000
const DEFAULT_DENY_CACHE_KEYS = 100_000
/** The probe: a peek at a bucket no limiter uses (a read: it writes nothing). */
const PROBE_ARGS = new Float64Array([0, 1, 1, 1_000_000, -3])
const LIMIT_RESET = -2
const LIMIT_ADJUST = -1
const SLIDING_TAKE = 0
const SLIDING_RESET = 2
/** New keys between two checks whether the memory store should drop expired keys. */
const SWEEP_EVERY = 4096

function storeOptions(options, allowed) {
  if (options === undefined || options === null) options = {}
  if (typeof options !== 'object' || Array.isArray(options)) throw invalidConfig('store options must be an object')
  for (const name of Object.keys(options)) {
    if (!allowed.includes(name)) throw invalidConfig(`unknown store option ${JSON.stringify(name)}`)
  }
  options = ownProps(options)
  const keyPrefix = options.keyPrefix === undefined ? 'sluice' : options.keyPrefix
  if (
    typeof keyPrefix !== 'string' ||
    keyPrefix.length === 0 ||
    keyPrefix.length > 128 ||
    /[{}\n]/.test(keyPrefix) ||
    !keyPrefix.isWellFormed()
  ) {
    throw invalidConfig('keyPrefix must be a string of 1..128 characters without braces, newlines or lone surrogates')
  }
  const clock = options.clock === undefined ? null : options.clock
  if (clock !== null && !(clock instanceof ManualClock)) throw invalidConfig('clock must be a ManualClock')
  return { keyPrefix, clock }
}

/** `stats`: true (default) or false. */
function statsOption(options) {
  const value = options && Object.prototype.hasOwnProperty.call(options, 'stats') ? options.stats : undefined
  if (value === undefined) return true
  if (typeof value !== 'boolean') throw invalidConfig('stats must be a boolean')
  return value
}

const statsOffError = () =>
  new SluiceError('ERR_INVALID_CONFIG', 'statistics are off for this store (it was made with stats: false)')

/** Statistics of the limiters used recently, newest first. */
function byLastUse(list) {
  return list.sort((a, b) => b.lastUse - a.lastUse || (a.kind + a.name < b.kind + b.name ? -1 : 1))
}

/** `localDenyCache`: false (default), true, or `{ maxKeys }`; the number of keys kept (0: off). */
function denyCacheOption(value) {
  if (value === undefined || value === false) return 0
  if (value === true) return DEFAULT_DENY_CACHE_KEYS
  if (value !== null && typeof value === 'object' && !Array.isArray(value)) {
    for (const name of Object.keys(value)) {
      if (name !== 'maxKeys') throw invalidConfig(`unknown localDenyCache option ${JSON.stringify(name)}`)
    }
    const { maxKeys = DEFAULT_DENY_CACHE_KEYS } = value
    if (Number.isInteger(maxKeys) && maxKeys >= 1 && maxKeys <= 10_000_000) return maxKeys
  }
  throw invalidConfig('localDenyCache must be a boolean or { maxKeys: integer in [1, 10000000] }')
}

const closedError = () => new SluiceError('ERR_CLOSED', 'the store is closed')

/** A statistics operation's reply saying one of its keys holds another type (lua/stats.lua). */
const wrongType = (r) => Array.isArray(r) && r.length === 1 && r[0] === 'WRONGTYPE'
const wrongTypeError = (what) =>
  new SluiceError(
    'ERR_SCRIPT',
    `a key of the ${what} holds a value of another type: another writer uses this store's key prefix`,
  )

/**
 * The concurrent-limiter waiters of this process, by waiter id. A grant message
 * (`"<id> <token>"`) resolves its waiter; `"*"` asks every waiter to re-poll (a grant may
 * have been missed while the listener reconnected).
 */
/**
 * The `tls` option of RedisStore.connect, for rediss:// URLs: `{ ca, cert, key,
 * rejectUnauthorized }` (PEM strings or Buffers; `ca` may be a list). Kept in no property of
 * the store, and named, never shown, in errors.
 */
function tlsOption(tls) {
  if (tls === undefined) return undefined
  if (tls === null || typeof tls !== 'object' || Array.isArray(tls)) {
    throw invalidConfig('tls must be an object: { ca?, cert?, key?, rejectUnauthorized? }')
  }
  const t = ownProps(tls)
  for (const k of Object.keys(t)) {
    if (!['ca', 'cert', 'key', 'rejectUnauthorized'].includes(k)) {
      throw invalidConfig(`unknown tls option ${JSON.stringify(k)}`)
    }
  }
  const pem = (name, value, list) => {
    if (value === undefined) return undefined
    const items = list && Array.isArray(value) ? value : [value]
    if (items.length === 0) throw invalidConfig(`tls.${name} must not be empty`)
    return items
      .map((v) => {
        if (typeof v === 'string') return v
        if (Buffer.isBuffer(v) || v instanceof Uint8Array) return Buffer.from(v).toString('utf8')
        throw invalidConfig(`tls.${name} must be PEM text: a string or a Buffer${list ? ', or a list of them' : ''}`)
      })
      .join('\n')
  }
  if (t.rejectUnauthorized !== undefined && typeof t.rejectUnauthorized !== 'boolean') {
    throw invalidConfig('tls.rejectUnauthorized must be a boolean')
  }
  if ((t.cert === undefined) !== (t.key === undefined)) throw invalidConfig('tls.cert and tls.key go together')
  return {
    ca: pem('ca', t.ca, true),
    cert: pem('cert', t.cert, false),
    key: pem('key', t.key, false),
    rejectUnauthorized: t.rejectUnauthorized,
  }
}

class Waiters {
  constructor() {
    this._map = new Map()
    /** waiters per group (a concurrent limiter's channel), for maxWaiters */
    this._groups = new Map()
  }
  get size() {
    return this._map.size
  }
  /** Waiters of `group` queued in this process. */
  count(group) {
    return this._groups.get(group) || 0
  }
  add(id, waiter, group) {
    this._map.set(id, waiter)
    if (group !== undefined) {
      waiter.group = group
      this._groups.set(group, this.count(group) + 1)
    }
  }
  delete(id) {
    const waiter = this._map.get(id)
    if (waiter === undefined) return
    this._map.delete(id)
    if (waiter.group !== undefined) {
      const left = this.count(waiter.group) - 1
      if (left > 0) this._groups.set(waiter.group, left)
      else this._groups.delete(waiter.group)
    }
  }
  /** The store is closing: every waiter settles now with `error` (ERR_CLOSED). */
  closeAll(error) {
    for (const waiter of [...this._map.values()]) if (waiter.closed) waiter.closed(error)
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
    const { keyPrefix, clock } = storeOptions(options, ['keyPrefix', 'clock', 'stats'])
    this.keyPrefix = keyPrefix
    this.clock = clock
    // statistics: the process's counts are this store's counts
    this._stats = statsOption(options) ? new StatsBook(() => (clock ? clock.now() : Date.now())) : null
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

/**
 * A Redis (or Redis Cluster) store over one native connection pool. Calls are batched per kind
 * (see lib/batcher.js): a call goes out at once when its queue has room, and calls arriving
 * while round trips are under way leave together, one napi crossing and one script call per
 * 64 of them (per hash slot on a cluster).
 *
 * When Redis is found down (a call fails with ERR_STORE_UNAVAILABLE or ERR_TIMEOUT) the
 * circuit opens: `status` turns 'down', 'down' is emitted, and no call goes to Redis (none
 * waits for `commandTimeoutMs` any more) until a probe, every `probeIntervalMs`, gets an
 * answer: then 'up'. Meanwhile calls are answered by `whenDown` (see lib/whendown.js).
 */
class RedisStore extends EventEmitter {
  constructor(token, nativeStore, keyPrefix, clock, direct, o) {
    if (token !== PRIVATE) throw invalidConfig('use `await RedisStore.connect(options)`')
    super()
    this.keyPrefix = keyPrefix
    this.clock = clock
    this._native = nativeStore
    this._direct = direct
    this._connectTimeoutMs = o.connectTimeoutMs
    this._commandTimeoutMs = o.commandTimeoutMs ?? DEFAULT_COMMAND_TIMEOUT_MS
    this._closed = false
    /** batches written and not yet answered; close() waits for them (`_drained`) */
    this._inFlight = 0
    this._drained = null
    this._settled = () => {
      if (--this._inFlight === 0 && this._drained !== null) this._drained()
    }
    this._sync = false
    // the circuit breaker and the store-down policy
    this._probeIntervalMs = o.probeIntervalMs
    this._status = 'up'
    this._probeTimer = null
    this._probing = false
    this._probeKey = null
    this._policy = new WhenDown(o.whenDown, o.probeIntervalMs, {
      // whenDown 'local': counts from zero for the outage; its grants wake this store's waiters
      makeLocal: () => {
        const local = new MemoryStore({ keyPrefix, clock, stats: false })
        local._waiters = this._waiters
        local._sharedWaiters = true
        return local
      },
      nowUs: () => this._localUs(),
    })
    this._denyCache = o.denyCacheKeys > 0 ? new DenyCache(o.denyCacheKeys) : null
    // statistics: counted here, written every statsFlushMs (one pipeline per slot) and on close
    this._stats = o.stats ? new StatsBook(() => this._nowMsLocal(), false) : null
    this._statsTtlMs = o.statsTtlMs
    this._statsFlushMs = o.statsFlushMs
    this._statsInFlight = []
    this._statsFlushing = null
    this._statsTimer = null
    if (this._stats !== null) {
      this._statsTimer = setInterval(() => {
        this._flushStats().catch(() => undefined)
      }, o.statsFlushMs)
      this._statsTimer.unref()
    }
    // One queue per kind. Its batches go on the direct connection when it is up, else on one
    // pool connection (its lane): either way they reach Redis in call order.
    const queue = (lane, send) => {
      const q = { lane, direct: false, batcher: null, directBatches: 0 }
      q.batcher = new Batcher((calls, resolve, reject) => send(calls, resolve, reject, q), BATCHING)
      return q
    }
    this._pacerCalls = queue(0, (c, res, rej, q) => this._sendPacer(c, res, rej, q))
    this._limitCalls = queue(1, (c, res, rej, q) => this._sendLimits(c, res, rej, q))
    this._concurrentCalls = queue(2, (c, res, rej, q) => this._sendConcurrent(c, res, rej, q))
    this._slidingCalls = queue(3, (c, res, rej, q) => this._sendSliding(c, res, rej, q))
    this._quotaCalls = queue(4, (c, res, rej, q) => this._sendQuota(c, res, rej, q))
    this._fairCalls = queue(5, (c, res, rej, q) => this._sendFair(c, res, rej, q))
    this._queues = [
      this._pacerCalls,
      this._limitCalls,
      this._concurrentCalls,
      this._slidingCalls,
      this._quotaCalls,
      this._fairCalls,
    ]
    // concurrent limiters: subscribed grant channels and this process's waiters
    this._waiters = new Waiters()
    this._channels = new Map() // channel -> { count, ready }
    this._listening = false
  }

  /**
   * Connects a pool and waits until every connection is up (and, on a cluster, the slot map
   * is known). Accepts a URL string or options.
   */
  static async connect(options) {
    if (typeof options === 'string') options = { url: options }
    const names = [
      'keyPrefix',
      'clock',
      'url',
      'cluster',
      'poolSize',
      'commandTimeoutMs',
      'connectTimeoutMs',
      'directConnection',
      'whenDown',
      'probeIntervalMs',
      'localDenyCache',
      'stats',
      'statsFlushMs',
      'statsTtlMs',
      'tls',
    ]
    const { keyPrefix, clock } = storeOptions(options, names)
    const o = ownProps(options || {})
    if (o.url !== undefined && typeof o.url !== 'string') throw invalidConfig('url must be a string')
    if (o.cluster !== undefined) {
      if (!Array.isArray(o.cluster) || o.cluster.length === 0 || !o.cluster.every((u) => typeof u === 'string')) {
        throw invalidConfig('cluster must be a non-empty array of redis:// URLs')
      }
    }
    for (const name of ['poolSize', 'commandTimeoutMs', 'connectTimeoutMs']) {
      if (o[name] !== undefined && typeof o[name] !== 'number') throw invalidConfig(`${name} must be a number`)
    }
    if (o.directConnection !== undefined && typeof o.directConnection !== 'boolean') {
      throw invalidConfig('directConnection must be a boolean')
    }
    const whenDown = o.whenDown === undefined ? 'error' : o.whenDown
    if (!WHEN_DOWN.includes(whenDown)) throw invalidConfig("whenDown must be 'error', 'allow', 'deny' or 'local'")
    const probeIntervalMs = o.probeIntervalMs === undefined ? DEFAULT_PROBE_INTERVAL_MS : o.probeIntervalMs
    if (!Number.isInteger(probeIntervalMs) || probeIntervalMs < 10 || probeIntervalMs > 600_000) {
      throw invalidConfig('probeIntervalMs must be an integer in [10, 600000]')
    }
    const denyCacheKeys = denyCacheOption(o.localDenyCache)
    const stats = statsOption(o)
    const statsFlushMs = o.statsFlushMs === undefined ? DEFAULT_STATS_FLUSH_MS : o.statsFlushMs
    if (!Number.isInteger(statsFlushMs) || statsFlushMs < 10 || statsFlushMs > 600_000) {
      throw invalidConfig('statsFlushMs must be an integer in [10, 600000]')
    }
    const statsTtlMs = o.statsTtlMs === undefined ? DEFAULT_STATS_TTL_MS : o.statsTtlMs
    if (!Number.isInteger(statsTtlMs) || statsTtlMs < 60_000 || statsTtlMs > 315_360_000_000) {
      throw invalidConfig('statsTtlMs must be an integer in [60000, 315360000000]')
    }
    const tls = tlsOption(o.tls)
    let nativeStore
    try {
      nativeStore = await native.connectRedis({
        url: o.url,
        cluster: o.cluster,
        poolSize: o.poolSize,
        commandTimeoutMs: o.commandTimeoutMs,
        connectTimeoutMs: o.connectTimeoutMs,
        // under a policy other than 'error', a store can start while Redis is down
        startDown: whenDown !== 'error',
        tls,
      })
    } catch (err) {
      throw fromNative(err)
    }
    const connectTimeoutMs = o.connectTimeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS
    let direct = null
    if (o.directConnection !== false && !nativeStore.isCluster) {
      const url = o.url ?? DEFAULT_URL
      const timeouts = { connectTimeoutMs, commandTimeoutMs: o.commandTimeoutMs ?? DEFAULT_COMMAND_TIMEOUT_MS }
      direct = nativeStore.startedUp ? await DirectConnection.open(url, timeouts) : DirectConnection.idle(url, timeouts)
    }
    const store = new RedisStore(PRIVATE, nativeStore, keyPrefix, clock, direct, {
      connectTimeoutMs,
      whenDown,
      probeIntervalMs,
      denyCacheKeys,
      stats,
      statsFlushMs,
      statsTtlMs,
      commandTimeoutMs: o.commandTimeoutMs,
    })
    if (!nativeStore.startedUp) {
      // Redis could not be reached: the store starts with its circuit open, answering by
      // whenDown, and its connections keep dialling until a probe gets through
      const reason = `cannot connect to Redis within ${connectTimeoutMs} ms`
      store._trip(new SluiceError('ERR_STORE_UNAVAILABLE', reason), undefined)
    }
    return store
  }

  /** 'up', or 'down' from the first call that found Redis unreachable until a probe finds it back. */
  get status() {
    return this._status
  }

  /** The store-down policy: 'error', 'allow', 'deny' or 'local'. */
  get whenDown() {
    return this._policy.mode
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
    let calls = 0
    let batches = 0
    let direct = 0
    for (const q of this._queues) {
      calls += q.batcher.calls
      batches += q.batcher.batches
      direct += q.directBatches
    }
    return { calls, batches, direct }
  }

  _nowUs() {
    return this.clock ? this.clock._nowUs() : -1
  }

  /**
   * @internal sends one batch of queue `q`: on the direct connection, `direct()` makes the
   * native task; on the pool, `pooled(lane)` makes the native call; `done(out)` settles the
   * calls. A store failure opens the circuit; then, and while it is open, `degrade()` answers
   * every call by the store-down policy ('error': they reject with the store's error). Any
   * other failure rejects them all. `key`: a key of the batch (the probes go to its node).
   * Returns the promise the batcher waits on.
   */
  _batch(q, reject, direct, pooled, done, degrade, key) {
    const fail = (err) => {
      const error = fromNative(err)
      if (this._opensCircuit(error)) {
        this._trip(error, key)
        if (this._policy.mode !== 'error') return degrade()
      }
      for (const r of reject) r(error)
    }
    if (this._closed) return fail(closedError())
    if (this._status === 'down') {
      if (this._policy.mode !== 'error') return degrade()
      for (const r of reject) r(this._policy.error)
      return
    }
    let pending
    try {
      const d = this._via(q)
      pending =
        d === null ? pooled(q.lane).then(done) : d.run(direct()).then((step) => done(step.grants ? step : step.values))
    } catch (err) {
      return fail(err)
    }
    // written: close() waits for its reply (it may have been applied), see _close
    this._inFlight++
    return pending.then(this._settled, (err) => {
      this._settled()
      return fail(err)
    })
  }

  /**
   * @internal opens the circuit: Redis was found down by `error`, on a call for `key`. The
   * probes read a key of the same hash slot, so on a cluster they ask the node that failed.
   */
  /**
   * @internal whether a failure opens the circuit: a store failure, but not one of a cluster
   * changing its topology under a call (a command redirected too often during a failover, a
   * slot being migrated): that call fails with ERR_STORE_UNAVAILABLE, the others go on.
   */
  _opensCircuit(error) {
    return STORE_FAILURES.has(error.code) && !this._closed && !TOPOLOGY_CHANGE.test(error.message)
  }

  _trip(error, key) {
    if (this._status === 'down') return
    this._status = 'down'
    const open = typeof key === 'string' ? key.indexOf('{') : -1
    const close = open >= 0 ? key.indexOf('}', open) : -1
    const tag = close > open + 1 ? key.slice(open + 1, close) : 'health'
    this._probeKey = `${this.keyPrefix}:probe:{${tag}}`
    this._policy.begin(error)
    if (this._denyCache !== null) this._denyCache.clear()
    this._probeTimer = setInterval(() => this._probe(), this._probeIntervalMs)
    this._probeTimer.unref()
    // emitted from a later turn: a listener added just after `await connect()` still hears it
    setImmediate(() => this.emit('down', error))
  }

  /** @internal one probe (at most one under way): an answer from Redis closes the circuit */
  _probe() {
    if (this._probing || this._closed || this._status === 'up') return
    this._probing = true
    native.redisLimitBatch(this._native, encodeParts([this._probeKey]), PROBE_ARGS, -1, 1).then(
      () => {
        this._probing = false
        this._recover()
      },
      (err) => {
        this._probing = false
        // any answer from Redis (a script error included) means it is reachable again
        if (!STORE_FAILURES.has(fromNative(err).code)) this._recover()
      },
    )
  }

  _recover() {
    if (this._status === 'up' || this._closed) return
    clearInterval(this._probeTimer)
    this._probeTimer = null
    this._status = 'up'
    this._policy.end()
    // channels opened while down were never subscribed: the next waiters subscribe for real
    for (const [channel, entry] of this._channels) if (entry.local) this._channels.delete(channel)
    setImmediate(() => this.emit('up'))
  }

  /** @internal the local clock, µs (the deny cache's) */
  _localUs() {
    return this.clock ? this.clock._nowUs() : Date.now() * 1000
  }

  /**
   * The direct connection for queue `q`'s next batch, or null for the pool. A queue moves to
   * the direct connection only when none of its batches is under way on the pool, so its
   * batches keep their order.
   */
  _via(q) {
    const d = this._direct
    if (d === null) return null
    if (!d.ready) {
      d.redial(this._connectTimeoutMs)
      q.direct = false
      return null
    }
    if (!q.direct && q.batcher._inFlight > 1) return null
    q.direct = true
    q.directBatches++
    return d
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
    return this._batch(
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
      () => this._policy.answer(calls, resolve, reject, (c) => this._policy.pacer(c)),
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
    return this._batch(
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
        this._policy.answer(calls, resolve, reject, (c) => {
          const d = this._policy.limit(c)
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
    return this._batch(
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
      () => this._policy.answer(calls, resolve, reject, (c) => this._policy.sliding(c)),
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
    return this._batch(
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
      () => this._policy.answer(calls, resolve, reject, (c) => this._policy.quota(c)),
      keys[0],
    )
  }

  /**
   * @internal blocks a pacer on lane 0; resolves with µs until the block ends. While Redis
   * is down, only 'local' can record it (in this process).
   */
  async _pacerBlock(key, nums) {
    if (this._closed) throw closedError()
    if (this._status === 'down') {
      if (this._policy.mode === 'local') return this._policy.local._pacerBlock(key, nums)
      throw this._policy.error
    }
    try {
      const out = await native.redisPacerBlock(this._native, key, nums, this._nowUs(), 0)
      return out[0]
    } catch (err) {
      const error = fromNative(err)
      if (this._opensCircuit(error)) this._trip(error, key)
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
    return this._batch(
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
      () => this._policy.answer(calls, resolve, reject, (c) => this._policy.fair(c)),
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
    return this._batch(
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
      () => this._policy.concurrent(calls, resolve, reject),
      calls[0][0],
    )
  }

  /**
   * @internal subscribes to a grant channel (shared by the waiters of this process). While
   * Redis is down under whenDown 'local', waiters queue on the embedded store, whose grants
   * come back in its replies: nothing to subscribe to (such entries go at recovery).
   */
  _listen(channel) {
    if (this._closed) return Promise.reject(closedError())
    let entry = this._channels.get(channel)
    if (!entry && this._status === 'down' && this._policy.mode === 'local') {
      entry = { count: 0, ready: Promise.resolve(), local: true }
      this._channels.set(channel, entry)
    } else if (!entry) {
      entry = { count: 0, ready: null, local: false }
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
    if (entry.local) return
    entry.ready.then(
      () => native.redisUnsubscribe(this._native, channel).catch(() => {}),
      () => {},
    )
  }

  /** @internal starts the loop that hands grant messages to waiters, while any wait */
  _wakeLoop() {
    if (this._listening || this._closed || this._status === 'down') return
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
  /** @internal ms on the store's clock as this process sees it */
  _nowMsLocal() {
    return this.clock ? this.clock.now() : Date.now()
  }

  _statsKey(kind, name) {
    return `${this.keyPrefix}:stats:{${kind}:${escapeKey(name)}}`
  }

  _registryKeys() {
    return [`${this.keyPrefix}:limiters:{registry}`, `${this.keyPrefix}:limiters:{registry}:options`]
  }

  /**
   * Writes the counts taken since the last flush: one HINCRBYFLOAT per counter of each limiter
   * and its registry entry, in one script call per hash slot. A failure gives the counts back
   * to the next flush; at close() they are counted as dropped.
   */
  _flushStats() {
    if (this._stats === null) return Promise.resolve()
    if (this._statsFlushing !== null) return this._statsFlushing
    const taken = this._stats.take()
    if (taken.length === 0) return Promise.resolve()
    if (this._status === 'down') {
      this._stats.giveBack(taken)
      return Promise.resolve()
    }
    const ttl = String(this._statsTtlMs)
    const ops = []
    const registry = [ttl, String(MAX_LIMITERS)]
    // a hash lives as long as its limit's state, and at least two flush periods (so a
    // limiter in use never loses its hash between two flushes), at most statsTtlMs
    const minTtlMs = 2 * this._statsFlushMs
    const incrs = [] // the entry of each incr operation, in order
    const now = this._nowMsLocal()
    const minute = Math.floor(now / MINUTE_MS)
    const refreshed = []
    for (const t of taken) {
      // the registry record (last use) and the TTL: with the first write, then once a minute
      const e = t.entry
      const due = e.refreshedAt === 0 || now - e.refreshedAt >= STATS_REFRESH_MS
      // one packed argument (see lua/stats.lua): TTL, the ring slot and minute of the
      // per-minute counts for charts (counted at the flush: within statsFlushMs of the
      // decisions), then the counts, empty for 0
      const c = t.counts
      if (e.ttlMs === 0) {
        e.ttlMs = Math.max(minTtlMs, Math.min(this._statsTtlMs, stateLifetimeMs(t.kind, t.options) || Infinity))
      }
      let packed = `${e.ttlMs},${c[0] !== 0 || c[1] !== 0 ? minute % SERIES : ''},${minute}`
      let fields = 0
      for (let i = 0; i < c.length; i++) {
        if (c[i] === 0) packed += ','
        else {
          packed += `,${c[i]}`
          fields++
        }
      }
      if (fields > 0) {
        incrs.push(t)
        ops.push('incr', '1', this._statsKey(t.kind, t.name), '1', packed)
      }
      if (due) {
        registry.push(
          `${t.kind}:${t.name}`,
          String(Math.round(t.lastUse)),
          e.refreshedAt === 0 ? JSON.stringify(t.options) : '',
        )
        refreshed.push(e)
      }
    }
    const [zset, options] = this._registryKeys()
    if (registry.length > 2) ops.push('registry', '2', zset, options, String(registry.length), ...registry)
    if (ops.length === 0) return Promise.resolve()
    this._statsInFlight = taken
    let sent
    try {
      sent = native.redisStats(this._native, encodeParts(ops), 5)
    } catch (err) {
      sent = Promise.reject(err)
    }
    this._statsFlushing = sent
      .then(
        (reply) => {
          for (const e of refreshed) e.refreshedAt = now
          // a hash of another type under our name (another writer): its counts cannot be
          // written, now or later; counted as dropped, never sent again
          for (let i = 0; i < incrs.length; i++) if (wrongType(reply[i])) this._stats.drop([incrs[i]])
          // the registry's cap dropped these limiters: their statistics go with them
          const gone = registry.length > 2 && Array.isArray(reply) ? reply[reply.length - 1] : null
          if (Array.isArray(gone) && gone.length > 0 && !wrongType(gone))
            return this._dropStats(gone).catch(() => undefined) // they expire anyway
        },
        (err) => {
          const error = fromNative(err)
          if (this._opensCircuit(error)) this._trip(error, zset)
          this._stats.giveBack(taken)
          throw error
        },
      )
      .finally(() => {
        this._statsInFlight = []
        this._statsFlushing = null
      })
    return this._statsFlushing
  }

  /** Deletes the statistics hashes of registry members (`<kind>:<name>`) the registry dropped. */
  async _dropStats(members) {
    const ops = []
    for (const m of members) {
      const colon = m.indexOf(':')
      if (colon > 0) ops.push('del', '1', this._statsKey(m.slice(0, colon), m.slice(colon + 1)), '0')
    }
    if (ops.length > 0) await native.redisStats(this._native, encodeParts(ops), 5)
  }

  /** This process's counts of `kind:name` not yet in Redis (unwritten or being written). */
  _unwritten(kind, name) {
    const local = this._stats.local(kind, name)
    for (const t of this._statsInFlight) {
      if (t.kind === kind && t.name === name) STATS_FIELDS.forEach((f, i) => (local[f] += t.counts[i]))
    }
    return local
  }

  /** @internal the statistics of `kind:name`: the store's, plus this process's unwritten counts */
  async _statsOf(kind, name) {
    return (await this._statsDetail([{ kind, name }]))[0].stats
  }

  /**
   * @internal statistics and per-minute history (last 30 minutes) of each `{ kind, name }`, in
   * one script call per hash slot: `[{ stats, history: [{ t, admitted, refused }] }]`
   */
  async _statsDetail(list) {
    if (this._closed) throw closedError()
    if (this._stats === null) throw statsOffError()
    const locals = list.map((l) => this._unwritten(l.kind, l.name))
    if (this._status === 'down') throw this._policy.error
    const ops = []
    for (const l of list) ops.push('hgetall', '1', this._statsKey(l.kind, l.name), '0')
    let reply = []
    if (ops.length > 0) {
      try {
        reply = await native.redisStats(this._native, encodeParts(ops), 5)
      } catch (err) {
        throw fromNative(err)
      }
    }
    const now = this._nowMsLocal()
    if (reply.some(wrongType)) throw wrongTypeError('statistics')
    return list.map((l, i) => ({
      stats: statsFrom(reply[i], locals[i]),
      history: historyFrom(reply[i], locals[i], now),
    }))
  }

  /**
   * The limiters used through any store on this Redis (with this key prefix) within
   * `statsTtlMs`, at most 10,000 (the least recently used dropped first), newest first:
   * `{ kind, name, options, lastUse }` (lastUse in ms since the epoch).
   */
  async limiters() {
    if (this._closed) throw closedError()
    if (this._stats === null) throw statsOffError()
    const seen = new Map()
    for (const l of this._stats.seen()) seen.set(`${l.kind}:${l.name}`, l)
    if (this._status === 'down') throw this._policy.error
    const [zset, options] = this._registryKeys()
    const since = String(Math.floor(this._nowMsLocal() - this._statsTtlMs))
    let reply
    try {
      reply = await native.redisStats(this._native, encodeParts(['since', '2', zset, options, '1', since]), 5)
    } catch (err) {
      throw fromNative(err)
    }
    const flat = reply[0]
    if (wrongType(flat)) throw wrongTypeError('limiter registry')
    for (let i = 0; i + 2 < flat.length; i += 3) {
      const member = flat[i]
      const colon = member.indexOf(':')
      const lastUse = Number(flat[i + 1])
      const known = seen.get(member)
      if (known !== undefined && known.lastUse >= lastUse) continue
      let parsed = {}
      try {
        parsed = JSON.parse(flat[i + 2])
      } catch {
        parsed = {}
      }
      seen.set(member, { kind: member.slice(0, colon), name: member.slice(colon + 1), options: parsed, lastUse })
    }
    return byLastUse([...seen.values()])
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
    if (this._statsTimer !== null) clearInterval(this._statsTimer)
    this._statsTimer = null
    if (this._stats !== null) {
      // the last counts: written now, or counted as dropped
      await (this._statsFlushing || Promise.resolve()).catch(() => undefined)
      await this._flushStats().catch(() => undefined)
      const left = this._stats.take()
      if (left.length > 0) this._stats.drop(left)
    }
    this._closed = true
    // batches already written settle with their real replies (Redis may have applied them: a
    // charge, a lease); calls not yet sent were refused with ERR_CLOSED above and never go.
    // Each batch has its own deadline, so this wait is bounded; the bound here is a backstop.
    if (this._inFlight > 0) {
      await new Promise((resolve) => {
        const backstop = setTimeout(resolve, 2 * this._commandTimeoutMs + 100)
        this._drained = () => {
          clearTimeout(backstop)
          resolve()
        }
      })
    }
    this._drained = null
    this._waiters.closeAll(closedError())
    if (this._probeTimer !== null) clearInterval(this._probeTimer)
    this._probeTimer = null
    this._policy.end()
    if (this._direct !== null) this._direct.close()
    try {
      await this._native.close()
    } catch (err) {
      throw fromNative(err)
    }
  }
}

module.exports = { MemoryStore, RedisStore, Waiters }
