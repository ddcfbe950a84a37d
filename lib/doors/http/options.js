// @ts-check
'use strict'

// The options of an HTTP door (sluice/express, sluice/fastify, the Fetch-API adapter): validated at setup into the
// door's config (ERR_INVALID_CONFIG for anything wrong), the names of its windows and
// policies, and the warning when two doors of one process name their counters alike. The
// `algorithm` names are the kinds' (`door.algorithms` in lib/kinds/<kind>.js).

const { MemoryStore, RedisStore } = require('../../store')
const { invalidConfig, describeValue, knownOptions } = require('../../base/errors')
const { KINDS, classEntries } = require('../../kinds')
const { ipKey } = require('./key')

/** Every door algorithm by name, from the kind registry, in the order messages list them. */
const ALGORITHMS = new Map(
  KINDS.flatMap((k) => Object.entries(k.door?.algorithms ?? {})).sort(([, a], [, b]) => a.order - b.order),
)
/** `'a', 'b' or 'c'` */
const quotedEither = (names) => {
  const q = names.map((n) => `'${n}'`)
  return q.length < 2 ? q.join('') : `${q.slice(0, -1).join(', ')} or ${q.at(-1)}`
}
/** The algorithm of a door's config (its kind's `door.algorithms` entry). */
const algorithmOf = (config) => ALGORITHMS.get(config.algorithm)
const HEADER_DRAFTS = ['draft-6', 'draft-7', 'draft-8', 'draft-10']
const { MAX_LIMIT, MAX_INTERVAL_MS: MAX_WINDOW_MS, MAX_WINDOWS } = require('../../store/bounds')
/** The default bound of a door's limiter cache, bytes (`cacheBytes`). */
const DEFAULT_CACHE_BYTES = 4 * 1024 * 1024
const MAX_CACHE_BYTES = 1024 * 1024 * 1024
/** The warning of two doors on one store naming their counters alike with different limits. */
const IDENTIFIER_WARNING = 'SLUICE_IDENTIFIER_REUSED'

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
  'mode',
  'ban',
  'lease',
]

/** Most refusals a `ban` may wait for. */
const MAX_BAN_AFTER = 1_000_000

/**
 * `ban: { after, withinMs, forMs }` checked: a client refused `after` times within `withinMs`
 * (counted fleet-wide) is denied for `forMs` in every process; null when not given.
 */
function banOption(ban) {
  if (ban === undefined) return null
  if (!isObject(ban)) throw invalidConfig('ban must be an object { after, withinMs, forMs }')
  knownOptions(ban, ['after', 'withinMs', 'forMs'], 'ban', { where: ' in ban' })
  return {
    after: checkLimit('ban.after', ban.after, 1, MAX_BAN_AFTER),
    withinMs: checkWindowMs('ban.withinMs', ban.withinMs),
    forMs: checkWindowMs('ban.forMs', ban.forMs),
  }
}

const { modeOption } = require('../../classes/ruled')
const { leaseOption } = require('../../classes/lease')

/**
 * `lease` checked against the door's config (DESIGN §11): null, or the lease of each client's
 * counter (its maxTokens at most that counter's limit: see lib/kinds/limit.js). One window of a
 * counter algorithm the door makes, no `ban` (each refusal is tallied in its decision's script call).
 */
function doorLease(o, config) {
  if (o.lease === undefined || o.lease === false) return null
  const lease = leaseOption(o.lease, MAX_LIMIT)
  if (config.algorithm === null)
    throw invalidConfig('lease takes a door that makes its limiters: with limiter(req), give lease to that limiter')
  if (!algorithmOf(config).leases) {
    const names = [...ALGORITHMS].filter(([, a]) => a.leases).map(([n]) => n)
    throw invalidConfig(`lease takes algorithm ${quotedEither(names)}, got '${config.algorithm}'`)
  }
  if (config.windows.length > 1)
    throw invalidConfig('lease takes one window (several are decided all or nothing in one call)')
  if (config.ban !== null)
    throw invalidConfig("lease is not taken with ban (each refusal is tallied in its decision's call)")
  return lease
}
const isObject = (v) => v !== null && typeof v === 'object' && !Array.isArray(v)

