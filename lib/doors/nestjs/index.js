// @ts-check
'use strict'

// sluice/nestjs: rate limits for NestJS 11 and 12 apps, on the Express and Fastify platforms.
// `SluiceModule.forRoot({ store, defaults })` gives the app one SluiceRateLimits (the store and
// the doors of its routes); `SluiceGuard` (global through APP_GUARD, or `@UseGuards`) decides each
// request of a route with the HTTP doors' machinery (lib/doors/http/): their options, headers,
// keys, refusals and whenDown. `@RateLimit(options)` on a handler or a controller sets a route's
// limits (over the module's `defaults`), `@SkipRateLimit()` exempts it. A refusal is thrown as a
// SluiceRateLimitException (an HttpException of status 429), so the app's exception filters
// answer it. For @nestjs/throttler users, lib/doors/nestjs/throttler-storage.js.

const common = require('@nestjs/common')
const { Door } = require('../http/door')
const { doorConfig } = require('../http/options')
const { onNodeEnd } = require('../http/node-http')
const { refusalBody } = require('../http/respond')
const { MemoryStore, RedisStore } = require('../../store')
const { invalidConfig, knownOptions } = require('../../base/errors')
const { SluiceThrottlerStorage } = require('./throttler-storage')

/** express-rate-limit's defaults, as the other HTTP doors: 5 requests a minute per client. */
const DEFAULTS = { limit: 5, windowMs: 60_000, message: 'Too many requests, please try again later.' }
/** Where @RateLimit and @SkipRateLimit keep their options on a handler or a class. */
const RATE_LIMIT = 'sluice:rate-limit'
const SKIP = 'sluice:skip-rate-limit'
/** The injection token of the module's options. */
const SLUICE_OPTIONS = Symbol.for('sluice.nestjs.options')
const MODULE_OPTIONS = ['store', 'defaults']
const ASYNC_OPTIONS = ['imports', 'useFactory', 'inject']

const isObject = (v) => v !== null && typeof v === 'object' && !Array.isArray(v)
const isStore = (s) => s instanceof MemoryStore || s instanceof RedisStore

/**
 * A refusal: an HttpException (status 429, or the door's `statusCode`; 503 when refused for want
 * of Redis), whose response is the door's `message` or what `handler(req, res)` answered. The
 * door's headers (Retry-After among them) are already on the response.
 */
class SluiceRateLimitException extends common.HttpException {
  /**
   * @param {unknown} body the response (`message`, or what `handler` answered)
   * @param {number} status
   * @param {number} [retryAfterMs] when a request may be admitted again
   */
  constructor(body, status, retryAfterMs) {
    super(body === undefined || body === null ? DEFAULTS.message : body, status)
    /**
     * What a GraphQL server shows of the refusal (graphql-js copies an error's `extensions`):
     * `code` 'RATE_LIMITED', the status, and the seconds to wait when known.
     */
    this.extensions = {
      code: 'RATE_LIMITED',
      status,
      ...(retryAfterMs === undefined ? {} : { retryAfterSeconds: Math.ceil(retryAfterMs / 1000) }),
    }
  }
}

/**
 * How the door reaches a request and a response of either platform (lib/doors/http/adapter.d.ts
 * `HttpAccess`): Express's `res` (Node's ServerResponse), Fastify's reply (`reply.header`,
 * `reply.raw`); a context without a response (a WebSocket gateway, GraphQL without one) gets no
 * headers. A refusal is thrown, never written here.
 * @type {import('../http/adapter').HttpAccess<any, any>}
 */
