'use strict'

// What the HTTP doors (sluice/express, sluice/fastify) share: their options, the limiters
// behind them, the default key, and the RateLimit header formats. The adapters only read a
// request and write a response.

const { createHash } = require('node:crypto')
const net = require('node:net')
const { MemoryStore, RedisStore } = require('./stores')
const { BucketLimiter, WindowLimiter, LeakyLimiter, PointsLimiter, elapsedMs } = require('./limiters')
const { SlidingWindowLimiter } = require('./windows')
const { DistributedPacer, PacerComposite } = require('./pacer')
const { SluiceError, invalidConfig, invalidArgument } = require('./errors')

const ALGORITHMS = ['fixed', 'window', 'sliding', 'leaky', 'gcra']
const HEADER_DRAFTS = ['draft-6', 'draft-7', 'draft-8', 'draft-10']
/** Store failures `passOnStoreError` lets through. */
const STORE_FAILURES = new Set(['ERR_STORE_UNAVAILABLE', 'ERR_TIMEOUT', 'ERR_STORE_OOM'])
const MAX_LIMIT = 1e9
const MAX_WINDOW_MS = 315_360_000_000
const MAX_WINDOWS = 16
/** A key's UTF-8 bytes at most: a longer key fails its request with ERR_INVALID_ARGUMENT. */
const MAX_KEY_BYTES = 1024 * 1024
/** Keys of more UTF-8 bytes are known by their SHA-256, in the cache and in the store. */
const MAX_RAW_KEY_BYTES = 64
/** The default bound of a door's limiter cache, bytes (`cacheBytes`). */
const DEFAULT_CACHE_BYTES = 4 * 1024 * 1024
const MAX_CACHE_BYTES = 1024 * 1024 * 1024
/**
 * What a cached limiter costs, bytes, beyond its strings (2 bytes a character): the cache
 * entry, and each limiter object. Measured with --expose-gc (10,000 entries, keys of 12 to
 * 100 bytes): 360-750 bytes an entry of one window with its strings, 800-1,100 of two; the
 * estimate is 5-45 % above that, never below.
 */
const ENTRY_BYTES = 200
const LIMITER_BYTES = 600
// a limiter name is at most 256 characters: room for the `_<window>` suffix of several windows
const MAX_NAME = 250
/** The warning of two doors on one store naming their counters alike with different limits. */
const IDENTIFIER_WARNING = 'SLUICE_IDENTIFIER_REUSED'
/** @internal where a middleware or hook keeps its Door (for tests and tools) */
const DOOR = Symbol.for('sluice.door')

const COMMON_OPTIONS = [
  'store',
  'limit',
  'windowMs',
  'algorithm',
  'limits',
  'limiter',
  'keyGenerator',
  'ipv6Subnet',
  'cost',
  'skip',
  'handler',
  'statusCode',
  'downStatusCode',
  'message',
  'standardHeaders',
  'legacyHeaders',
  'requestPropertyName',
  'identifier',
  'skipFailedRequests',
  'skipSuccessfulRequests',
  'requestWasSuccessful',
  'passOnStoreError',
  'cacheBytes',
]

const isObject = (v) => v !== null && typeof v === 'object' && !Array.isArray(v)

function checkLimit(name, value) {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 1 || value > MAX_LIMIT) {
    throw invalidConfig(`${name} must be an integer in [1, ${MAX_LIMIT}], got ${String(value)}`)
  }
  return value
}

function checkWindowMs(name, value) {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 1 || value > MAX_WINDOW_MS) {
    throw invalidConfig(`${name} must be whole ms in [1, ${MAX_WINDOW_MS}], got ${String(value)}`)
  }
  return value
}

function checkFunction(name, value) {
  if (value !== undefined && typeof value !== 'function') throw invalidConfig(`${name} must be a function`)
  return value
}

function checkBoolean(name, value, fallback) {
  if (value === undefined) return fallback
  if (typeof value !== 'boolean') throw invalidConfig(`${name} must be a boolean`)
  return value
}

/** `60s`, `1500ms`: a window's length in a policy name. */
function duration(ms) {
  return ms % 1000 === 0 ? `${ms / 1000}s` : `${ms}ms`
}

/**
 * Validates a door's options (`extra`: the adapter's own option names) into its config.
 * Throws ERR_INVALID_CONFIG, at setup, for anything wrong.
 */
