'use strict'

// express-rate-limit's `validate` and `logger` options, with its meaning: checks of likely
// misconfigurations, each run once per door (at setup, or at the first request it applies
// to), that log through `logger` (`{ warn, error }`, the console by default) and never throw:
// the door goes on with the peer's fallback. `validate: false` turns them all off;
// `validate: { <name>: false, default?: boolean }` some. The codes and names are the peer's
// (https://express-rate-limit.github.io/<code>/).

const { isIP } = require('node:net')
const { invalidConfig, suggestion, SluiceTypeError } = require('../../base/errors')

/** A misconfiguration found by a check (logged with logger.error). */
class ValidationError extends Error {
  constructor(code, message) {
    const help = `https://express-rate-limit.github.io/${code}/`
    super(`${message} See ${help} for more information.`)
    this.name = 'ValidationError'
    this.code = code
    this.help = help
  }
}

/** A change of behaviour since an older version of the peer (logged with logger.warn). */
class ChangeWarning extends ValidationError {
  constructor(code, message) {
    super(code, message)
    this.name = 'ChangeWarning'
  }
}

/** The peer's default logger: the console, message first. */
const consoleLogger = {
  warn: (...args) => console.warn(...args.reverse()),
  error: (...args) => console.error(...args.reverse()),
}

/** Each check: what it finds (a ValidationError or ChangeWarning), or nothing. */
const CHECKS = {
  ip(ip) {
    if (ip === undefined) {
      return new ValidationError(
        'ERR_ERL_UNDEFINED_IP_ADDRESS',
        `An undefined 'request.ip' was detected. This might indicate a misconfiguration or the connection being destroyed prematurely.`,
      )
    }
    if (!isIP(ip)) {
      return new ValidationError(
        'ERR_ERL_INVALID_IP_ADDRESS',
        `An invalid 'request.ip' (${ip}) was detected. Consider passing a custom 'keyGenerator' function to the rate limiter.`,
      )
    }
  },
  trustProxy(req) {
    if (req.app && req.app.get('trust proxy') === true) {
      return new ValidationError(
        'ERR_ERL_PERMISSIVE_TRUST_PROXY',
        `The Express 'trust proxy' setting is true, which allows anyone to trivially bypass IP-based rate limiting.`,
      )
    }
  },
  xForwardedForHeader(req) {
    if (req.headers['x-forwarded-for'] && req.app && req.app.get('trust proxy') === false) {
      return new ValidationError(
        'ERR_ERL_UNEXPECTED_X_FORWARDED_FOR',
        `The 'X-Forwarded-For' header is set but the Express 'trust proxy' setting is false (default). This could indicate a misconfiguration which would prevent the rate limiter from accurately identifying users.`,
      )
    }
  },
  forwardedHeader(req) {
    if (req.headers.forwarded && req.ip === req.socket?.remoteAddress) {
      return new ValidationError(
        'ERR_ERL_FORWARDED_HEADER',
        `The 'Forwarded' header (standardized X-Forwarded-For) is set but currently being ignored. Add a custom keyGenerator to use a value from this header.`,
      )
    }
  },
  limit(limit) {
    if (limit === 0) {
      return new ChangeWarning(
        'WRN_ERL_MAX_ZERO',
        'Setting limit or max to 0 disables rate limiting in express-rate-limit v6 and older, but will cause all requests to be blocked in v7',
      )
    }
  },
  draftPolliHeaders(value) {
    if (value) {
      return new ChangeWarning(
        'WRN_ERL_DEPRECATED_DRAFT_POLLI_HEADERS',
        `The draft_polli_ratelimit_headers configuration option is deprecated and has been removed in express-rate-limit v7, please set standardHeaders: 'draft-6' instead.`,
      )
    }
  },
  onLimitReached(value) {
    if (value) {
      return new ChangeWarning(
        'WRN_ERL_DEPRECATED_ON_LIMIT_REACHED',
        'The onLimitReached configuration option is deprecated and has been removed in express-rate-limit v7.',
      )
    }
  },
  headersDraftVersion(version) {
    return new ValidationError(
      'ERR_ERL_HEADERS_UNSUPPORTED_DRAFT_VERSION',
      `standardHeaders: only the following versions of the IETF draft specification are supported: draft-6, draft-7, draft-8, draft-10 (got ${String(version)}).`,
    )
  },
  creationStack() {
    const { stack } = new Error('rate limit validation check (set options.validate.creationStack=false to disable)')
    if (stack && (stack.includes('Layer.handle [as handle_request]') || stack.includes('Layer.handleRequest'))) {
      return new ValidationError(
        'ERR_ERL_CREATED_IN_REQUEST_HANDLER',
        'A rate limiter should be created at app initialization, not when responding to a request.',
      )
    }
  },
  ipv6Subnet(subnet) {
    if (subnet === false) return
    if (!Number.isInteger(subnet) || subnet < 32 || subnet > 64) {
      return new ValidationError(
        'ERR_ERL_IPV6_SUBNET',
        `Unexpected ipv6Subnet value: ${subnet}. Expected an integer between 32 and 64 (usually 48-64).`,
      )
    }
  },
  ipv6SubnetOrKeyGenerator(options) {
    if (options.ipv6Subnet !== undefined && options.keyGenerator) {
      return new ValidationError(
        'ERR_ERL_IPV6SUBNET_OR_KEYGENERATOR',
        `Incompatible options: the 'ipv6Subnet' option is ignored when a custom 'keyGenerator' function is also set.`,
      )
    }
  },
  keyGeneratorIpFallback(keyGenerator) {
    if (typeof keyGenerator !== 'function') return
    const src = keyGenerator.toString()
    if ((src.includes('req.ip') || src.includes('request.ip')) && !src.includes('ipKeyGenerator')) {
      return new ValidationError(
        'ERR_ERL_KEY_GEN_IPV6',
        'Custom keyGenerator appears to use request IP without calling the ipKeyGenerator helper function for IPv6 addresses. This could allow IPv6 users to bypass limits.',
      )
    }
  },
}
/** Per request: per store, the counters (`<identifier> <key>`) doors have charged for it. */
const counted = new WeakMap()
/** A request counted twice on one counter of one store (two doors of one identifier on a route). */
CHECKS.singleCount = (req, store, counter) => {
  let stores = counted.get(req)
  if (stores === undefined) counted.set(req, (stores = new Map()))
  let names = stores.get(store)
  if (names === undefined) stores.set(store, (names = new Set()))
  if (names.has(counter)) {
    return new ValidationError(
      'ERR_ERL_DOUBLE_COUNT',
      `The hit count for ${JSON.stringify(counter)} was incremented more than once for a single request.`,
    )
  }
  names.add(counter)
}
/**
 * Options the door does not know (`names`, at least one): the first named, as the peer does,
 * with the closest of `known` (`did you mean "windowMs"?`).
 */
