'use strict'

// sluice/fastify: a rate-limit plugin for Fastify 5, global or per route, running in
// onRequest. The options of sluice/express, plus @fastify/rate-limit's `max` and
// `timeWindow` as aliases of `limit` and `windowMs`. See lib/http/ for what the doors share.

const { createHash } = require('node:crypto')
const { Door, DOOR } = require('./http/door')
const { doorConfig } = require('./http/options')
const { ipKey } = require('./http/key')
const { invalidConfig } = require('./errors')

const DEFAULTS = { limit: 1000, windowMs: 60_000 }
/** Where the limit can run: onRequest (default, before the body is read) or later, when the key needs more. */
const HOOKS = ['onRequest', 'preValidation', 'preHandler']
const UNITS = {
  ms: 1,
  millisecond: 1,
  milliseconds: 1,
  s: 1000,
  sec: 1000,
  second: 1000,
  seconds: 1000,
  m: 60_000,
  min: 60_000,
  minute: 60_000,
  minutes: 60_000,
  h: 3_600_000,
  hour: 3_600_000,
  hours: 3_600_000,
  d: 86_400_000,
  day: 86_400_000,
  days: 86_400_000,
}

/** `timeWindow`: ms, or a duration such as `'1 minute'`, `'30s'`, `'500 ms'`. */
function timeWindowMs(value) {
  if (typeof value === 'number') return value
  const m = typeof value === 'string' ? /^\s*(\d+(?:\.\d+)?)\s*([a-z]+)?\s*$/i.exec(value) : null
  const unit = m ? UNITS[(m[2] || 'ms').toLowerCase()] : undefined
  if (unit === undefined)
    throw invalidConfig(`timeWindow must be ms or a duration like '1 minute', got ${String(value)}`)
  return Math.round(Number(m[1]) * unit)
}

/** The options with `max` and `timeWindow` read as `limit` and `windowMs`. */
function aliases(options, where) {
  if (options === null || typeof options !== 'object' || Array.isArray(options)) {
    throw invalidConfig(`${where} must be an object`)
  }
  const { max, timeWindow, groupId, ...rest } = options
  if (max !== undefined) {
    if (rest.limit !== undefined) throw invalidConfig('give limit or its alias max, not both')
    rest.limit = max
  }
  if (timeWindow !== undefined) {
    if (rest.windowMs !== undefined) throw invalidConfig('give windowMs or its alias timeWindow, not both')
    rest.windowMs = timeWindowMs(timeWindow)
  }
  if (groupId !== undefined && (typeof groupId !== 'string' || groupId.length === 0)) {
    throw invalidConfig('groupId must be a non-empty string')
  }
  return { options: rest, groupId }
}

/** The counter name of a route's own limit: its group, or its method and URL. */
function routeIdentifier(route, groupId) {
  const id = groupId !== undefined ? `group-${groupId}` : `${[].concat(route.method).join(',')} ${route.url}`
  if (id.length <= 64 && /^[\x20-\x7e]+$/.test(id)) return id
  return `route-${createHash('sha256').update(id).digest('hex').slice(0, 32)}`
}

function defaultResponse(door, o) {
  const seconds = Math.max(1, Math.ceil(o.retryAfterMs / 1000))
  return {
    statusCode: door.status(o),
    error: door.unavailable(o) ? 'Service Unavailable' : 'Too Many Requests',
    message: `Rate limit exceeded, retry in ${seconds} second${seconds === 1 ? '' : 's'}`,
  }
}