function doorConfig(options, { extra = [], defaults = {} } = {}) {
  if (!isObject(options)) throw invalidConfig('rate limit options must be an object')
  const known = COMMON_OPTIONS.concat(extra)
  for (const name of Object.keys(options)) {
    if (!known.includes(name)) throw invalidConfig(`unknown rate limit option ${JSON.stringify(name)}`)
  }
  const o = { ...defaults, ...options }
  for (const name of Object.keys(o)) if (o[name] === undefined) delete o[name]
  const { store } = o
  if (!(store instanceof MemoryStore) && !(store instanceof RedisStore)) {
    throw invalidConfig('store must be a sluice MemoryStore or RedisStore')
  }
  const config = {
    store,
    limiter: checkFunction('limiter', o.limiter),
    keyGenerator: checkFunction('keyGenerator', o.keyGenerator),
    cost: checkFunction('cost', o.cost),
    skip: checkFunction('skip', o.skip),
    handler: checkFunction('handler', o.handler),
    requestWasSuccessful: checkFunction('requestWasSuccessful', o.requestWasSuccessful),
    legacyHeaders: checkBoolean('legacyHeaders', o.legacyHeaders, true),
    skipFailedRequests: checkBoolean('skipFailedRequests', o.skipFailedRequests, false),
    skipSuccessfulRequests: checkBoolean('skipSuccessfulRequests', o.skipSuccessfulRequests, false),
    passOnStoreError: checkBoolean('passOnStoreError', o.passOnStoreError, false),
    message: o.message,
    algorithm: o.algorithm === undefined ? 'fixed' : o.algorithm,
    windows: null, // [{ limit, windowMs, name }]; limit null: from the `limit` function
    limitFn: null,
    standardHeaders: false,
    statusCode: 429,
    downStatusCode: 503,
    requestPropertyName: 'rateLimit',
    ipv6Subnet: 56,
    identifier: null,
    cacheBytes: DEFAULT_CACHE_BYTES,
  }
  if (!ALGORITHMS.includes(config.algorithm)) {
    throw invalidConfig(`algorithm must be one of ${ALGORITHMS.map((a) => `'${a}'`).join(', ')}`)
  }
  for (const name of ['statusCode', 'downStatusCode']) {
    if (o[name] === undefined) continue
    if (!Number.isInteger(o[name]) || o[name] < 400 || o[name] > 599) {
      throw invalidConfig(`${name} must be an HTTP error status in [400, 599]`)
    }
    config[name] = o[name]
  }
  if (o.standardHeaders !== undefined && o.standardHeaders !== false) {
    const draft = o.standardHeaders === true ? 'draft-6' : o.standardHeaders
    if (!HEADER_DRAFTS.includes(draft)) {
      throw invalidConfig(`standardHeaders must be false, true, ${HEADER_DRAFTS.map((d) => `'${d}'`).join(', ')}`)
    }
    config.standardHeaders = draft
  }
  if (o.requestPropertyName !== undefined) {
    if (typeof o.requestPropertyName !== 'string' || o.requestPropertyName.length === 0) {
      throw invalidConfig('requestPropertyName must be a non-empty string')
    }
    config.requestPropertyName = o.requestPropertyName
  }
  if (o.ipv6Subnet !== undefined) {
    if (o.ipv6Subnet !== false && !(Number.isInteger(o.ipv6Subnet) && o.ipv6Subnet >= 1 && o.ipv6Subnet <= 128)) {
      throw invalidConfig('ipv6Subnet must be an integer in [1, 128] or false')
    }
    if (config.keyGenerator) throw invalidConfig('ipv6Subnet applies to the default key only: not with keyGenerator')
    config.ipv6Subnet = o.ipv6Subnet
  }
  if (o.identifier !== undefined) {
    if (typeof o.identifier !== 'string' || o.identifier.length === 0 || o.identifier.length > 64) {
      throw invalidConfig('identifier must be a string of 1..64 characters')
    }
    if (!/^[\x20-\x7e]+$/.test(o.identifier)) throw invalidConfig('identifier must be printable ASCII')
    config.identifier = o.identifier
  }

  if (o.cacheBytes !== undefined) {
    const n = o.cacheBytes
    if (typeof n !== 'number' || !Number.isInteger(n) || n < 0 || n > MAX_CACHE_BYTES) {
      throw invalidConfig(`cacheBytes must be an integer in [0, ${MAX_CACHE_BYTES}], got ${String(n)}`)
    }
    config.cacheBytes = n
  }

  if (config.limiter) {
    for (const name of ['limit', 'windowMs', 'limits', 'algorithm']) {
      if (o[name] !== undefined && options[name] !== undefined) {
        throw invalidConfig(`limiter(req) decides alone: do not give ${name} with it`)
      }
    }
    config.algorithm = null
  } else if (o.limits !== undefined) {
    if (options.limit !== undefined || options.windowMs !== undefined) {
      throw invalidConfig('give either limits or limit and windowMs')
    }
    if (!Array.isArray(o.limits) || o.limits.length < 1 || o.limits.length > MAX_WINDOWS) {
      throw invalidConfig(`limits must be an array of 1..${MAX_WINDOWS} { limit, windowMs }`)
    }
    config.windows = o.limits.map((w, i) => {
      if (!isObject(w)) throw invalidConfig(`limits[${i}] must be an object { limit, windowMs }`)
      for (const name of Object.keys(w)) {
        if (name !== 'limit' && name !== 'windowMs') throw invalidConfig(`unknown option ${name} in limits[${i}]`)
      }
      return {
        limit: checkLimit(`limits[${i}].limit`, w.limit),
        windowMs: checkWindowMs(`limits[${i}].windowMs`, w.windowMs),
      }
    })
  } else {
    const windowMs = checkWindowMs('windowMs', o.windowMs)
    if (typeof o.limit === 'function') {
      config.limitFn = o.limit
      config.windows = [{ limit: null, windowMs }]
    } else {
      config.windows = [{ limit: checkLimit('limit', o.limit), windowMs }]
    }
  }
  if (config.windows) {
    const named = config.windows.map((w) => `${w.limit === null ? 'dynamic' : w.limit}-per-${duration(w.windowMs)}`)
    const id = config.identifier
    config.windows.forEach((w, i) => {
      w.name = config.windows.length === 1 ? (id ?? named[0]) : id === null ? named[i] : `${id}-${named[i]}`
    })
    config.counter = id ?? named.join('.') // names the counters
    if (config.algorithm === 'sliding' || config.algorithm === 'gcra') {
      if (config.skipFailedRequests || config.skipSuccessfulRequests) {
        throw invalidConfig(
          `skipFailedRequests and skipSuccessfulRequests refund a charge: algorithm 'fixed', 'window' or 'leaky' only`,
        )
      }
    }
  }
  config.refunds = config.skipFailedRequests || config.skipSuccessfulRequests
  return config
}