CHECKS.knownOptions = (names, known = []) =>
  new ValidationError(
    'ERR_ERL_UNKNOWN_OPTION',
    `Unexpected configuration option: ${JSON.stringify(names[0])}${suggestion(names[0], known)}`,
  )
// the peer's checks of its own Store interface and MemoryStore: nothing to find with a sluice
// store (one store serves many doors, each counting under its own identifier)
for (const name of ['positiveHits', 'unsharedStore', 'headersResetTime', 'validationsConfig', 'windowMs']) {
  CHECKS[name] = () => undefined
}

/**
 * The checks of one door under `validate` and `logger`: `run(name, ...args)` runs check
 * `name` the first time it is asked (once per door), logging what it finds.
 */
function validations(validate = true, logger = consoleLogger) {
  if (
    logger === null ||
    typeof logger !== 'object' ||
    typeof logger.error !== 'function' ||
    typeof logger.warn !== 'function'
  ) {
    // a TypeError, as the peer throws (options-test: 'should not allow an invalid logger'), and a SluiceError
    throw new SluiceTypeError('ERR_INVALID_CONFIG', 'logger must be an object with warn and error functions')
  }
  let enabled
  if (typeof validate === 'boolean') enabled = { default: validate }
  else if (validate !== null && typeof validate === 'object' && !Array.isArray(validate))
    enabled = { default: true, ...validate }
  else throw invalidConfig('validate must be a boolean or an object of booleans')
  const done = new Set()
  const run = (name, ...args) => {
    if (done.has(name) || !(enabled[name] ?? enabled.default)) return
    done.add(name)
    const found = CHECKS[name](...args)
    if (found instanceof ChangeWarning) logger.warn(found)
    else if (found) logger.error(found)
  }
  const unknown = Object.keys(enabled).filter((name) => name !== 'default' && !(name in CHECKS))
  if (unknown.length > 0 && (enabled.validationsConfig ?? enabled.default)) {
    logger.error(
      new ValidationError(
        'ERR_ERL_UNKNOWN_VALIDATION',
        `options.validate.${unknown[0]} is not recognized. Supported validate options are: ${Object.keys(CHECKS).join(', ')}, default.`,
      ),
    )
  }
  return { run, logger, enabled: (name) => enabled[name] ?? enabled.default }
}

module.exports = { validations, ValidationError, ChangeWarning, consoleLogger }
