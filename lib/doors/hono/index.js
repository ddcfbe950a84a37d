// @ts-check
'use strict'

// sluice/hono: rate-limiting middleware for Hono 4, with the HTTP doors' options (express-rate-
// limit's names, as hono-rate-limiter keeps them), headers and keys, and `c.get('rateLimit')`.
// A request is Hono's Context (what keyGenerator, skip, cost, handler and message receive); the
// answer is built in a FetchReply (lib/doors/http/fetch-api.js) and written onto `c.res` once the
// handler has answered. See lib/doors/http/ for what the doors share.

const { Door, DOOR } = require('../http/door')
const { doorConfig } = require('../http/options')
const { admit } = require('../http/respond')
const { FetchReply, refusal } = require('../http/fetch-api')

/** hono-rate-limiter's defaults (express-rate-limit's): 5 requests a minute per client. */
const DEFAULTS = { limit: 5, windowMs: 60_000, message: 'Too many requests, please try again later.' }

/**
 * The client address of a request on @hono/node-server (`c.env.incoming`, as its getConnInfo
 * reads it) or Bun (`c.env.requestIP`); other runtimes: none (give a keyGenerator).
 * @param {any} c
 */
function clientAddress(c) {
  const env = c.env
  if (env === undefined || env === null) return undefined
  const bindings = env.server ?? env
  const socket = bindings.incoming?.socket
  if (socket !== undefined) return socket.remoteAddress
  if (typeof env.requestIP === 'function') return env.requestIP(c.req.raw)?.address
  return undefined
}

/**
 * How the door reaches Hono's Context and the request's FetchReply (lib/doors/http/adapter.d.ts
 * `HttpAccess`): the info goes in the context's variables (`c.get(name)`).
 * @type {import('../http/adapter').HttpAccess<any, FetchReply>}
 */
const ACCESS = {
  clientAddress,
  setInfo: (c, name, info) => c.set(name, info),
  setHeader: (reply, name, value, append) => {
    reply.headers.push([name, value, append])
  },
  refuse: (reply, status, body) => {
    reply.response = reply.withHeaders(refusal(body, status))
  },
  onEnd: (reply, listener) => reply.onEnd(listener),
}

/**
 * `app.use(rateLimiter({ store, limit: 100, windowMs: 60_000 }))`: each request one decision of
 * the store (one round trip, batched with the requests of the same moment), the headers asked
 * for on the response, `c.get('rateLimit')` for the handlers. Over the limit: `handler(c)`'s
 * answer (a Response is sent as it is) or `message` (text, JSON, or `message(c)`'s), status 429
 * with `Retry-After`. Errors (a store failure, a keyGenerator that throws) go to the app's
 * `onError`.
 * @param {any} options
 */
function rateLimiter(options) {
  const door = new Door(doorConfig(options, { defaults: DEFAULTS, access: ACCESS }))
  /**
   * @param {any} c Hono's Context
   * @param {() => Promise<void>} next
   */
  const middleware = async function sluiceRateLimiter(c, next) {
    const reply = new FetchReply()
    if (!(await admit(door, c, reply))) {
      const refused = /** @type {Response} */ (reply.response)
      reply.end(true, refused.status)
      return refused
    }
    try {
      await next()
    } catch (err) {
      reply.end(false, 500)
      throw err
    }
    const res = c.res
    const answered = reply.withHeaders(res)
    if (answered !== res) c.res = answered
    reply.end(true, answered.status)
  }
  /** Forgets what was counted for `key` (every window), in every process. */
  middleware.resetKey = (key) => door.resetKey(key)
  /** What is counted for `key`: `{ totalHits, resetTime }`, or undefined when nothing is. */
  middleware.getKey = (key) => door.getKey(key)
  Object.defineProperty(middleware, DOOR, { value: door })
  return middleware
}

// a sluice store behind hono-rate-limiter's own middleware (its `store` option)
const { SluiceStore } = require('../http/peer-store')

module.exports = { rateLimiter, SluiceStore }