/** What escapeBytes writes for each byte value: the byte's character, or `-xx`. */
const BYTE_TEXT = Array.from({ length: 256 }, (_, byte) => {
  const c = String.fromCharCode(byte)
  return /[A-Za-z0-9]/.test(c) ? c : `-${byte.toString(16).padStart(2, '0')}`
})

/** `-xx` per UTF-8 byte of `text` but `[A-Za-z0-9]` (well-formed text only). */
function escapeBytes(text) {
  if (/^[A-Za-z0-9]*$/.test(text)) return text
  let out = ''
  for (const byte of Buffer.from(text, 'utf8')) out += BYTE_TEXT[byte]
  return out
}

/**
 * A store name for `key`: `[A-Za-z0-9]` kept, every other byte `-xx`, so that the counter
 * name `<identifier>_<key>` can never be read two ways; a key too long for a name is hashed.
 * A lone surrogate (which UTF-8 cannot hold: it would become U+FFFD and share a counter with
 * every other one) is `-uxxxx`, its code unit: distinct keys stay distinct.
 */
function escapeName(text) {
  const s = String(text)
  if (s.isWellFormed()) return escapeBytes(s)
  let out = ''
  let run = ''
  for (let i = 0; i < s.length; i++) {
    const unit = s.charCodeAt(i)
    const high = unit >= 0xd800 && unit <= 0xdbff
    const low = unit >= 0xdc00 && unit <= 0xdfff
    if (high && i + 1 < s.length && s.charCodeAt(i + 1) >= 0xdc00 && s.charCodeAt(i + 1) <= 0xdfff) {
      run += s[i] + s[i + 1]
      i++
    } else if (high || low) {
      out += `${escapeBytes(run)}-u${unit.toString(16)}`
      run = ''
    } else {
      run += s[i]
    }
  }
  return out + escapeBytes(run)
}

/**
 * `-h` and the hex SHA-256 of `text`: of its UTF-8 bytes, or, when it holds a lone surrogate
 * (which UTF-8 cannot hold), of 0xff and its UTF-16 code units (0xff is never UTF-8: the two
 * inputs never meet). `-h` is no escape of escapeName's: a hashed part never equals an escaped one.
 */
function hashName(text) {
  const hash = createHash('sha256')
  if (text.isWellFormed()) hash.update(text)
  else hash.update(Buffer.from([0xff])).update(Buffer.from(text, 'utf16le'))
  return `-h${hash.digest('hex')}`
}

/**
 * What `key` is known by in a door's cache and in the store: the key itself up to 64 UTF-8
 * bytes, else its hashName (66 characters, more than any key kept as is has: the two forms
 * never meet). A key of more than 1 MiB is ERR_INVALID_ARGUMENT (it fails its request).
 * Costs one pass over the key (a hash), never an escape of a long key.
 */
function keyId(key) {
  const units = key.length
  // a UTF-16 code unit is 1-3 UTF-8 bytes: most keys are decided by their length alone
  if (units <= MAX_RAW_KEY_BYTES / 3) return key
  const bytes = units <= MAX_RAW_KEY_BYTES || units > MAX_KEY_BYTES / 3 ? Buffer.byteLength(key) : units
  if (units > MAX_KEY_BYTES || bytes > MAX_KEY_BYTES) {
    throw invalidArgument(`a key is at most ${MAX_KEY_BYTES} bytes (UTF-8), got one of ${bytes} bytes`)
  }
  return bytes <= MAX_RAW_KEY_BYTES ? key : hashName(key)
}

