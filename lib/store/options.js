// @ts-check
'use strict'
// The options of the two stores: `new MemoryStore(options)` and `RedisStore.connect(options)`
// checked (ERR_INVALID_CONFIG for anything unknown or out of range) and given their defaults.

const { invalidConfig, ownProps, describeValue, gotValue, knownOptions } = require('../base/errors')
const { ManualClock } = require('../base/clock')
const { WHEN_DOWN } = require('./whendown')
const { MAX_INTERVAL_MS } = require('./bounds')
const { evictingServerOption } = require('./eviction')

/** The defaults of `RedisStore.connect` (the native side has the same). */
const DEFAULT_URL = 'redis://127.0.0.1:6379'
const DEFAULT_COMMAND_TIMEOUT_MS = 2000
const DEFAULT_CONNECT_TIMEOUT_MS = 5000
const DEFAULT_STATS_FLUSH_MS = 5000
const DEFAULT_STATS_TTL_MS = 7 * 86_400_000
const DEFAULT_PROBE_INTERVAL_MS = 1000
const DEFAULT_DENY_CACHE_KEYS = 100_000

const MEMORY_OPTIONS = ['keyPrefix', 'clock', 'stats']
const REDIS_OPTIONS = [
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
  'sentinel',
  'evictingServer',
]

/**
 * The mark of a sluice store (both stores set it): limiters check their store by it without
 * requiring the stores' modules (which require the kind registry, which holds limiter classes).
 */
const STORE = Symbol('sluice.store')

/** Whether `x` is a MemoryStore or a RedisStore. */
const isStore = (x) => x !== null && typeof x === 'object' && x[STORE] === true

/** The options both stores have (`keyPrefix`, `clock`), after rejecting names not in `allowed`. */
function storeOptions(options, allowed) {
  if (options === undefined || options === null) options = {}
  if (typeof options !== 'object' || Array.isArray(options)) throw invalidConfig('store options must be an object')
  knownOptions(options, allowed, 'store')
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
  if (typeof value !== 'boolean') throw invalidConfig(`stats must be a boolean, got ${describeValue(value)}`)
  return value
}

/** The options of `new MemoryStore(options)`. */
function memoryOptions(options) {
  const { keyPrefix, clock } = storeOptions(options, MEMORY_OPTIONS)
  return { keyPrefix, clock, stats: statsOption(options) }
}

/** `localDenyCache`: false (default), true, or `{ maxKeys }`; the number of keys kept (0: off). */
function denyCacheOption(value) {
  if (value === undefined || value === false) return 0
  if (value === true) return DEFAULT_DENY_CACHE_KEYS
  if (value !== null && typeof value === 'object' && !Array.isArray(value)) {
    knownOptions(value, ['maxKeys'], 'localDenyCache')
    const { maxKeys = DEFAULT_DENY_CACHE_KEYS } = value
    if (Number.isInteger(maxKeys) && maxKeys >= 1 && maxKeys <= 10_000_000) return maxKeys
  }
  throw invalidConfig('localDenyCache must be a boolean or { maxKeys: integer in [1, 10000000] }')
}

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
  knownOptions(t, ['ca', 'cert', 'key', 'rejectUnauthorized'], 'tls')
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
    throw invalidConfig(`tls.rejectUnauthorized must be a boolean, got ${describeValue(t.rejectUnauthorized)}`)
  }
  if ((t.cert === undefined) !== (t.key === undefined)) throw invalidConfig('tls.cert and tls.key go together')
  return {
    ca: pem('ca', t.ca, true),
    cert: pem('cert', t.cert, false),
    key: pem('key', t.key, false),
    rejectUnauthorized: t.rejectUnauthorized,
  }
}

/** `host:port` of a `redis://host:port` URL (no user, password, path or query), or null. */
function hostPort(url) {
  let u
  try {
    u = new URL(url)
  } catch {
    return null
  }
  if (u.protocol !== 'redis:' || u.username || u.password || u.search || u.hash) return null
  if (u.pathname && u.pathname !== '/') return null
  const host = u.hostname.startsWith('[') ? u.hostname.slice(1, -1) : u.hostname
  if (!host) return null
  return { host, port: Number(u.port || 26379) }
}

/**
 * The `sentinel` option: `{ name, sentinels, password?, sentinelPassword? }`, a master found
 * through Redis Sentinel. `sentinels` are `redis://host:port` URLs (port 26379 by default);
 * `password` is the master's, `sentinelPassword` the sentinels' own. Secrets are named, never
 * shown, in errors.
 */