function checkLimit(name, value, min = 1, max = MAX_LIMIT) {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) {
    throw invalidConfig(`${name} must be an integer in [${min}, ${max}], got ${describeValue(value)}`)
  }
  return value
}

function checkWindowMs(name, value) {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 1 || value > MAX_WINDOW_MS) {
    throw invalidConfig(`${name} must be whole ms in [1, ${MAX_WINDOW_MS}], got ${describeValue(value)}`)
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
 * Validates a door's options into its config, with what the adapter supplies (`adapter`: its
 * defaults, its own option names, the default key, allowList, headerForm, exceeding, and its
 * accessors over requests and responses; see lib/doors/http/adapter.d.ts). Throws ERR_INVALID_CONFIG, at setup, for anything wrong.
 * @param {any} options
 * @param {import('./adapter').DoorAdapter} [adapter]
 */
function doorConfig(options, adapter = {}) {
  const { extra = [], defaults = {} } = adapter
  if (!isObject(options)) throw invalidConfig('rate limit options must be an object')
  const known = COMMON_OPTIONS.concat(extra)
  knownOptions(options, known, 'rate limit')
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
    // each client's window opens at its first request, as in both peers (README, "HTTP doors")
    algorithm: o.algorithm === undefined ? 'window' : o.algorithm,
    windows: null, // [{ limit, windowMs, name }]; limit (windowMs) null: from the `limit` (`windowMs`) function
    limitFn: null,
    windowFn: null,
    /** (req, res) => the key without a keyGenerator: the client address (each adapter's own form) */
    defaultKey: null,
    /** @fastify/rate-limit's continueExceeding, exponentialBackoff and ban (lib/doors/http/exceeding.js) */
    exceeding: null,
    /** the adapter's accessors over its framework's request and response (lib/doors/http/adapter.d.ts HttpAccess) */
    access: null,
    /** @fastify/rate-limit's allowList: keys, or (req, key) => boolean */
    allowList: null,
    /** the legacy headers' names and form, when not express-rate-limit's (lib/doors/http/headers.js) */
    headerForm: null,
    /** @type {false | 'draft-6' | 'draft-7' | 'draft-8' | 'draft-10'} */
    standardHeaders: false,
    statusCode: 429,
    downStatusCode: 503,
    requestPropertyName: 'rateLimit',
    ipv6Subnet: 56,
    identifier: null,
    cacheBytes: DEFAULT_CACHE_BYTES,
    /** 'enforce', or 'shadow': decided and counted, a refusal let through (a rule's mode wins) */
    mode: modeOption(o.mode),
    /** `{ after, withinMs, forMs }`: refused clients banned fleet-wide (store.rules), or null */
    ban: banOption(o.ban),
  }
  if (typeof config.algorithm !== 'string' || !ALGORITHMS.has(config.algorithm)) {
    throw invalidConfig(`algorithm must be one of ${[...ALGORITHMS.keys()].map((a) => `'${a}'`).join(', ')}`)
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
      throw invalidConfig(`cacheBytes must be an integer in [0, ${MAX_CACHE_BYTES}], got ${describeValue(n)}`)
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
    if (config.ban !== null) throw invalidConfig('ban needs the door to make its limiters (not limiter(req))')
  } else if (o.limits !== undefined) {
    if (options.limit !== undefined || options.windowMs !== undefined) {
      throw invalidConfig('give either limits or limit and windowMs')
    }
    if (!Array.isArray(o.limits) || o.limits.length < 1 || o.limits.length > MAX_WINDOWS) {
      throw invalidConfig(`limits must be an array of 1..${MAX_WINDOWS} { limit, windowMs }`)
    }
    config.windows = o.limits.map((w, i) => {
      if (!isObject(w)) throw invalidConfig(`limits[${i}] must be an object { limit, windowMs }`)
      knownOptions(w, ['limit', 'windowMs'], 'limits', { where: ` in limits[${i}]` })
      return {
        limit: checkLimit(`limits[${i}].limit`, w.limit),
        windowMs: checkWindowMs(`limits[${i}].windowMs`, w.windowMs),
      }
    })
  } else {
    let windowMs = null
    if (typeof o.windowMs === 'function') config.windowFn = o.windowMs
    else windowMs = checkWindowMs('windowMs', o.windowMs)
    if (typeof o.limit === 'function') {
      config.limitFn = o.limit
      config.windows = [{ limit: null, windowMs }]
    } else {
      // 0: every request is refused (express-rate-limit 7+, @fastify/rate-limit)
      config.windows = [{ limit: checkLimit('limit', o.limit, 0), windowMs }]
    }
  }
  if (config.windows) {
    const named = config.windows.map(
      (w) => `${w.limit === null ? 'dynamic' : w.limit}-per-${w.windowMs === null ? 'dynamic' : duration(w.windowMs)}`,
    )
    const id = config.identifier
    config.windows.forEach((w, i) => {
      w.name = config.windows.length === 1 ? (id ?? named[0]) : id === null ? named[i] : `${id}-${named[i]}`
    })
    config.counter = id ?? named.join('.') // names the counters
    if (!algorithmOf(config).refunds) {
      if (config.skipFailedRequests || config.skipSuccessfulRequests) {
        const refunding = [...ALGORITHMS].filter(([, a]) => a.refunds).map(([name]) => name)
        throw invalidConfig(
          `skipFailedRequests and skipSuccessfulRequests refund a charge: algorithm ${quotedEither(refunding)} only`,
        )
      }
    }
  }
  config.refunds = config.skipFailedRequests || config.skipSuccessfulRequests
  /** each client's counter leases (lib/classes/lease.js), or null */
  config.lease = doorLease(o, config)
  const subnet = config.ipv6Subnet
  const access = adapter.access ?? null
  config.access = access
  if (adapter.defaultKey) config.defaultKey = adapter.defaultKey(/** @type {any} the config, complete */ (config))
  else if (access !== null) config.defaultKey = (req) => ipKey(access.clientAddress(req), subnet)
  else if (!config.keyGenerator) {
    throw invalidConfig('keyGenerator is needed: this door has no client address to key requests by')
  }
  if (adapter.allowList !== undefined) config.allowList = adapter.allowList
  if (adapter.headerForm !== undefined) config.headerForm = adapter.headerForm
  if (adapter.exceeding !== undefined) config.exceeding = adapter.exceeding
  return config
}