/**
 * The store name of the counter of `identifier` and a key known by `id` (keyId's): the
 * identifier's escapeName, `_`, and the id's escapeName (a hashed id as it is). Neither part
 * can hold `_`, so the name is read one way only; a name that would be too long hashes its
 * key, then its identifier (each part stays readable while it fits). Several windows add
 * `_<window>` (a second `_`: never the name of one window).
 */
function nameOf(identifier, id) {
  const hashed = id.length > MAX_RAW_KEY_BYTES // a key kept as is has at most 64 code units
  let idPart = escapeName(identifier)
  let keyPart = hashed ? id : escapeName(id)
  if (idPart.length + 1 + keyPart.length <= MAX_NAME) return `${idPart}_${keyPart}`
  if (!hashed) keyPart = hashName(id)
  if (idPart.length + 1 + keyPart.length > MAX_NAME) idPart = hashName(identifier)
  return `${idPart}_${keyPart}`
}

/** The store name of the counter of `identifier` and `key`. */
function counterName(identifier, key) {
  return nameOf(identifier, keyId(String(key)))
}

/** The 8 16-bit groups of an IPv6 address (which may end in an IPv4 address). */
function ipv6Groups(ip) {
  let text = ip.split('%')[0]
  let tail = []
  const lastColon = text.lastIndexOf(':')
  const last = text.slice(lastColon + 1)
  if (last.includes('.')) {
    // the IPv4 part stands for the last two groups
    const v4 = last.split('.').map(Number)
    tail = [(v4[0] << 8) | v4[1], (v4[2] << 8) | v4[3]]
    text = text.slice(0, lastColon + 1)
    if (!text.endsWith('::')) text = text.slice(0, -1)
  }
  const parse = (s) => (s === '' ? [] : s.split(':').map((g) => parseInt(g, 16)))
  if (!text.includes('::')) return [...parse(text), ...tail]
  const [head, rest] = text.split('::')
  const left = parse(head)
  const right = parse(rest)
  return [...left, ...Array(8 - tail.length - left.length - right.length).fill(0), ...right, ...tail]
}

/** RFC 5952 text of 8 groups: the longest run of 2+ zero groups becomes `::`. */
function ipv6Text(groups) {
  let best = -1
  let bestLength = 1
  for (let i = 0; i < 8;) {
    if (groups[i] !== 0) {
      i++
      continue
    }
    let j = i
    while (j < 8 && groups[j] === 0) j++
    if (j - i > bestLength) {
      best = i
      bestLength = j - i
    }
    i = j
  }
  const hex = groups.map((g) => g.toString(16))
  if (best < 0) return hex.join(':')
  return `${hex.slice(0, best).join(':')}::${hex.slice(best + bestLength).join(':')}`
}

/**
 * The default key: the client IP; an IPv6 address masked to its /`subnet` network (one
 * customer usually holds a whole /56 or /64), an IPv4-mapped one as plain IPv4.
 */
function ipKey(ip, subnet = 56) {
  if (typeof ip !== 'string' || ip.length === 0) {
    throw invalidArgument('the request has no client IP: give a keyGenerator (or set trust proxy)')
  }
  if (!net.isIPv6(ip)) return ip
  const groups = ipv6Groups(ip)
  if (groups.slice(0, 5).every((g) => g === 0) && groups[5] === 0xffff) {
    return `${groups[6] >> 8}.${groups[6] & 255}.${groups[7] >> 8}.${groups[7] & 255}`
  }
  if (subnet === false) return ipv6Text(groups)
  const masked = groups.map((g, i) => {
    const bits = Math.max(0, Math.min(16, subnet - 16 * i))
    return bits === 16 ? g : bits === 0 ? 0 : g & ((0xffff << (16 - bits)) & 0xffff)
  })
  return `${ipv6Text(masked)}/${subnet}`
}

/** Per store: counter identifier -> { options, warned } of the doors made in this process. */
const identifiers = new WeakMap()

/** What makes a door's counters what they are, as text for a warning: algorithm and windows. */
function counterOptions(config) {
  const windows = config.windows.map((w) => `${w.limit === null ? 'limit(req)' : w.limit} per ${w.windowMs} ms`)
  return `'${config.algorithm}', ${windows.join(' and ')}`
}

/**
 * Warns (once per identifier and store) when a door names its counters as an earlier door
 * on the same store did, with other limits or another algorithm: they would count on the
 * same counters and show the same policy name. The default identifier comes from the
 * numbers only (`100-per-60s`), so two unrelated apps get it alike: they must set their own.
 */
function checkIdentifier(config) {
  if (config.windows === null) return
  let seen = identifiers.get(config.store)
  if (seen === undefined) identifiers.set(config.store, (seen = new Map()))
  const options = counterOptions(config)
  const first = seen.get(config.counter)
  if (first === undefined) {
    seen.set(config.counter, { options, warned: false })
    return
  }
  if (first.options === options || first.warned) return
  first.warned = true
  process.emitWarning(
    `two rate limit doors on one store name their counters ${JSON.stringify(config.counter)}, with different ` +
      `options (${first.options}; then ${options}): they share counters and policy names. ` +
      `Give each door its own identifier (and each app its own store keyPrefix).`,
    { type: 'SluiceWarning', code: IDENTIFIER_WARNING },
  )
}

