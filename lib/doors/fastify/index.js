// @ts-check
'use strict'

// sluice/fastify: a rate-limit plugin for Fastify 5, global or per route, with
// @fastify/rate-limit 11's options, callbacks, decorators, headers and answers (a sluice
// store instead of its `redis`/`store`), plus the options of sluice/express (limit,
// windowMs, algorithm, limits, limiter, standardHeaders...). See lib/doors/http/ for what the
// doors share.

const { createHash } = require('node:crypto')
const { Door, DOOR } = require('../http/door')
const { doorConfig, COMMON_OPTIONS } = require('../http/options')
const { Exceeding } = require('../http/exceeding')
const { normalizeIP, ipKey } = require('../http/key')
const { checkFor } = require('./create-rate-limit')
const { retryAfterS } = require('../http/headers')
const { onNodeEnd } = require('../http/node-http')
const { MAX_LIMIT, MAX_INTERVAL_MS } = require('../../store/bounds')
const { invalidConfig, suggestion } = require('../../base/errors')

const DEFAULT_MAX = 1000
const DEFAULT_WINDOW_MS = 60_000
const DEFAULT_SUBNET = 64
/** Where the limit can run: onRequest (default, before the body is read) or later, when the key needs more. */
const HOOKS = ['onRequest', 'preParsing', 'preValidation', 'preHandler']
const UNITS = {
  ms: 1,
  msec: 1,
  msecs: 1,
  millisecond: 1,
  milliseconds: 1,
  s: 1000,
  sec: 1000,
  secs: 1000,
  second: 1000,
  seconds: 1000,
  m: 60_000,
  min: 60_000,
  mins: 60_000,
  minute: 60_000,
  minutes: 60_000,
  h: 3_600_000,
  hr: 3_600_000,
  hrs: 3_600_000,
  hour: 3_600_000,
  hours: 3_600_000,
  d: 86_400_000,
  day: 86_400_000,
  days: 86_400_000,
  w: 604_800_000,
  wk: 604_800_000,
  wks: 604_800_000,
  week: 604_800_000,
  weeks: 604_800_000,
  y: 31_557_600_000,
  yr: 31_557_600_000,
  yrs: 31_557_600_000,
  year: 31_557_600_000,
  years: 31_557_600_000,
}
/** @fastify/rate-limit's option names, read here (the rest are sluice/express's, lib/doors/http/options.js). */
const PEER_OPTIONS = [
  'global',
  'hook',
  'max',
  'timeWindow',
  'groupId',
  'allowList',
  'ban',
  'continueExceeding',
  'exponentialBackoff',
  'addHeaders',
  'addHeadersOnExceeding',
  'enableDraftSpec',
  'skipOnError',
  'onExceeding',
  'onExceeded',
  'onBanReach',
  'nameSpace',
  'errorResponseBuilder',
  'ipv6Subnet',
  'cache', // the peer's in-memory LRU size: a sluice store keeps its own
  'redis', // the peer's ioredis client: a sluice RedisStore is the `store`
]
const LEGACY_NAMES = ['x-ratelimit-limit', 'x-ratelimit-remaining', 'x-ratelimit-reset']
const DRAFT_NAMES = ['ratelimit-limit', 'ratelimit-remaining', 'ratelimit-reset']
const noop = () => {}

/**
 * How the door reaches Fastify's `request` and `reply` (lib/doors/http/adapter.d.ts
 * `HttpAccess`): the end of a reply is its Node response's (`reply.raw`).
 * @type {import('../http/adapter').HttpAccess<any, any>}
 */
const ACCESS = {
  clientAddress: (request) => request.ip,
  setInfo: (request, name, info) => {
    request[name] = info
  },
  // a list field is set whole: Fastify's reply.header appends only set-cookie
  setHeader: (reply, name, value) => {
    reply.header(name, value)
  },
  refuse: (reply, status, body) => reply.code(status).send(body),
  onEnd: (reply, listener) => onNodeEnd(reply.raw, listener),
}