function sentinelOption(value) {
  if (value === undefined) return undefined
  const shape = 'sentinel must be { name, sentinels: [redis://host:port URLs], password?, sentinelPassword? }'
  if (value === null || typeof value !== 'object' || Array.isArray(value)) throw invalidConfig(shape)
  const s = ownProps(value)
  knownOptions(s, ['name', 'sentinels', 'password', 'sentinelPassword'], 'sentinel')
  if (typeof s.name !== 'string' || !/^[\x21-\x7e]{1,256}$/.test(s.name)) {
    throw invalidConfig('sentinel.name must be the master group name: 1..256 printable ASCII characters, no spaces')
  }
  if (!Array.isArray(s.sentinels) || s.sentinels.length === 0 || s.sentinels.length > 64) {
    throw invalidConfig('sentinel.sentinels must be a non-empty array (at most 64) of redis://host:port URLs')
  }
  const sentinels = s.sentinels.map((url, i) => {
    const at = typeof url === 'string' ? hostPort(url) : null
    if (at === null || !Number.isInteger(at.port) || at.port < 1 || at.port > 65535) {
      throw invalidConfig(
        `sentinel.sentinels[${i}] must be a redis://host:port URL without credentials (use sentinelPassword)`,
      )
    }
    return at
  })
  for (const name of ['password', 'sentinelPassword']) {
    if (s[name] !== undefined && (typeof s[name] !== 'string' || s[name].length === 0)) {
      throw invalidConfig(`sentinel.${name} must be a non-empty string`)
    }
  }
  return {
    name: s.name,
    sentinels,
    urls: sentinels.map(({ host, port }) => `redis://${host.includes(':') ? `[${host}]` : host}:${port}`),
    password: s.password,
    sentinelPassword: s.sentinelPassword,
  }
}

/** ioredis' and node-redis' ways to name a server, which RedisStore.connect takes as a URL. */
const URL_PARTS = ['host', 'port', 'username', 'password', 'db']

/**
 * `{ host, port }` (ioredis' habit) refused with a hint: the URL to give instead, built from
 * what was given, a password shown as `<password>` (and a user name as `<user>`), never itself.
 */
function urlHint(options) {
  if (options === null || typeof options !== 'object' || Array.isArray(options)) return
  const o = ownProps(options)
  const given = URL_PARTS.filter((k) => k in o)
  if (given.length === 0) return
  if (o.url !== undefined)
    throw invalidConfig(`the url names the server: RedisStore.connect takes no ${given.join(', ')} (ioredis' options)`)
  const host =
    typeof o.host === 'string' && /^[A-Za-z0-9.:_-]{1,255}$/.test(o.host)
      ? o.host.includes(':')
        ? `[${o.host}]`
        : o.host
      : '127.0.0.1'
  const port =
    (typeof o.port === 'number' || typeof o.port === 'string') && /^[0-9]{1,5}$/.test(String(o.port)) ? o.port : 6379
  const user = o.username === undefined ? '' : '<user>'
  const auth = o.password === undefined ? (user ? `${user}@` : '') : `${user}:<password>@`
  const db = Number.isInteger(o.db) && o.db > 0 && o.db < 1000 ? `/${o.db}` : ''
  throw invalidConfig(
    `RedisStore.connect takes { url: 'redis://host:port' } (or the URL as a string), not { ${given.join(', ')} }: ` +
      `RedisStore.connect({ url: 'redis://${auth}${host}:${port}${db}' })`,
  )
}

/**
 * `host:port` of a Redis URL, or null when it is not one. The whole userinfo, up to the last
 * `@` (as the native side masks it), is cut before parsing: a password written unescaped with
 * `/`, `?` or `#` in it can never be read as a host or a port.
 */
function serverAt(url) {
  const scheme = /^(rediss?):\/\//i.exec(url)
  if (scheme === null) return null
  const rest = url.slice(scheme[0].length)
  try {
    const u = new URL(`${scheme[1]}://${rest.slice(rest.lastIndexOf('@') + 1)}`)
    return u.hostname ? `${u.hostname}:${u.port || 6379}` : null
  } catch {
    return null
  }
}

/**
 * The server a store's errors name: `127.0.0.1:6379`, a cluster's seeds (`cluster
 * 10.0.0.1:7000, 10.0.0.2:7000`, at most 3 shown) or a Sentinel master (`master mymaster via
 * sentinels 10.0.0.1:26379`); never a user name or password. null when the URL is not one.
 */
