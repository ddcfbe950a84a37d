// @ts-check
'use strict'

// sluice/express: rate-limiting middleware for Express 4 and 5, with express-rate-limit 8's
// options, request property, helpers and checks (`validate`, `logger`: misconfigurations
// are logged and the peer's fallback used, never thrown), a sluice store instead of its
// Store. See lib/doors/http/ for what the doors share.

const { isIPv6 } = require('node:net')
const { Door, DOOR } = require('../http/door')
const { doorConfig, COMMON_OPTIONS } = require('../http/options')
const { ipKey } = require('../http/key')
const { onNodeEnd } = require('../http/node-http')
const { validations, consoleLogger } = require('./validations')

const DEFAULTS = { limit: 5, windowMs: 60_000, message: 'Too many requests, please try again later.' }
const DRAFTS = [false, true, 'draft-6', 'draft-7', 'draft-8', 'draft-10']
const DEFAULT_SUBNET = 56
/** Options of express-rate-limit that the door reads here, or takes and ignores as the peer does. */
const PEER_ONLY = ['max', 'headers', 'validate', 'logger', 'draft_polli_ratelimit_headers', 'onLimitReached']
/** express-slow-down's options, which the peer lets through: ignored. */
const SLOW_DOWN = ['delayAfter', 'delayMs', 'maxDelayMs']

/**
 * The key of requests without `req.ip` (a destroyed connection, a misconfigured proxy): one
 * counter for all of them, as the peer keys them (ipKeyGenerator(undefined)), after its ip
 * check logged ERR_ERL_UNDEFINED_IP_ADDRESS once.
 */
const NO_IP = 'undefined'
/** An ipv6Subnet the default key can use (the peer's check may still log it as unusual). */
const usableSubnet = (s) => s === false || (Number.isInteger(s) && s >= 1 && s <= 128)

function defaultHandler(req, res, next, options) {
  const status = res.statusCode
  const message = options.message
  if (typeof message === 'function') {
    Promise.resolve(message(req, res)).then((body) => {
      if (!res.writableEnded) ACCESS.refuse(res, status, body)
    }, next)
    return
  }
  ACCESS.refuse(res, status, message)
}

/**
 * How the door reaches Express's `req` and `res` (lib/doors/http/adapter.d.ts `HttpAccess`).
 * @type {import('../http/adapter').HttpAccess<any, any>}
 */
const ACCESS = {
  clientAddress: (req) => req.ip,
  setInfo: (req, name, info) => {
    req[name] = info
  },
  setHeader: (res, name, value, append) => {
    if (append) res.append(name, value)
    else res.setHeader(name, value)
  },
  refuse: (res, status, body) => res.status(status).send(body),
  onEnd: onNodeEnd,
}

/**
 * The options in the door's names: `max` (limit) and `headers` (legacyHeaders) as aliases, an
 * unknown `standardHeaders` or unusable `ipv6Subnet` logged and replaced by the peer's
 * fallback; `{ options, subnetFn, policyFn, checks }`.
 */
function readOptions(passed) {
  if (passed === null || typeof passed !== 'object' || Array.isArray(passed)) return { options: passed }
  const options = /** @type {Record<string, any>} */ ({})
  for (const [name, value] of Object.entries(passed)) {
    if (value !== undefined && !PEER_ONLY.includes(name) && !SLOW_DOWN.includes(name)) options[name] = value
  }
  const checks = validations(passed.validate ?? true, passed.logger ?? undefined)
  // an unknown option is logged (the peer's knownOptions check: ERR_ERL_UNKNOWN_OPTION, once)
  // and ignored, as there
  const unknown = Object.keys(options).filter((name) => !COMMON_OPTIONS.includes(name))
  if (unknown.length > 0) {
    checks.run('knownOptions', unknown, [...COMMON_OPTIONS, ...PEER_ONLY])
    for (const name of unknown) delete options[name]
  }
  checks.run('draftPolliHeaders', passed.draft_polli_ratelimit_headers)
  checks.run('onLimitReached', passed.onLimitReached)
  if (options.limit === undefined && passed.max !== undefined) options.limit = passed.max
  if (options.legacyHeaders === undefined && passed.headers !== undefined) options.legacyHeaders = passed.headers
  if (options.standardHeaders !== undefined && !DRAFTS.includes(options.standardHeaders)) {
    checks.run('headersDraftVersion', options.standardHeaders)
    options.standardHeaders = false
  }
  let subnetFn = null
  if (options.ipv6Subnet !== undefined) {
    checks.run('ipv6SubnetOrKeyGenerator', options)
    if (options.keyGenerator || typeof options.ipv6Subnet === 'function') {
      if (!options.keyGenerator) subnetFn = options.ipv6Subnet
      delete options.ipv6Subnet
    } else {
      checks.run('ipv6Subnet', options.ipv6Subnet)
      if (!usableSubnet(options.ipv6Subnet)) options.ipv6Subnet = DEFAULT_SUBNET
    }
  }
  checks.run('keyGeneratorIpFallback', options.keyGenerator)
  let policyFn = null
  if (typeof options.identifier === 'function') {
    // names the draft-8/10 policy of each request only; the counters keep their default names
    policyFn = options.identifier
    delete options.identifier
  }
  if (typeof options.limit === 'function') {
    const limit = options.limit
    options.limit = async (req, res) => {
      const value = await limit(req, res)
      checks.run('limit', value)
      return value
    }
  } else if (options.limit === 0) {
    checks.run('limit', 0)
  }
  return { options, subnetFn, policyFn, checks }
}

