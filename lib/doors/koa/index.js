// @ts-check
'use strict'

// sluice/koa: rate-limiting middleware for Koa 2 and 3, with the HTTP doors' options and
// koa-ratelimit's names where they mean the same (`duration`, `max`, `id`, `whitelist`,
// `blacklist`, `errorMessage`, `throw`), its defaults (2,500 requests an hour per client), and
// `ctx.state.rateLimit`. A request is Koa's context (what keyGenerator, skip, cost, handler and
// message receive). See lib/doors/http/ for what the doors share.

const { Door, DOOR } = require('../http/door')
const { doorConfig } = require('../http/options')
const { admit } = require('../http/respond')
const { onNodeEnd } = require('../http/node-http')
const { invalidConfig } = require('../../base/errors')

/** koa-ratelimit's defaults: 2,500 requests an hour, its message. */
const DEFAULTS = { limit: 2500, windowMs: 3_600_000, message: 'Rate limit exceeded, retry later.' }
/** koa-ratelimit's names, read here. */
const PEER_OPTIONS = ['duration', 'max', 'id', 'whitelist', 'blacklist', 'errorMessage', 'throw']
/** koa-ratelimit's options that have no meaning on a sluice store: taken and ignored. */
const IGNORED = ['driver', 'db', 'namespace', 'headers', 'disableHeader']

/** Where the door's headers of a refusal go when it is thrown (Koa's onerror clears the response's). */
const THROWN_HEADERS = Symbol('sluice.koa.headers')

/**
 * How the door reaches Koa's context (lib/doors/http/adapter.d.ts `HttpAccess`): request and
 * response are both the context.
 * @param {boolean} throws koa-ratelimit's `throw`: a refusal is `ctx.throw(status, body)`
 * @returns {import('../http/adapter').HttpAccess<any, any>}
 */
function access(throws) {
  return {
    clientAddress: (ctx) => ctx.ip || undefined,
    setInfo: (ctx, name, info) => {
      ctx.state[name] = info
    },
    setHeader: (ctx, name, value, append) => {
      if (append) ctx.append(name, value)
      else ctx.set(name, value)
      if (throws) (ctx[THROWN_HEADERS] ??= {})[name] = ctx.response.get(name)
    },
    refuse: (ctx, status, body) => {
      if (throws) {
        // as koa-ratelimit's ctx.throw(429, errorMessage): a string is the message, an object
        // the error's properties (http-errors'), the door's headers kept either way
        const headers = ctx[THROWN_HEADERS]
        if (typeof body === 'string') ctx.throw(status, body, { headers })
        if (body !== null && typeof body === 'object' && !Array.isArray(body)) ctx.throw(status, { ...body, headers })
        ctx.throw(status, { headers })
      }
      ctx.status = status
      ctx.body = body === undefined || body === null ? '' : body
    },
    onEnd: (ctx, listener) => onNodeEnd(ctx.res, listener),
  }
}

/** The options in the door's names: koa-ratelimit's read as aliases; `{ options, throws, blacklist }`. */
function readOptions(passed) {
  if (passed === null || typeof passed !== 'object' || Array.isArray(passed)) {
    throw invalidConfig('rate limit options must be an object')
  }
  const options = /** @type {Record<string, any>} */ ({})
  for (const [name, value] of Object.entries(passed)) {
    if (value !== undefined && !PEER_OPTIONS.includes(name) && !IGNORED.includes(name)) options[name] = value
  }
  const alias = (peer, own) => {
    if (passed[peer] === undefined) return
    if (options[own] !== undefined) throw invalidConfig(`give ${own} or its alias ${peer}, not both`)
    options[own] = passed[peer]
  }
  alias('duration', 'windowMs')
  alias('max', 'limit')
  alias('id', 'keyGenerator')
  alias('errorMessage', 'message')
  for (const name of ['whitelist', 'blacklist']) {
    if (passed[name] !== undefined && typeof passed[name] !== 'function') {
      throw invalidConfig(`${name} must be a function (ctx) => boolean`)
    }
  }
  const whitelist = passed.whitelist
  if (whitelist !== undefined) {
    const skip = options.skip
    options.skip = async (ctx, res) => Boolean(await whitelist(ctx)) || (skip !== undefined && (await skip(ctx, res)))
  }
  if (passed.throw !== undefined && typeof passed.throw !== 'boolean') throw invalidConfig('throw must be a boolean')
  return { options, throws: passed.throw === true, blacklist: passed.blacklist }
}

/**
 * `app.use(rateLimit({ store, limit: 100, windowMs: 60_000 }))`: each request one decision of
 * the store (one round trip, batched with the requests of the same moment), the headers asked
 * for, `ctx.state.rateLimit` for what follows. Over the limit: status 429 with `Retry-After` and
 * `handler(ctx)`'s answer or `message` (or, with `throw: true`, `ctx.throw(429, message)` for the
 * app's error handling, the headers kept). `blacklist(ctx)` true: 403, nothing counted. Errors
 * (a store failure, a keyGenerator that throws) are thrown to the app's error handling.
 * @param {any} passed
 */
function rateLimit(passed) {
  const { options, throws, blacklist } = readOptions(passed)
  const door = new Door(doorConfig(options, { defaults: DEFAULTS, access: access(throws) }))
  /**
   * @param {any} ctx Koa's context
   * @param {() => Promise<unknown>} next
   */
  const middleware = async function sluiceRateLimit(ctx, next) {
    if (blacklist !== undefined && (await blacklist(ctx))) {
      if (throws) ctx.throw(403)
      ctx.status = 403
      ctx.body = 'Forbidden'
      return
    }
    if (await admit(door, ctx, ctx)) await next()
  }
  /** Forgets what was counted for `key` (every window), in every process. */
  middleware.resetKey = (key) => door.resetKey(key)
  /** What is counted for `key`: `{ totalHits, resetTime }`, or undefined when nothing is. */
  middleware.getKey = (key) => door.getKey(key)
  Object.defineProperty(middleware, DOOR, { value: door })
  return middleware
}

module.exports = { rateLimit }