/** The onRequest hook of one door. */
function hookFor(door, userOptions) {
  const config = door.config
  const property = config.requestPropertyName
  const handlerOptions = Object.freeze({ ...userOptions, message: config.message, statusCode: config.statusCode })

  function refuse(request, reply, o) {
    reply.code(door.status(o))
    if (config.handler) return config.handler(request, reply, handlerOptions)
    const message = config.message
    if (message === undefined) return reply.send(defaultResponse(door, o))
    if (typeof message === 'function') return Promise.resolve(message(request, reply)).then((body) => reply.send(body))
    return reply.send(message)
  }

  function respond(request, reply, o, done) {
    request[property] = door.info(o)
    for (const [name, value] of door.headers(o)) reply.header(name, value)
    if (!o.allowed) {
      const sent = refuse(request, reply, o)
      if (sent && typeof sent.then === 'function' && sent !== reply) sent.then(undefined, (err) => reply.send(err))
      return
    }
    door.settleAfter(o, request, reply, reply.raw)
    done()
  }

  const hook = function sluiceRateLimit(request, reply, done) {
    door.decide(request, reply).then(
      (o) => {
        if (o === null) return done()
        try {
          respond(request, reply, o, done)
        } catch (err) {
          done(err)
        }
      },
      (err) => (door.passes(err) ? done() : done(err)),
    )
  }
  Object.defineProperty(hook, DOOR, { value: door })
  return hook
}

/**
 * `await app.register(sluiceRateLimit, { store, max: 100, timeWindow: '1 minute' })`, before
 * the routes it limits. `global` (default true): every route, on one counter per key for
 * all of them; a route's `config: { rateLimit: { ... } }` gives it its own counter (shared
 * by the routes of one `groupId`), `config: { rateLimit: false }` exempts it.
 * `app.rateLimit(options)` makes a hook for places routes do not cover (a 404 handler).
 * `hook`: 'onRequest' (default), or 'preValidation' / 'preHandler' when the key needs what
 * runs before (authentication, the parsed body).
 */
async function sluiceRateLimit(fastify, options) {
  const { global = true, hook: hookName = 'onRequest', ...rest } = options || {}
  if (typeof global !== 'boolean') throw invalidConfig('global must be a boolean')
  if (!HOOKS.includes(hookName)) throw invalidConfig(`hook must be one of ${HOOKS.map((h) => `'${h}'`).join(', ')}`)
  const base = aliases(rest, 'options').options
  const make = (own) => new Door(doorConfig(own, { defaults: DEFAULTS }))
  const globalDoor = make(base)
  const globalHook = hookFor(globalDoor, base)
  const groups = new Map() // groupId -> hook: one counter per group
  const property = globalDoor.config.requestPropertyName
  if (!fastify.hasRequestDecorator(property)) fastify.decorateRequest(property, null)
  fastify.decorate('rateLimit', (own = {}) => {
    const merged = { ...base, ...aliases(own, 'rateLimit options').options }
    return hookFor(make(merged), merged)
  })

  fastify.addHook('onRoute', (route) => {
    const own = route.config ? route.config.rateLimit : undefined
    if (own === false) return
    let hook
    if (own === undefined || own === null) {
      if (!global) return
      hook = globalHook
    } else {
      const { options: routeOptions, groupId } = aliases(own, `config.rateLimit of ${route.url}`)
      if (groupId !== undefined && groups.has(groupId)) {
        hook = groups.get(groupId)
      } else {
        const merged = { ...base, ...routeOptions }
        if (routeOptions.identifier === undefined) merged.identifier = routeIdentifier(route, groupId)
        hook = hookFor(make(merged), merged)
        if (groupId !== undefined) groups.set(groupId, hook)
      }
    }
    const existing = route[hookName]
    route[hookName] = existing === undefined || existing === null ? [hook] : [].concat(existing, hook)
  })
}

// like fastify-plugin: the hooks apply to the routes of the app that registers it
sluiceRateLimit[Symbol.for('skip-override')] = true
sluiceRateLimit[Symbol.for('fastify.display-name')] = 'sluice-rate-limit'
sluiceRateLimit[Symbol.for('plugin-meta')] = { fastify: '5.x', name: 'sluice-rate-limit' }

module.exports = sluiceRateLimit
module.exports.default = sluiceRateLimit
module.exports.sluiceRateLimit = sluiceRateLimit
module.exports.ipKeyGenerator = ipKey