/** `timeWindow` as a string: ms, or a duration such as `'1 minute'`, `'30s'`, `'2 hrs'`; null if none. */
function durationMs(text) {
  const m = /^\s*(-?\d*\.?\d+)\s*([a-z]+)?\s*$/i.exec(text)
  const unit = m ? UNITS[(m[2] || 'ms').toLowerCase()] : undefined
  return unit === undefined ? null : Math.round(Number(m[1]) * unit)
}

/** `1 second`, `8 seconds`, `2 minutes`: the peer's `context.after` (a duration in long form, rounded). */
function longDuration(ms) {
  /** @type {[number, string][]} */
  const steps = [
    [31_557_600_000, 'year'],
    [86_400_000, 'day'],
    [3_600_000, 'hour'],
    [60_000, 'minute'],
    [1000, 'second'],
  ]
  for (const [size, name] of steps) {
    if (Math.abs(ms) >= size) {
      const n = Math.round(ms / size)
      return `${n} ${name}${n === 1 ? '' : 's'}`
    }
  }
  return `${ms} ms`
}

const isObject = (v) => v !== null && typeof v === 'object' && !Array.isArray(v)

/** Option names already warned about (a bounded set: names come from the app's code). */
const warnedUnknown = new Set()
/** Warns once per process that option `name` is ignored (SLUICE_UNKNOWN_OPTION). */
function warnUnknown(name) {
  if (warnedUnknown.has(name) || warnedUnknown.size >= 100) return
  warnedUnknown.add(name)
  const hint = suggestion(name, [...PEER_OPTIONS, ...COMMON_OPTIONS])
  process.emitWarning(`sluice/fastify ignores the unknown rate limit option ${JSON.stringify(name)}${hint}`, {
    type: 'SluiceWarning',
    code: 'SLUICE_UNKNOWN_OPTION',
  })
}

/**
 * One options object (the plugin's, a route's, `rateLimit()`'s) in the door's names: `max` and
 * `timeWindow` as `limit` and `windowMs` (a value the peer cannot use falls back to its
 * default, 1000 and 1 minute, as there; a function is called `(req, key)`), the peer's own
 * options kept apart in `peer`.
 */
function canonical(options, where) {
  if (!isObject(options)) throw invalidConfig(`${where} must be an object`)
  const rest = { ...options }
  /** @type {Record<string, any>} */
  const peer = {}
  for (const name of PEER_OPTIONS) {
    if (name in rest) {
      if (rest[name] !== undefined) peer[name] = rest[name]
      delete rest[name]
    }
  }
  // `ban` as an object is sluice's fleet-wide ban (the doors' option); a number the peer's
  if (peer.ban !== null && typeof peer.ban === 'object') {
    rest.ban = peer.ban
    delete peer.ban
  }
  // an option neither door knows: ignored, as the peer ignores it (a warning, once per name)
  for (const name of Object.keys(rest)) {
    if (!COMMON_OPTIONS.includes(name)) {
      warnUnknown(name)
      delete rest[name]
    }
  }
  if (peer.max !== undefined) {
    if (rest.limit !== undefined) throw invalidConfig('give limit or its alias max, not both')
    const max = peer.max
    rest.limit =
      typeof max === 'function'
        ? (req, _reply, key) => max(req, key)
        : Number.isFinite(max) && max >= 0
          ? Math.min(Math.trunc(max), MAX_LIMIT)
          : DEFAULT_MAX
  }
  if (peer.timeWindow !== undefined) {
    if (rest.windowMs !== undefined) throw invalidConfig('give windowMs or its alias timeWindow, not both')
    const tw = peer.timeWindow
    /** @type {number | Function} */
    let ms = DEFAULT_WINDOW_MS
    if (typeof tw === 'function') ms = (req, _reply, key) => tw(req, key)
    else if (Number.isFinite(tw) && tw >= 0) ms = Math.max(1, Math.trunc(tw))
    else if (typeof tw === 'string') ms = durationMs(tw) ?? DEFAULT_WINDOW_MS
    // a window past the longest a store keeps (10 years) is that long, as the peer clamps its
    // backoff at MAX_SAFE_INTEGER ('MAx safe Exponential Backoff': never an error at setup)
    rest.windowMs = typeof ms === 'number' ? (ms < 1 ? DEFAULT_WINDOW_MS : Math.min(ms, MAX_INTERVAL_MS)) : ms
  }
  // the peer's message for a groupId that is not a string (group-rate-limit.test.js); an empty one is ours
  if (peer.groupId !== undefined && typeof peer.groupId !== 'string') throw invalidConfig('groupId must be a string')
  if (peer.groupId === '') throw invalidConfig('groupId must be a non-empty string')
  if (peer.hook !== undefined && !HOOKS.includes(peer.hook)) {
    throw invalidConfig(`hook must be one of ${HOOKS.map((h) => `'${h}'`).join(', ')}`)
  }
  for (const name of ['onExceeding', 'onExceeded', 'onBanReach', 'errorResponseBuilder']) {
    if (peer[name] !== undefined && typeof peer[name] !== 'function') throw invalidConfig(`${name} must be a function`)
  }
  const list = peer.allowList
  if (list !== undefined && typeof list !== 'function' && !Array.isArray(list)) {
    throw invalidConfig('allowList must be an array of keys or a function (req, key)')
  }
  for (const name of ['addHeaders', 'addHeadersOnExceeding']) {
    if (peer[name] !== undefined && !isObject(peer[name])) throw invalidConfig(`${name} must be an object`)
  }
  if (peer.nameSpace !== undefined && typeof peer.nameSpace !== 'string')
    throw invalidConfig('nameSpace must be a string')
  return { options: rest, peer }
}