/**
 * The default key with the peer's checks of the request (its IP, `trust proxy`,
 * `X-Forwarded-For`, `Forwarded`), each run once; then the plain key.
 */
function defaultKeyOf(config, checks, subnetFn) {
  const subnet = config.ipv6Subnet
  const plain = subnetFn
    ? (req, res) => {
        const ip = ACCESS.clientAddress(req)
        if (ip === undefined) return NO_IP
        if (!isIPv6(ip)) return ipKey(ip)
        return Promise.resolve(subnetFn(req, res)).then((s) => {
          checks.run('ipv6Subnet', s)
          return ipKey(ip, usableSubnet(s) ? s : DEFAULT_SUBNET)
        })
      }
    : (req) => {
        const ip = ACCESS.clientAddress(req)
        return ip === undefined ? NO_IP : ipKey(ip, subnet)
      }
  let checked = false
  return (req, res) => {
    if (!checked) {
      checks.run('ip', ACCESS.clientAddress(req))
      checks.run('trustProxy', req)
      checks.run('xForwardedForHeader', req)
      checks.run('forwardedHeader', req)
      checked = true // every check has run once
    }
    return plain(req, res)
  }
}

/**
 * `app.use(rateLimit({ store, limit: 100, windowMs: 60_000 }))`: every request is one
 * decision of the store (one round trip, batched with the requests of the same moment),
 * with the headers asked for and `req.rateLimit`. Over the limit: `handler` (default: status
 * 429, `message`) with `Retry-After`. Errors (a store failure, a keyGenerator that throws)
 * go to `next(err)`, the app's error handler.
 */
function rateLimit(passed) {
  const { options, subnetFn, policyFn, checks } = readOptions(passed)
  /** @type {import('../http/adapter').DoorAdapter} what this adapter supplies to the door */
  const adapter = {
    defaults: DEFAULTS,
    defaultKey: checks ? (config) => defaultKeyOf(config, checks, subnetFn) : undefined,
    access: ACCESS,
  }
  const config = doorConfig(options, adapter)
  if (checks) checks.run('creationStack')
  const door = new Door(config)
  const handler = config.handler || defaultHandler
  const handlerOptions = Object.freeze({ ...options, message: config.message, statusCode: config.statusCode })
  let countCheck = Boolean(checks) && config.windows !== null
  const named = policyFn !== null && (config.standardHeaders === 'draft-8' || config.standardHeaders === 'draft-10')

  const middleware = function sluiceRateLimit(req, res, next) {
    door.decide(req, res).then(
      (o) => {
        if (o === null) return next()
        if (named) return policyName(req, res, o).then(() => decided(req, res, next, o), next)
        decided(req, res, next, o)
      },
      (err) => {
        if (!door.passes(err)) return next(err)
        if (checks) checks.logger.error(err, 'sluice: error from store, allowing request without rate-limiting.')
        next()
      },
    )
  }

  function decided(req, res, next, o) {
    // express-rate-limit's singleCount check (at the first request): one request charged twice on one counter
    if (countCheck) {
      countCheck = false
      checks.run('singleCount', req, config.store, `${config.counter} ${o.key}`)
    }
    let pass
    try {
      pass = respond(req, res, next, o)
    } catch (err) {
      return next(err)
    }
    if (pass) next()
  }

  /** `identifier(req, res)`: the policy's name in the draft-8/10 headers (printable ASCII, else the default). */
  async function policyName(req, res, o) {
    const name = await policyFn(req, res)
    if (typeof name !== 'string' || !/^[\x20-\x7e]{1,256}$/.test(name)) return
    o.windows.forEach((w, i) => {
      w.name = o.windows.length === 1 ? name : `${name}-${i}`
    })
  }

  function respond(req, res, next, o) {
    door.attach(o, req)
    if (!res.headersSent) door.writeHeaders(o, res)
    // a refusal the door counted is given back when skipFailedRequests asks (its 429 failed)
    door.settleAfter(o, req, res)
    if (!o.allowed) {
      res.status(door.status(o))
      const done = handler(req, res, next, handlerOptions)
      if (done && typeof done.then === 'function') done.then(undefined, next)
      return false
    }
    return true
  }
  /** Forgets what was counted for `key` (every window), in every process. */
  middleware.resetKey = (key) => door.resetKey(key)
  /** What is counted for `key`: `{ totalHits, resetTime }`, or undefined when nothing is. */
  middleware.getKey = (key) => door.getKey(key)
  Object.defineProperty(middleware, DOOR, { value: door })
  return middleware
}

// express-rate-limit's other exports: its MemoryStore (sluice's here: a `store` for one process)
// and its (deprecated) time constants
const { MemoryStore } = require('../../store')
const SECOND = 1000
const MINUTE = 60 * SECOND
const HOUR = 60 * MINUTE
const DAY = 24 * HOUR

// a sluice store behind express-rate-limit's own middleware (its `store` option)
const { SluiceStore } = require('../http/peer-store')

// express-rate-limit's ConsoleLogger: warn and error to the console, the message first
module.exports = {
  rateLimit,
  ipKeyGenerator: ipKey,
  MemoryStore,
  SluiceStore,
  ConsoleLogger: consoleLogger,
  SECOND,
  MINUTE,
  HOUR,
  DAY,
}
module.exports.default = rateLimit