const ACCESS = {
  clientAddress: (req) => req?.ip ?? req?.socket?.remoteAddress ?? undefined,
  setInfo: (req, name, info) => {
    if (req !== null && typeof req === 'object') req[name] = info
  },
  setHeader: (res, name, value, append) => {
    if (res === null || typeof res !== 'object') return
    if (typeof res.setHeader === 'function') {
      // Express (res.append) or Node's ServerResponse
      if (append && typeof res.append === 'function') res.append(name, value)
      else if (append && typeof res.appendHeader === 'function') res.appendHeader(name, value)
      else res.setHeader(name, value)
    } else if (typeof res.header === 'function') {
      // Fastify: reply.header appends only set-cookie, so a list field is joined here
      const had = append && typeof res.getHeader === 'function' ? res.getHeader(name) : undefined
      res.header(name, had === undefined ? value : `${had}, ${value}`)
    }
  },
  refuse: (_res, status, body) => {
    throw new SluiceRateLimitException(body, status)
  },
  onEnd: (res, listener) => {
    const node = res?.raw ?? res
    if (node !== null && typeof node === 'object' && typeof node.once === 'function') onNodeEnd(node, listener)
  },
}

/** @RateLimit's options: one object or a non-empty array of them. */
function decorated(options) {
  const list = Array.isArray(options) ? options : [options]
  if (list.length === 0) throw invalidConfig('@RateLimit needs options: an object, or an array of them')
  list.forEach((o, i) => {
    if (!isObject(o)) throw invalidConfig(`@RateLimit options${Array.isArray(options) ? `[${i}]` : ''} must be an object`)
    if (o.store !== undefined) throw invalidConfig('@RateLimit takes no store: the store is SluiceModule.forRoot({ store })')
  })
  return Object.freeze(list.map((o) => Object.freeze({ ...o })))
}

/**
 * `@RateLimit({ limit: 10, windowMs: 1000 })` on a handler or a controller (a handler's own
 * limits replace its controller's): the HTTP doors' options (lib/doors/http/types.d.ts
 * DoorOptions) over the module's `defaults`, the store left out. Several: every one must admit.
 * Several windows of one key (options that differ only in `limit` and `windowMs`) are one door
 * of several windows (one script call, all or nothing); several keys are decided together (one
 * batch), and what one admitted is given back when another refuses. Each route counts on
 * counters of its own, unless its options give an `identifier` (routes of one identifier share).
 * @param {any} options
 */
function RateLimit(options) {
  const list = decorated(options)
  // checked once the module knows its store and defaults too (at bootstrap: see SluiceRateLimits)
  return common.SetMetadata(RATE_LIMIT, list)
}

/** `@SkipRateLimit()` on a handler or a controller: its requests are not rate limited. `false` on a handler undoes its controller's. */
function SkipRateLimit(skip = true) {
  if (typeof skip !== 'boolean') throw invalidConfig('@SkipRateLimit takes a boolean')
  return common.SetMetadata(SKIP, skip)
}

/** A handler's own metadata `key`, else its controller's. */
function metadataOf(key, handler, cls) {
  const own = Reflect.getMetadata(key, handler)
  return own !== undefined ? own : Reflect.getMetadata(key, cls)
}

/** `a` and `b` alike but for their windows: every other option the same value. */
function sameKey(a, b) {
  const names = new Set([...Object.keys(a), ...Object.keys(b)])
  names.delete('limit')
  names.delete('windowMs')
  for (const name of names) if (a[name] !== b[name]) return false
  return true
}

/** A fixed window given as `limit` and `windowMs` (not functions, not `limits`). */
const oneWindow = (o) =>
  typeof o.limit === 'number' && typeof o.windowMs === 'number' && o.limits === undefined && o.limiter === undefined

/**
 * The doors' options of a route: @RateLimit's list over the defaults, the windows of one key
 * folded into one door of several windows.
 */
function routeOptions(list, defaults) {
  const merged = list.map((o) => ({ ...defaults, ...o }))
  /** @type {any[]} */
  const out = []
  for (const o of merged) {
    const into = oneWindow(o) ? out.find((p) => p.windows !== undefined && sameKey(p.first, o)) : undefined
    if (into !== undefined) into.windows.push({ limit: o.limit, windowMs: o.windowMs })
    else out.push(oneWindow(o) ? { first: o, windows: [{ limit: o.limit, windowMs: o.windowMs }] } : { first: o })
  }
  return out.map(({ first, windows }) => {
    if (windows === undefined || windows.length === 1) return first
    const { limit: _l, windowMs: _w, ...rest } = first
    return { ...rest, limits: windows }
  })
}