/** A printable identifier of at most 64 characters for `text` (a route, a name space). */
function safeIdentifier(text) {
  if (text.length <= 64 && /^[\x20-\x7e]+$/.test(text)) return text
  return `route-${createHash('sha256').update(text).digest('hex').slice(0, 32)}`
}

/** The counter name of a route's own limit: its group, or its method and URL. */
function routeIdentifier(route, groupId) {
  return safeIdentifier(
    groupId !== undefined ? `group-${groupId}` : `${[].concat(route.method).join(',')} ${route.url}`,
  )
}

/**
 * `{ addHeaders, addHeadersOnExceeding }` of the plugin's options `peer`: its own flags over
 * every header shown (`draft`: the ratelimit-* names), as the peer merges them at registration.
 */
function headerFlags(peer, draft) {
  const names = draft ? DRAFT_NAMES : LEGACY_NAMES
  const all = Object.fromEntries(names.map((name) => [name, true]))
  return {
    addHeaders: { ...all, 'retry-after': true, ...peer.addHeaders },
    addHeadersOnExceeding: { ...all, ...peer.addHeadersOnExceeding },
  }
}

/**
 * The door of merged options `{ options, peer, draft }` (`draft`: the plugin's enableDraftSpec;
 * `peer.addHeaders`/`addHeadersOnExceeding`: the plugin's headerFlags, or a route's own
 * object, which replaced them whole).
 */
