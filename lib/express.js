'use strict'

// sluice/express: rate-limiting middleware for Express 4 and 5, with express-rate-limit's
// option names where the meaning is the same. See lib/http/ for what the doors share.

const { Door, DOOR } = require('./http/door')
const { doorConfig } = require('./http/options')
const { ipKey } = require('./http/key')

const DEFAULTS = { limit: 5, windowMs: 60_000, message: 'Too many requests, please try again later.' }

function defaultHandler(req, res, next, options) {
  const status = res.statusCode
  const message = options.message
  if (typeof message === 'function') {
    Promise.resolve(message(req, res)).then((body) => {
      if (!res.writableEnded) res.status(status).send(body)
    }, next)
    return
  }
  res.status(status).send(message)
}

/**
 * `app.use(rateLimit({ store, limit: 100, windowMs: 60_000 }))`: every request is one
 * decision of the store (one round trip, batched with the requests of the same moment),
 * with the headers asked for and `req.rateLimit`. Over the limit: `handler` (default: status
 * 429, `message`) with `Retry-After`. Errors (a store failure, a keyGenerator that throws)
 * go to `next(err)`, the app's error handler.
 */
function rateLimit(options) {
  const config = doorConfig(options, { defaults: DEFAULTS })
  const door = new Door(config)
  const handler = config.handler || defaultHandler
  const handlerOptions = Object.freeze({ ...options, message: config.message, statusCode: config.statusCode })
  const property = config.requestPropertyName

  const middleware = function sluiceRateLimit(req, res, next) {
    door.decide(req, res).then(
      (o) => {
        if (o === null) return next()
        let pass
        try {
          pass = respond(req, res, next, o)
        } catch (err) {
          return next(err)
        }
        if (pass) next()
      },
      (err) => (door.passes(err) ? next() : next(err)),
    )
  }

  function respond(req, res, next, o) {
    req[property] = door.info(o)
    if (!res.headersSent) {
      for (const [name, value, append] of door.headers(o)) {
        if (append) res.append(name, value)
        else res.setHeader(name, value)
      }
    }
    if (!o.allowed) {
      res.status(door.status(o))
      const done = handler(req, res, next, handlerOptions)
      if (done && typeof done.then === 'function') done.then(undefined, next)
      return false
    }
    door.settleAfter(o, req, res, res)
    return true
  }
  /** Forgets what was counted for `key` (every window), in every process. */
  middleware.resetKey = (key) => door.resetKey(key)
  Object.defineProperty(middleware, DOOR, { value: door })
  return middleware
}

module.exports = { rateLimit, ipKeyGenerator: ipKey }
module.exports.default = rateLimit