/**
 * The rate limits of an app: its store (`owned`: made by the module, closed when the app
 * closes; a store given is left to its owner), the defaults, and the doors of each route, made
 * once (at bootstrap for the routes of the app's controllers, so bad options fail `app.init()`).
 */
class SluiceRateLimits {
  constructor(store, defaults, owned) {
    this.store = store
    this.defaults = defaults
    this.owned = owned
    /** controller -> handler -> its doors ([]: not limited); bounded by the app's code */
    this._routes = new Map()
  }

  /**
   * The doors of `handler` of controller `cls`: @RateLimit's (the handler's own, else its
   * controller's) over the defaults; the defaults alone when neither has any (none when the
   * module has no defaults); [] when @SkipRateLimit says so.
   * @returns {Door[]}
   */
  doorsOf(cls, handler) {
    // by controller too: a handler a subclass inherits is a route of its own there
    let routes = this._routes.get(cls)
    if (routes === undefined) this._routes.set(cls, (routes = new Map()))
    let doors = routes.get(handler)
    if (doors === undefined) {
      doors = this._make(cls, handler)
      routes.set(handler, doors)
    }
    return doors
  }

  _make(cls, handler) {
    if (metadataOf(SKIP, handler, cls) === true) return []
    const list = metadataOf(RATE_LIMIT, handler, cls) ?? (this.defaults === null ? null : [{}])
    if (list === null) return []
    const options = routeOptions(list, this.defaults ?? {})
    const route = `${cls?.name ?? ''}.${handler?.name ?? ''}`
    const several = options.length > 1
    return options.map((o) => {
      const config = doorConfig({ ...o, store: this.store }, { defaults: DEFAULTS, access: ACCESS })
      if (several) {
        // several keys: what one door admitted is given back when another refuses
        if (config.limiter || config.algorithm === null || !['fixed', 'window', 'leaky'].includes(config.algorithm)) {
          throw invalidConfig(
            `@RateLimit of several keys (${route}) gives back what one admitted when another refuses: ` +
              `algorithm 'fixed', 'window' or 'leaky' only`,
          )
        }
        config.refunds = true
      }
      // each route its own counters, unless an identifier names them
      if (config.identifier === null && config.counter !== undefined) config.counter = `${config.counter} ${route}`
      return new Door(config)
    })
  }

  /**
   * Makes the doors of every route of `classes`: bad options throw here. `marked`: only the
   * methods with a @RateLimit of their own or of their class (a GraphQL resolver among the
   * app's providers); else every method (a controller's routes, the defaults among them).
   */
  prepare(classes, marked = false) {
    for (const cls of classes) {
      const proto = typeof cls === 'function' ? cls.prototype : undefined
      if (!proto) continue
      const classMarked = Reflect.getMetadata(RATE_LIMIT, cls) !== undefined
      // its own methods and those it inherits (a subclass's routes)
      const seen = new Set()
      for (let p = proto; p !== null && p !== Object.prototype; p = Object.getPrototypeOf(p)) {
        for (const name of Object.getOwnPropertyNames(p)) {
          if (name === 'constructor' || seen.has(name)) continue
          seen.add(name)
          const d = Object.getOwnPropertyDescriptor(p, name)
          if (d === undefined || typeof d.value !== 'function') continue
          if (marked && !classMarked && Reflect.getMetadata(RATE_LIMIT, d.value) === undefined) continue
          this.doorsOf(cls, d.value)
        }
      }
    }
  }

  /** Closes the store the module made (a store given is its owner's to close). */
  async onApplicationShutdown() {
    if (this.owned) await this.store.close()
  }
}