/** @param {{ options: any, peer: Record<string, any>, draft?: boolean }} merged */
function makeDoor({ options, peer, draft }) {
  const own = { ...options }
  if (own.passOnStoreError === undefined && peer.skipOnError !== undefined)
    own.passOnStoreError = peer.skipOnError === true
  if (peer.nameSpace) own.identifier = safeIdentifier(`${peer.nameSpace}${own.identifier ?? 'global'}`)
  const s = peer.ipv6Subnet
  const subnet = Number.isFinite(s) && s >= 0 && s <= 128 ? Math.trunc(s) : DEFAULT_SUBNET
  // the peer's headers: the plugin's names (a route's enableDraftSpec does not rename them,
  // as there), each shown when its flag is true (headerFlags: the plugin's flags over all true;
  // a route's, rateLimit()'s or createRateLimit()'s own object replaces them whole, as there)
  const names = draft ? DRAFT_NAMES : LEGACY_NAMES
  /** @type {(shown: Record<string, unknown>) => [string, number][]} */
  const kept = (shown) => names.flatMap((name, i) => (shown[name] ? [[name, i]] : []))
  const exceeding = new Exceeding({
    continueExceeding: peer.continueExceeding === true,
    exponentialBackoff: peer.exponentialBackoff === true,
    ban: Number.isFinite(peer.ban) && peer.ban >= 0 ? Math.trunc(peer.ban) : -1,
  })
  /** @type {import('../http/adapter').DoorAdapter} what this adapter supplies to the door */
  const adapter = {
    defaults: { limit: DEFAULT_MAX, windowMs: DEFAULT_WINDOW_MS },
    defaultKey: () => (req) => normalizeIP(ACCESS.clientAddress(req), subnet),
    allowList: peer.allowList,
    headerForm: {
      allowed: kept(peer.addHeadersOnExceeding),
      refused: kept(peer.addHeaders),
      retryAfter: Boolean(peer.addHeaders['retry-after']),
    },
    exceeding: exceeding.active ? exceeding : undefined,
    access: ACCESS,
  }
  return new Door(doorConfig(own, adapter))
}

/** The peer's default answer to a refusal: an error (with statusCode) for Fastify's error handler. */
function defaultErrorResponse(_req, context) {
  /** @type {Error & { statusCode?: number }} */
  const err = new Error(`Rate limit exceeded, retry in ${context.after}`)
  err.statusCode = context.statusCode
  return err
}

/** The hook of one door (`ran`: the plugin's mark of a request already limited by one of its hooks). */
function hookFor(door, { options, peer }, ran) {
  const config = door.config
  const handlerOptions = Object.freeze({ ...options, ...peer, message: config.message, statusCode: config.statusCode })
  const onExceeding = peer.onExceeding ?? noop
  const onExceeded = peer.onExceeded ?? noop
  const onBanReach = peer.onBanReach ?? noop
  const buildError = peer.errorResponseBuilder ?? defaultErrorResponse

  function refuse(request, reply, o, done) {
    onExceeded(request, o.key)
    let statusCode = door.status(o)
    if (o.banned) {
      statusCode = 403
      onBanReach(request, o.key)
    }
    if (config.handler || config.message !== undefined) {
      reply.code(statusCode)
      const message = config.message
      const sent = config.handler
        ? config.handler(request, reply, handlerOptions)
        : typeof message === 'function'
          ? Promise.resolve(message(request, reply)).then((body) => ACCESS.refuse(reply, statusCode, body))
          : ACCESS.refuse(reply, statusCode, message)
      if (sent && typeof sent.then === 'function' && sent !== reply) sent.then(undefined, (err) => reply.send(err))
      return
    }
    const main = o.windows[o.main]
    const after = retryAfterS(o)
    const context = {
      statusCode,
      ban: o.banned === true,
      max: main.limit,
      ttl: o.retryAfterMs,
      after: longDuration(after * 1000),
    }
    done(buildError(request, context))
  }

  function respond(request, reply, o, done) {
    door.attach(o, request)
    door.writeHeaders(o, reply)
    if (!o.allowed) return refuse(request, reply, o, done)
    door.settleAfter(o, request, reply)
    onExceeding(request, o.key)
    done()
  }

  const hook = function sluiceRateLimit(request, reply, done) {
    // a request limited by one of the plugin's hooks is not limited again by another (the peer's rule)
    if (request[ran]) return done()
    request[ran] = true
    door.decide(request, reply).then(
      (o) => {
        if (o === null) return done()
        try {
          respond(request, reply, o, done)
        } catch (err) {
          done(err)
        }
      },
      (err) => {
        if (!door.passes(err)) return done(err)
        passed(request, reply).then(() => done(), done)
      },
    )
  }

  /**
   * skipOnError, a store failure let through: as the peer, the request goes on with the headers
   * of a client with nothing counted (its whole limit left, reset 0) and onExceeding called.
   */
  async function passed(request, reply) {
    const c = door.config
    const w = c.windows === null ? null : c.windows[0]
    if (w === null) return
    const key = await door.keyOf(request, reply)
    const limit = w.limit !== null ? w.limit : await c.limitFn(request, reply, key)
    const windowMs = w.windowMs !== null ? w.windowMs : await c.windowFn(request, reply, key)
    const windows = [{ name: w.name, limit, windowMs, remaining: limit, resetMs: 0 }]
    door.writeHeaders(door.outcome(key, 1, windows, true, true, 0, null, door.now()), reply)
    onExceeding(request, key)
  }
  Object.defineProperty(hook, DOOR, { value: door })
  return hook
}