/**
 * Names the windows of a limiter(req) limiter for the headers: from the door's identifier,
 * or from the numbers (`10-per-60s`). Never the limiter's own name or key: it may be a
 * user's key, which a header must not show (and may not be able to hold).
 */
function policyNames(windows, identifier) {
  for (const w of windows) {
    const named = `${w.limit}-per-${duration(w.windowMs)}`
    w.name = identifier === null ? named : windows.length === 1 ? identifier : `${identifier}-${named}`
  }
  return windows
}

/**
 * One door: decides a request (`decide`), describes the outcome in headers (`headers`) and
 * refunds it when asked to skip failed or successful requests.
 */
class Door {
  constructor(config) {
    this.config = config
    /** cache key -> { limiter, bytes }, oldest first (see _limiterFor) */
    this._limiters = new Map()
    this._cacheBytes = 0
    checkIdentifier(config)
  }

  /** @internal what the limiter cache holds, bytes (an estimate; at most `cacheBytes`) */
  get cacheBytes() {
    return this._cacheBytes
  }

  /** Forgets what was counted for `key`. */
  async resetKey(key) {
    const c = this.config
    if (c.windows === null) throw invalidConfig('resetKey needs the door to make its limiters (not limiter(req))')
    if (c.algorithm === 'gcra') throw invalidConfig("resetKey is not available with algorithm 'gcra'")
    const limiter = this._make(keyId(String(key)), c.limitFn ? 1 : null)
    await Promise.all((Array.isArray(limiter) ? limiter : [limiter]).map((l) => l.reset()))
  }

  /** Now, ms, on the store's clock. */
  now() {
    const clock = this.config.store.clock
    return clock ? clock.now() : Date.now()
  }

  /**
   * @internal `at` (read with now(), just before a decision) on the clock refunds measure
   * elapsed time with (`elapsedMs`: monotonic), so a refund is tied to the window the server
   * charged even if the wall clock steps before it lands (issue 24)
   */
  elapsedAt(at) {
    return elapsedMs(this.config.store) - (this.now() - at)
  }

  /**
   * @internal the limiter of a key (known by `id`, keyId's) and limit, made once. The cache
   * holds at most `cacheBytes` (the oldest entries go first). Its keys are the id, or with
   * `limit(req)`, `<limit>:<id>`: the limit's digits end at the first `:`, so no key can be
   * read as another limit's.
   */
  _limiterFor(id, limit) {
    const cached = this._limiters.get(limit === null ? id : `${limit}:${id}`)
    if (cached !== undefined) return cached.limiter
    // a copy: a key cut from a larger string (a body, a header) would keep all of it alive
    id = id.split('').join('')
    const cacheKey = limit === null ? id : `${limit}:${id}`
    const limiter = this._make(id, limit)
    const made = Array.isArray(limiter) ? limiter : limiter instanceof PacerComposite ? limiter._leaves : [limiter]
    const bytes = ENTRY_BYTES + 2 * cacheKey.length + made.length * (LIMITER_BYTES + 2 * nameLength(made[0]))
    const max = this.config.cacheBytes
    if (bytes > max) return limiter
    while (this._cacheBytes + bytes > max) {
      const [oldest, entry] = this._limiters.entries().next().value
      this._limiters.delete(oldest)
      this._cacheBytes -= entry.bytes
    }
    this._limiters.set(cacheKey, { limiter, bytes })
    this._cacheBytes += bytes
    return limiter
  }

  /** @internal the limiter (or limiters, one per window) of a key known by `id` and a limit */
  _make(id, limit) {
    const c = this.config
    const windows = c.windows.map((w) => ({ ...w, limit: w.limit === null ? limit : w.limit }))
    const name = nameOf(c.counter, id)
    const store = c.store
    switch (c.algorithm) {
      case 'sliding':
        return new SlidingWindowLimiter(store, {
          name,
          windows: windows.map((w) => ({ limit: w.limit, intervalMs: w.windowMs })),
        })
      case 'gcra': {
        const pacers = windows.map(
          (w, i) =>
            new DistributedPacer(store, {
              // a pacer's key may hold any character: `.` is in no counter name
              key: windows.length === 1 ? name : `${name}.${i}`,
              qps: (w.limit * 1000) / w.windowMs,
              maxBurst: w.limit,
            }),
        )
        return pacers.length === 1 ? pacers[0] : new PacerComposite(pacers)
      }
      default: {
        const Kind = c.algorithm === 'fixed' ? BucketLimiter : c.algorithm === 'window' ? WindowLimiter : LeakyLimiter
        const made = windows.map(
          (w, i) =>
            new Kind(store, {
              // `_<window>`: a second `_`, so never the name of one window of another key
              name: windows.length === 1 ? name : `${name}_${i}`,
              limit: w.limit,
              interval: w.windowMs,
              waitTimeoutMs: 0,
            }),
        )
        return made.length === 1 ? made[0] : made
      }
    }
  }