function serverOf(url, cluster, sentinel) {
  const list = (urls) => {
    const shown = urls.slice(0, 3).map((u) => serverAt(u) ?? 'an invalid URL')
    return shown.join(', ') + (urls.length > 3 ? ` and ${urls.length - 3} more` : '')
  }
  if (sentinel) return `master ${JSON.stringify(sentinel.name)} via sentinels ${list(sentinel.urls)}`
  if (cluster !== undefined) return `cluster ${list(cluster)}`
  return serverAt(url)
}

/** An integer option in [min, max], or its default when not given. */
function integerOption(o, name, fallback, min, max) {
  const value = o[name] === undefined ? fallback : o[name]
  if (!Number.isInteger(value) || value < min || value > max) {
    throw invalidConfig(`${name} must be an integer in [${min}, ${max}], got ${describeValue(value)}`)
  }
  return value
}

/**
 * The options of `RedisStore.connect(options)` (a URL string or an object): what the
 * native pool is given (`pool`), and what the store itself uses.
 */
function redisOptions(options) {
  if (typeof options === 'string') options = { url: options }
  urlHint(options)
  const { keyPrefix, clock } = storeOptions(options, REDIS_OPTIONS)
  const o = ownProps(options || {})
  if (o.url !== undefined && typeof o.url !== 'string') {
    throw invalidConfig(`url must be a redis:// URL string, got ${describeValue(o.url)}`)
  }
  if (o.cluster !== undefined) {
    if (!Array.isArray(o.cluster) || o.cluster.length === 0 || !o.cluster.every((u) => typeof u === 'string')) {
      throw invalidConfig('cluster must be a non-empty array of redis:// URLs')
    }
  }
  for (const name of ['poolSize', 'commandTimeoutMs', 'connectTimeoutMs']) {
    if (o[name] !== undefined && typeof o[name] !== 'number') {
      throw invalidConfig(`${name} must be a number, got ${describeValue(o[name])}`)
    }
  }
  if (o.directConnection !== undefined && typeof o.directConnection !== 'boolean') {
    throw invalidConfig(`directConnection must be a boolean, got ${describeValue(o.directConnection)}`)
  }
  const whenDown = o.whenDown === undefined ? 'error' : o.whenDown
  if (!WHEN_DOWN.includes(whenDown)) {
    throw invalidConfig(`whenDown must be 'error', 'allow', 'deny' or 'local', ${gotValue(whenDown, WHEN_DOWN)}`)
  }
  const probeIntervalMs = integerOption(o, 'probeIntervalMs', DEFAULT_PROBE_INTERVAL_MS, 10, 600_000)
  const denyCacheKeys = denyCacheOption(o.localDenyCache)
  const stats = statsOption(o)
  const statsFlushMs = integerOption(o, 'statsFlushMs', DEFAULT_STATS_FLUSH_MS, 10, 600_000)
  const statsTtlMs = integerOption(o, 'statsTtlMs', DEFAULT_STATS_TTL_MS, 60_000, MAX_INTERVAL_MS)
  const tls = tlsOption(o.tls)
  const sentinel = sentinelOption(o.sentinel)
  if (sentinel && (o.url !== undefined || o.cluster !== undefined || tls !== undefined)) {
    throw invalidConfig(
      'sentinel goes without url, cluster and tls (a master found through Sentinel is reached by redis://)',
    )
  }
  return {
    keyPrefix,
    clock,
    url: o.url ?? DEFAULT_URL,
    server: serverOf(o.url ?? DEFAULT_URL, o.cluster, sentinel),
    pool: {
      url: o.url,
      cluster: o.cluster,
      poolSize: o.poolSize,
      commandTimeoutMs: o.commandTimeoutMs,
      connectTimeoutMs: o.connectTimeoutMs,
      // under a policy other than 'error', a store can start while Redis is down
      startDown: whenDown !== 'error',
      tls,
      sentinel: sentinel && {
        name: sentinel.name,
        sentinels: sentinel.urls,
        password: sentinel.password,
        sentinelPassword: sentinel.sentinelPassword,
      },
    },
    sentinel,
    evictingServer: evictingServerOption(o.evictingServer),
    directConnection: o.directConnection !== false,
    connectTimeoutMs: o.connectTimeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS,
    commandTimeoutMs: o.commandTimeoutMs ?? DEFAULT_COMMAND_TIMEOUT_MS,
    whenDown,
    probeIntervalMs,
    denyCacheKeys,
    stats,
    statsFlushMs,
    statsTtlMs,
  }
}

module.exports = { STORE, isStore, memoryOptions, redisOptions, serverOf }