/**
 * `await app.register(sluiceRateLimit, { store, max: 100, timeWindow: '1 minute' })`, before
 * the routes it limits. `global` (default true): every route, on one counter per key for
 * all of them; a route's `config: { rateLimit: { ... } }` gives it its own counter (shared
 * by the routes of one `groupId`), `config: { rateLimit: false }` exempts it.
 * `app.rateLimit(options)` makes a hook for places routes do not cover (a 404 handler),
 * `app.createRateLimit(options)` a check to call. `hook`: 'onRequest' (default), or a later
 * one when the key needs what runs before (authentication, the parsed body); per route too.
 */
async function sluiceRateLimit(fastify, settings) {
  const { global: globalOption, ...rest } = settings || {}
  // the peer's reading: anything but a boolean is true
  const global = typeof globalOption === 'boolean' ? globalOption : true
  const base = canonical(rest, 'options')
  // the peer merges the plugin's header flags over all-true once; a route's own object replaces them whole
  const draft = base.peer.enableDraftSpec === true
  Object.assign(base.peer, headerFlags(base.peer, draft))
  base.draft = draft
  const merge = (own, where) => {
    const c = canonical(own, where)
    return { options: { ...base.options, ...c.options }, peer: { ...base.peer, ...c.peer }, draft }
  }
  const ran = Symbol('sluice.rateLimitRan')
  fastify.decorateRequest(ran, false)
  const globalDoor = makeDoor(base)
  const globalHook = hookFor(globalDoor, base, ran)
  const groups = new Map() // groupId -> hook: one counter per group
  const property = globalDoor.config.requestPropertyName
  if (!fastify.hasRequestDecorator(property)) fastify.decorateRequest(property, null)
  if (!fastify.hasDecorator('rateLimit')) {
    fastify.decorate('rateLimit', (own = {}) => {
      const merged = merge(own, 'rateLimit options')
      return hookFor(makeDoor(merged), merged, ran)
    })
  }
  if (!fastify.hasDecorator('createRateLimit')) {
    fastify.decorate('createRateLimit', (own) =>
      own === undefined ? checkFor(globalDoor) : checkFor(makeDoor(merge(own, 'createRateLimit options'))),
    )
  }

  fastify.addHook('onRoute', (route) => {
    const own = route.config ? route.config.rateLimit : undefined
    if (own === false) return
    let hook
    let hookName = base.peer.hook ?? 'onRequest'
    if (own === undefined || own === null) {
      if (!global) return
      hook = globalHook
    } else {
      // a route's rateLimit is an object or false (the peer's message for anything else: route-rate-limit.test.js)
      if (typeof own !== 'object' || Array.isArray(own)) throw invalidConfig('Unknown value for route rate-limit configuration')
      const where = `config.rateLimit of ${route.url}`
      const merged = merge(own, where)
      const groupId = merged.peer.groupId
      hookName = merged.peer.hook ?? hookName
      if (groupId !== undefined && groups.has(groupId)) {
        hook = groups.get(groupId)
      } else {
        // a route's own counter: named by the route (or its group) unless it names it itself
        if (own.identifier === undefined) merged.options.identifier = routeIdentifier(route, groupId)
        hook = hookFor(makeDoor(merged), merged, ran)
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
module.exports.fastifyRateLimit = sluiceRateLimit
module.exports.normalizeIP = normalizeIP
module.exports.ipKeyGenerator = ipKey