  /**
   * The outcome of a request, or null when it is skipped: `{ allowed, degraded, key,
   * weight, windows: [{ name, limit, windowMs, remaining, resetMs }], main, retryAfterMs,
   * refund }` (`main`: the window the single-window headers describe, the one with fewest
   * remaining; `refund()`: gives the charge back, for skipFailedRequests and the like).
   * A key of more than 1 MiB rejects with ERR_INVALID_ARGUMENT, before anything is charged.
   */
  async decide(req, res) {
    const c = this.config
    if (c.skip && (await c.skip(req, res))) return null
    const raw = c.keyGenerator ? await c.keyGenerator(req, res) : ipKey(req.ip, c.ipv6Subnet)
    if ((typeof raw !== 'string' && typeof raw !== 'number') || raw === '') {
      throw invalidArgument(`keyGenerator must return a non-empty string, got ${describe(raw)}`)
    }
    const key = String(raw)
    const id = keyId(key)
    let weight = 1
    if (c.cost) {
      weight = await c.cost(req, res)
      if (typeof weight !== 'number' || !Number.isInteger(weight) || weight < 0 || weight > MAX_LIMIT) {
        throw invalidArgument(`cost must return an integer in [0, ${MAX_LIMIT}], got ${describe(weight)}`)
      }
    }
    const at = this.now()
    if (c.limiter) return this._custom(await c.limiter(req, res), key, weight, at)
    let limit = null
    if (c.limitFn) {
      limit = await c.limitFn(req, res)
      if (typeof limit !== 'number' || !Number.isInteger(limit) || limit < 1 || limit > MAX_LIMIT) {
        throw invalidArgument(`limit(req) must return an integer in [1, ${MAX_LIMIT}], got ${describe(limit)}`)
      }
    }
    const limiter = this._limiterFor(id, limit)
    const windows = c.windows.map((w) => ({
      name: w.name,
      limit: w.limit === null ? limit : w.limit,
      windowMs: w.windowMs,
    }))
    if (weight > Math.min(...windows.map((w) => w.limit))) {
      // never admitted: refused without a store call
      for (const w of windows) Object.assign(w, { remaining: 0, resetMs: w.windowMs })
      return outcome(key, weight, windows, false, false, Math.max(...windows.map((w) => w.windowMs)), null, at)
    }
    return this._check(limiter, key, weight, windows, at)
  }

  async _check(limiter, key, weight, windows, at) {
    const c = this.config
    if (c.algorithm === 'sliding') {
      const d = await limiter.check(weight)
      d.windows.forEach((w, i) => {
        windows[i].remaining = w.remaining
        // a sliding window names no reset: until it has room (refused), else its length at most
        windows[i].resetMs = w.retryAfterMs > 0 ? w.retryAfterMs : windows[i].windowMs
      })
      return outcome(key, weight, windows, d.allowed, d.degraded, d.retryAfterMs, null, at)
    }
    if (c.algorithm === 'gcra') {
      const o = await limiter.rateLimit(weight)
      const allowed = o.delayMs === 0
      const marks = windows.length === 1 ? [o.watermark] : o.watermarks
      windows.forEach((w, i) => {
        const qps = (w.limit * 1000) / w.windowMs
        const level = Math.min(w.limit, marks[i] + (allowed ? weight : 0))
        w.remaining = Math.max(0, Math.floor(w.limit - level))
        w.resetMs = allowed ? Math.ceil((level / qps) * 1000) : o.delayMs
      })
      return outcome(key, weight, windows, allowed, o.degraded, o.delayMs, null, at)
    }
    if (!Array.isArray(limiter)) {
      // one counter: the common case, kept short (the weight is checked: straight to the
      // store), and counted in the store's statistics as check() counts
      const d = await limiter._call(weight, 0, true)
      const w = windows[0]
      w.remaining = d.remaining
      w.resetMs = d.allowed ? d.resetAfterMs : d.retryAfterMs
      const atE = this.elapsedAt(at) // the refund's clock (issue 24)
      const refund = d.allowed && weight > 0 && c.refunds ? () => limiter._refund(weight, d, atE) : null
      return outcome(key, weight, windows, d.allowed, d.degraded, d.retryAfterMs, refund, at)
    }
    const limiters = limiter
    const decisions = await Promise.all(limiters.map((l) => l.check(weight)))
    const allowed = decisions.every((d) => d.allowed)
    let retryAfterMs = 0
    decisions.forEach((d, i) => {
      windows[i].remaining = d.remaining
      windows[i].resetMs = d.allowed ? d.resetAfterMs : d.retryAfterMs
      if (!d.allowed) retryAfterMs = Math.max(retryAfterMs, d.retryAfterMs)
    })
    const degraded = decisions.some((d) => d.degraded)
    const atE = this.elapsedAt(at)
    if (!allowed && weight > 0) {
      // all or nothing: the windows that admitted give their charge back
      await Promise.all(
        decisions.map((d, i) => {
          if (!d.allowed) return null
          windows[i].remaining = Math.min(windows[i].limit, d.remaining + weight)
          return limiters[i]._refund(weight, d, atE)
        }),
      )
    }
    const refund =
      allowed && weight > 0 && c.refunds
        ? () => Promise.all(limiters.map((l, i) => l._refund(weight, decisions[i], atE)))
        : null
    return outcome(key, weight, windows, allowed, degraded, retryAfterMs, refund, at)
  }