/** Per store: counter identifier -> { options, warned } of the doors made in this process. */
const identifiers = new WeakMap()

/** What makes a door's counters what they are, as text for a warning: algorithm and windows. */
function counterOptions(config) {
  const windows = config.windows.map(
    (w) =>
      `${w.limit === null ? 'limit(req)' : w.limit} per ${w.windowMs === null ? 'windowMs(req)' : `${w.windowMs} ms`}`,
  )
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

/** `a, b or c` */
const either = (list) => (list.length < 2 ? list.join('') : `${list.slice(0, -1).join(', ')} or ${list.at(-1)}`)
/** `Bucket/SlidingWindow` of `BucketLimiter, SlidingWindowLimiter` */
const shortNames = (names) => names.map((n) => n.replace(/Limiter$/, ''))

/** What limiter(req) may return, in words: `a Bucket/.../SlidingWindow limiter, a DistributedPacer, a PacerComposite`. */
function acceptedText() {
  const names = classEntries('door.limiters').map(([name]) => name)
  const limiters = names.filter((n) => n.endsWith('Limiter'))
  const others = names.filter((n) => !n.endsWith('Limiter'))
  return [`a ${shortNames(limiters).join('/')} limiter`, ...others.map((n) => `a ${n}`)].join(', ')
}

/** The limiter(req) classes that refund, in words: `Bucket, Window, Leaky or Points`. */
const refundableText = () =>
  either(shortNames(classEntries('door.limiters').flatMap(([name, e]) => (e.refunds ? [name] : []))))

module.exports = {
  doorConfig,
  acceptedText,
  refundableText,
  checkIdentifier,
  policyNames,
  algorithmOf,
  ALGORITHMS,
  MAX_LIMIT,
  MAX_WINDOW_MS,
  COMMON_OPTIONS,
}