/** The module's options, checked: `{ store, defaults }` with `store` a Store or a function making one. */
function moduleOptions(options) {
  if (!isObject(options)) throw invalidConfig('SluiceModule options must be an object { store, defaults }')
  knownOptions(options, MODULE_OPTIONS, 'SluiceModule')
  const { store, defaults } = options
  if (!isStore(store) && typeof store !== 'function') {
    throw invalidConfig('store must be a sluice MemoryStore or RedisStore, or a function that makes one')
  }
  if (defaults !== undefined) {
    if (!isObject(defaults)) throw invalidConfig('defaults must be an object: the HTTP doors options')
    if (defaults.store !== undefined) throw invalidConfig('defaults takes no store: give it as SluiceModule({ store })')
    // checked now, on a store of their own when the store is still to be made
    doorConfig({ ...defaults, store: isStore(store) ? store : placeholder() }, { defaults: DEFAULTS, access: ACCESS })
  }
  return options
}

/** @type {MemoryStore | null} */
let checking = null
/** A store to check options against before the app's exists (never decides anything). */
function placeholder() {
  checking ??= new MemoryStore({ stats: false })
  return checking
}

/** The app's SluiceRateLimits from the module's options: the store made when given as a function. */
async function rateLimitsOf(options, discovery) {
  const o = moduleOptions(options)
  const owned = typeof o.store === 'function'
  const store = owned ? await o.store() : o.store
  if (!isStore(store)) throw invalidConfig('the store function must return a sluice MemoryStore or RedisStore')
  const limits = new SluiceRateLimits(store, o.defaults ?? null, owned)
  try {
    limits.prepare(discovery.getControllers().map((w) => w.metatype))
    // resolvers and other providers with a @RateLimit (GraphQL)
    limits.prepare(
      discovery.getProviders().map((w) => w.metatype),
      true,
    )
  } catch (err) {
    if (owned) await store.close()
    throw err
  }
  return limits
}

/**
 * The guard: each request of a limited route decided by its doors (one round trip, batched with
 * the requests of the same moment), `req.rateLimit` and the headers set, a refusal thrown as a
 * SluiceRateLimitException. Skipped requests (`skip`), and store failures the doors let through
 * (`passOnStoreError`, whenDown), go on. Override `getRequest` / `getResponse` for GraphQL or
 * WebSocket contexts.
 */
class SluiceGuard {
  /** @param {SluiceRateLimits} limits */
  constructor(limits) {
    this.limits = limits
  }

  /** The request of `context` (HTTP; override for GraphQL, WebSockets). */
  getRequest(context) {
    return context.switchToHttp().getRequest()
  }

  /** The response of `context` (HTTP; override for GraphQL; none for WebSockets). */
  getResponse(context) {
    return context.switchToHttp().getResponse()
  }

  /** True (or a promise of it) to go on; a refusal rejects with a SluiceRateLimitException. */
  canActivate(context) {
    const doors = this.limits.doorsOf(context.getClass(), context.getHandler())
    if (doors.length === 0) return true
    const req = this.getRequest(context)
    const res = this.getResponse(context)
    if (doors.length === 1) return admitOne(doors[0], req, res)
    return admitAll(doors, req, res)
  }
}

/**
 * One door's decision of a request: a promise of true to go on, rejected with the refusal.
 * (Promise callbacks, not an async function: the common path, one door, kept as short as the
 * Express door's.)
 */
function admitOne(door, req, res) {
  return door.decide(req, res).then(
    (o) => {
      if (o === null) return true
      door.attach(o, req)
      door.writeHeaders(o, res)
      door.settleAfter(o, req, res)
      return o.allowed ? true : refuse(door, o, req, res)
    },
    (err) => {
      if (door.passes(err)) return true
      throw err
    },
  )
}

/**
 * Several doors (several keys) deciding one request together: their calls go in the same
 * batch; all must admit. When one refuses (or fails), what the others admitted is given back.
 */