  /** @internal the outcome of a limiter given by `limiter(req)` (null: not limited) */
  async _custom(limiter, key, weight, at) {
    const c = this.config
    if (limiter === null || limiter === undefined) return null
    if (limiter instanceof DistributedPacer || limiter instanceof PacerComposite) {
      // a window per pacer (a composite's members, nested ones included)
      const pacers = limiter instanceof DistributedPacer ? [limiter] : limiter._leaves
      if (pacers.length === 0) return null // a composite of no pacers limits nothing
      const o = await limiter.rateLimit(weight)
      const allowed = o.delayMs === 0
      const marks = limiter instanceof DistributedPacer ? [o.watermark] : o.watermarks
      const windows = pacers.map((p, i) => ({
        name: '',
        limit: Math.floor(p._maxBurst),
        windowMs: Math.ceil((p._maxBurst / p._qps) * 1000) || 1000,
        remaining: Math.max(0, Math.floor(p._maxBurst - marks[i] - (allowed ? weight : 0))),
        resetMs: o.delayMs,
      }))
      return outcome(key, weight, policyNames(windows, c.identifier), allowed, o.degraded, o.delayMs, null, at)
    }
    if (limiter instanceof SlidingWindowLimiter) {
      if (c.skipFailedRequests || c.skipSuccessfulRequests) throw noRefund()
      const d = await limiter.check(weight)
      const windows = limiter.windows.map((w, i) => ({
        name: '',
        limit: w.limit,
        windowMs: w.intervalMs,
        remaining: d.windows[i].remaining,
        resetMs: d.windows[i].retryAfterMs > 0 ? d.windows[i].retryAfterMs : w.intervalMs,
      }))
      return outcome(key, weight, policyNames(windows, c.identifier), d.allowed, d.degraded, d.retryAfterMs, null, at)
    }
    if (
      limiter instanceof BucketLimiter ||
      limiter instanceof WindowLimiter ||
      limiter instanceof LeakyLimiter ||
      limiter instanceof PointsLimiter
    ) {
      const d = await limiter.check(weight)
      const w = {
        name: '',
        limit: limiter.limit,
        windowMs: limiter.intervalMs,
        remaining: d.remaining,
        resetMs: d.allowed ? d.resetAfterMs : d.retryAfterMs,
      }
      const atE = this.elapsedAt(at) // the refund's clock (issue 24)
      const refund = d.allowed && weight > 0 && c.refunds ? () => limiter._refund(weight, d, atE) : null
      return outcome(key, weight, policyNames([w], c.identifier), d.allowed, d.degraded, d.retryAfterMs, refund, at)
    }
    throw invalidConfig(
      'limiter(req) must return a Bucket/Window/Leaky/Points/SlidingWindow limiter, a DistributedPacer, a PacerComposite or null',
    )
  }

  /**
   * The headers of an outcome, as [name, value, append] (append: a list field other doors
   * may add to). `Retry-After` on every refusal, never before the reset it reports.
   */
  headers(o) {
    const c = this.config
    const out = []
    const main = o.windows[o.main]
    const resetS = (w) => Math.max(0, Math.ceil(w.resetMs / 1000))
    if (c.legacyHeaders) {
      out.push(['X-RateLimit-Limit', String(main.limit), false])
      out.push(['X-RateLimit-Remaining', String(main.remaining), false])
      // from the time the request was decided: resetMs is rounded up to whole ms, so `- 1`
      // keeps a window that ends on a whole second on that second
      out.push(['X-RateLimit-Reset', String(Math.ceil((o.at + main.resetMs - 1) / 1000)), false])
    }
    switch (c.standardHeaders) {
      case 'draft-6':
        out.push(['RateLimit-Policy', `${main.limit};w=${Math.ceil(main.windowMs / 1000)}`, false])
        out.push(['RateLimit-Limit', String(main.limit), false])
        out.push(['RateLimit-Remaining', String(main.remaining), false])
        out.push(['RateLimit-Reset', String(resetS(main)), false])
        break
      case 'draft-7':
        out.push(['RateLimit-Policy', `${main.limit};w=${Math.ceil(main.windowMs / 1000)}`, false])
        out.push(['RateLimit', `limit=${main.limit}, remaining=${main.remaining}, reset=${resetS(main)}`, false])
        break
      case 'draft-8': {
        const pk = partitionKey(o.key)
        out.push([
          'RateLimit',
          o.windows.map((w) => `"${sfString(w.name)}"; r=${w.remaining}; t=${resetS(w)}`).join(', '),
          true,
        ])
        out.push([
          'RateLimit-Policy',
          o.windows
            .map((w) => `"${sfString(w.name)}"; q=${w.limit}; w=${Math.ceil(w.windowMs / 1000)}; pk=:${pk}:`)
            .join(', '),
          true,
        ])
        break
      }
      case 'draft-10':
        out.push([
          'RateLimit',
          o.windows.map((w) => `"${sfString(w.name)}";r=${w.remaining};t=${resetS(w)}`).join(', '),
          true,
        ])
        out.push([
          'RateLimit-Policy',
          o.windows.map((w) => `"${sfString(w.name)}";q=${w.limit};w=${Math.ceil(w.windowMs / 1000)}`).join(', '),
          true,
        ])
        break
      default:
        break
    }
    if (!o.allowed) {
      let retryS = Math.max(1, Math.ceil(o.retryAfterMs / 1000))
      for (const w of o.windows) if (w.remaining < o.weight) retryS = Math.max(retryS, resetS(w))
      out.push(['Retry-After', String(retryS), false])
    }
    return out
  }

  /** `req.rateLimit`: the window the single-window headers describe */
  info(o) {
    const main = o.windows[o.main]
    return {
      limit: main.limit,
      used: Math.max(0, main.limit - main.remaining),
      remaining: main.remaining,
      resetTime: new Date(o.at + main.resetMs),
      degraded: o.degraded,
      key: o.key,
    }
  }

  /**
   * The status of a refusal: `downStatusCode` (503) when it was refused for want of Redis
   * (whenDown 'deny'), else `statusCode` (429; whenDown 'local' refuses by a real count).
   */
  status(o) {
    return this.unavailable(o) ? this.config.downStatusCode : this.config.statusCode
  }

  /** Whether a refusal is for want of Redis (whenDown 'deny'), not for a count. */
  unavailable(o) {
    return o.degraded && this.config.store.whenDown === 'deny'
  }

  /** Whether a store failure lets the request through (passOnStoreError). */
  passes(err) {
    return this.config.passOnStoreError && err instanceof SluiceError && STORE_FAILURES.has(err.code)
  }

  /**
   * Gives the charge of `o` back once the response ends, when skipFailedRequests or
   * skipSuccessfulRequests asks (`raw`: the node response; a response closed before it
   * finished counts as failed).
   */
  settleAfter(o, req, res, raw) {
    const c = this.config
    if (o.refund === null || (!c.skipFailedRequests && !c.skipSuccessfulRequests)) return
    let settled = false
    const settle = (finished) => {
      if (settled) return
      settled = true
      let ok = false
      try {
        ok = finished && (c.requestWasSuccessful ? c.requestWasSuccessful(req, res) : raw.statusCode < 400)
      } catch {
        ok = false // a requestWasSuccessful that throws: the request did not succeed
      }
      if (ok ? c.skipSuccessfulRequests : c.skipFailedRequests) o.refund().catch(() => {})
    }
    raw.once('finish', () => settle(true))
    raw.once('close', () => settle(raw.writableFinished))
  }
}

const noRefund = () =>
  invalidConfig('skipFailedRequests and skipSuccessfulRequests need a Bucket, Window, Leaky or Points limiter')

function outcome(key, weight, windows, allowed, degraded, retryAfterMs, refund, at) {
  let main = 0
  for (let i = 1; i < windows.length; i++) {
    const w = windows[i]
    const m = windows[main]
    if (w.remaining < m.remaining || (w.remaining === m.remaining && w.resetMs > m.resetMs)) main = i
  }
  return { allowed, degraded, key, weight, windows, main, retryAfterMs, refund, at }
}

/** express-rate-limit's draft-8 partition key: base64 of the first 12 hex digits of sha256(key) */
function partitionKey(key) {
  return Buffer.from(createHash('sha256').update(key).digest('hex').slice(0, 12)).toString('base64')
}

/** The inside of a Structured Field String (RFC 9651): `"` and `\` escaped. */
function sfString(s) {
  return s.replace(/[\\"]/g, (ch) => `\\${ch}`)
}

function describe(value) {
  if (typeof value === 'string') return JSON.stringify(value)
  if (typeof value === 'number' || typeof value === 'boolean' || value === null || value === undefined)
    return String(value)
  return typeof value
}

/** The characters of a made limiter's name (or pacer key): what its strings cost. */
function nameLength(limiter) {
  return limiter instanceof DistributedPacer ? limiter.key.length : limiter.name.length
}

module.exports = { Door, doorConfig, ipKey, counterName, escapeName, keyId, IDENTIFIER_WARNING, DOOR }