async function admitAll(doors, req, res) {
  const settled = await Promise.allSettled(doors.map((door) => door.decide(req, res)))
  const outcomes = settled.map((s, i) => {
    if (s.status === 'fulfilled') return s.value
    if (doors[i].passes(s.reason)) return null
    return s
  })
  const failed = outcomes.find((o) => o !== null && o.status === 'rejected')
  const refused = outcomes.findIndex((o) => o !== null && o.status === undefined && !o.allowed)
  if (failed !== undefined || refused >= 0) {
    for (const o of outcomes) {
      if (o !== null && o.status === undefined && o.allowed && o.refund !== null) o.refund().catch(() => {})
    }
    if (failed !== undefined) throw failed.reason
  }
  outcomes.forEach((o, i) => {
    if (o === null) return
    doors[i].attach(o, req)
    doors[i].writeHeaders(o, res)
  })
  if (refused >= 0) await refuse(doors[refused], outcomes[refused], req, res)
  outcomes.forEach((o, i) => {
    if (o !== null && o.status === undefined) doors[i].settleAfter(o, req, res)
  })
  return true
}

/** Throws the refusal of outcome `o`: `handler`'s answer (an HttpException is thrown as it is) or `message`. */
async function refuse(door, o, req, res) {
  const body = await refusalBody(door, req, res)
  if (body instanceof common.HttpException) throw body
  throw new SluiceRateLimitException(body, door.status(o), o.retryAfterMs)
}

/**
 * The module: `SluiceModule.forRoot({ store, defaults })` or `forRootAsync({ imports,
 * useFactory, inject })` once, in the app's root module (it is global). It provides
 * SluiceRateLimits and SluiceGuard; the guard goes global with `{ provide: APP_GUARD, useClass:
 * SluiceGuard }`, or on a controller with `@UseGuards(SluiceGuard)`.
 */
class SluiceModule {
  /** @param {any} options `{ store: Store | (() => Store | Promise<Store>), defaults?: DoorOptions }` */
  static forRoot(options) {
    moduleOptions(options)
    return dynamicModule([], { provide: SLUICE_OPTIONS, useValue: options })
  }

  /** @param {any} options `{ imports?, useFactory: (...deps) => options | Promise<options>, inject? }` */
  static forRootAsync(options) {
    if (!isObject(options)) throw invalidConfig('SluiceModule.forRootAsync options must be an object { useFactory }')
    knownOptions(options, ASYNC_OPTIONS, 'SluiceModule.forRootAsync')
    if (typeof options.useFactory !== 'function') throw invalidConfig('forRootAsync needs useFactory: a function')
    for (const name of ['imports', 'inject']) {
      if (options[name] !== undefined && !Array.isArray(options[name])) throw invalidConfig(`${name} must be an array`)
    }
    const provider = { provide: SLUICE_OPTIONS, useFactory: options.useFactory, inject: options.inject ?? [] }
    return dynamicModule(options.imports ?? [], provider)
  }
}

/** The module's providers over its options' provider. */
function dynamicModule(imports, optionsProvider) {
  const { DiscoveryModule, DiscoveryService } = require('@nestjs/core')
  return {
    module: SluiceModule,
    global: true,
    imports: [...imports, DiscoveryModule],
    providers: [
      optionsProvider,
      { provide: SluiceRateLimits, useFactory: rateLimitsOf, inject: [SLUICE_OPTIONS, DiscoveryService] },
      SluiceGuard,
    ],
    exports: [SluiceRateLimits, SluiceGuard],
  }
}

// what Nest reads of these classes: injectable, the guard's constructor gets the app's SluiceRateLimits
common.Injectable()(SluiceGuard)
common.Inject(SluiceRateLimits)(SluiceGuard, undefined, 0)
common.Module({})(SluiceModule)

module.exports = {
  SluiceModule,
  SluiceGuard,
  SluiceRateLimits,
  SluiceRateLimitException,
  SluiceThrottlerStorage,
  RateLimit,
  SkipRateLimit,
  SLUICE_OPTIONS,
}
