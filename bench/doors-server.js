'use strict'
// The HTTP doors suite's server: an Express 5, Fastify 5, Hono 4 (@hono/node-server), Koa 3 or
// NestJS 12 (Express platform) app with one route, `GET /`
// answering a 2-byte body, behind one rate limiter (or none), the limiter's key read from the
// `x-client` request header. argv[2] = JSON { framework: 'express' | 'fastify', impl: 'none' |
// 'sluice' | 'peer', url, prefix, limit, windowMs, localDenyCache }: 'peer' is each framework's
// usual Redis-backed limiter, on ioredis: express-rate-limit + rate-limit-redis (Express),
// @fastify/rate-limit (Fastify), hono-rate-limiter's RedisStore (Hono), koa-ratelimit (Koa),
// @nestjs/throttler + @nest-lab/throttler-storage-redis (NestJS). Tells the parent its port over IPC; between 'start' and 'stop' it counts the
// requests it handled and its own CPU (and, for sluice, native calls and local denials).
const cfg = JSON.parse(process.argv[2])

// the key of a request: the client id the load process put in a header (every variant, the
// peers included, reads the same header, so they all limit the same keys)
const keyGenerator = (req) => req.headers['x-client'] || 'anonymous'
// BENCH_DOORS_ALGORITHM: the sluice doors' algorithm (default: the doors' own, 'window' since
// issue 29, 'fixed' before), to compare one decision path before and after a change
// (the hot-key variants give 'fixed' in their config: calendar seconds)
const chosen = cfg.algorithm || process.env.BENCH_DOORS_ALGORITHM
const algorithm = chosen ? { algorithm: chosen } : {}

async function sluiceStore() {
  const { RedisStore } = require('../lib/entries/index.js')
  const options = { url: cfg.url, keyPrefix: cfg.prefix }
  if (cfg.localDenyCache) options.localDenyCache = true
  return RedisStore.connect(options)
}

async function expressApp() {
  const express = require('express')
  const app = express()
  let close = () => {}
  let store = null
  if (cfg.impl === 'sluice') {
    const { rateLimit } = require('../lib/entries/express.js')
    store = await sluiceStore()
    app.use(
      rateLimit({
        store,
        limit: cfg.limit,
        windowMs: cfg.windowMs,
        standardHeaders: 'draft-7',
        legacyHeaders: false,
        keyGenerator,
        ...algorithm,
      }),
    )
    close = () => store.close()
  } else if (cfg.impl === 'peer') {
    const { rateLimit } = require('express-rate-limit')
    const { RedisStore } = require('rate-limit-redis')
    const Redis = require('ioredis')
    const client = new Redis(cfg.url)
    app.use(
      rateLimit({
        store: new RedisStore({ sendCommand: (...args) => client.call(...args), prefix: `${cfg.prefix}:` }),
        limit: cfg.limit,
        windowMs: cfg.windowMs,
        standardHeaders: 'draft-7',
        legacyHeaders: false,
        keyGenerator,
      }),
    )
    close = () => client.quit()
  }
  app.get('/', (req, res) => {
    res.send('ok')
  })
  const listen = () =>
    new Promise((resolve, reject) => {
      const server = app.listen(0, '127.0.0.1', (err) => (err ? reject(err) : resolve(server)))
    })
  return { listen, close, store }
}

async function fastifyApp() {
  const app = require('fastify')({ logger: false })
  let close = () => {}
  let store = null
  if (cfg.impl === 'sluice') {
    store = await sluiceStore()
    await app.register(require('../lib/entries/fastify.js'), {
      store,
      max: cfg.limit,
      timeWindow: cfg.windowMs,
      keyGenerator,
      ...algorithm,
    })
    close = () => store.close()
  } else if (cfg.impl === 'peer') {
    const Redis = require('ioredis')
    const client = new Redis(cfg.url)
    await app.register(require('@fastify/rate-limit'), {
      redis: client,
      max: cfg.limit,
      timeWindow: cfg.windowMs,
      nameSpace: `${cfg.prefix}:`,
      keyGenerator,
    })
    close = () => client.quit()
  }
  app.get('/', async () => 'ok')
  await app.ready()
  return {
    listen: () => app.listen({ port: 0, host: '127.0.0.1' }).then(() => app.server),
    close: async () => {
      await app.close()
      await close()
    },
    store,
  }
}

/** An http.Server listening on loopback for `handler`. */
function nodeListen(handler) {
  const server = require('node:http').createServer(handler)
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(server)))
}

/** ioredis as hono-rate-limiter's RedisStore asks for a client (scriptLoad, evalsha, decr, del). */
function honoRedisClient(client) {
  return {
    scriptLoad: (script) => client.script('LOAD', script),
    evalsha: (sha, keys, args) => client.evalsha(sha, keys.length, ...keys, ...args),
    decr: (key) => client.decr(key),
    del: (key) => client.del(key),
  }
}

async function honoApp() {
  const { Hono } = require('hono')
  const { getRequestListener } = require('@hono/node-server')
  const app = new Hono()
  let close = () => {}
  let store = null
  const honoKey = (c) => c.req.header('x-client') || 'anonymous'
  if (cfg.impl === 'sluice') {
    const { rateLimiter } = require('../lib/entries/hono.js')
    store = await sluiceStore()
    const options = {
      store,
      limit: cfg.limit,
      windowMs: cfg.windowMs,
      standardHeaders: 'draft-7',
      legacyHeaders: false,
    }
    app.use(rateLimiter({ ...options, keyGenerator: honoKey, ...algorithm }))
    close = () => store.close()
  } else if (cfg.impl === 'peer') {
    const { rateLimiter, RedisStore } = require('hono-rate-limiter')
    const Redis = require('ioredis')
    const client = new Redis(cfg.url)
    const redisStore = new RedisStore({ client: honoRedisClient(client), prefix: `${cfg.prefix}:` })
    app.use(
      rateLimiter({
        store: redisStore,
        limit: cfg.limit,
        windowMs: cfg.windowMs,
        standardHeaders: 'draft-7',
        keyGenerator: honoKey,
      }),
    )
    close = () => client.quit()
  }
  app.get('/', (c) => c.text('ok'))
  return { listen: () => nodeListen(getRequestListener(app.fetch)), close, store }
}

async function koaApp() {
  const Koa = require('koa')
  const app = new Koa()
  let close = () => {}
  let store = null
  if (cfg.impl === 'sluice') {
    const { rateLimit } = require('../lib/entries/koa.js')
    store = await sluiceStore()
    app.use(
      rateLimit({
        store,
        limit: cfg.limit,
        windowMs: cfg.windowMs,
        standardHeaders: 'draft-7',
        legacyHeaders: false,
        keyGenerator: (ctx) => ctx.get('x-client') || 'anonymous',
        ...algorithm,
      }),
    )
    close = () => store.close()
  } else if (cfg.impl === 'peer') {
    const ratelimit = require('koa-ratelimit')
    const Redis = require('ioredis')
    const client = new Redis(cfg.url)
    app.use(
      ratelimit({
        driver: 'redis',
        db: client,
        duration: cfg.windowMs,
        max: cfg.limit,
        namespace: cfg.prefix,
        id: (ctx) => ctx.get('x-client') || 'anonymous',
      }),
    )
    close = () => client.quit()
  }
  app.use((ctx) => {
    ctx.body = 'ok'
  })
  return { listen: () => nodeListen(app.callback()), close, store }
}

/** A NestJS 12 app (the Express platform), one controller of one route, behind SluiceGuard, @nestjs/throttler on @nest-lab/throttler-storage-redis, or nothing. */
async function nestApp() {
  require('reflect-metadata')
  const common = require('@nestjs/common')
  const { NestFactory, APP_GUARD } = require('@nestjs/core')
  class AppController {
    root() {
      return 'ok'
    }
  }
  const route = Object.getOwnPropertyDescriptor(AppController.prototype, 'root')
  common.Get()(AppController.prototype, 'root', route)
  common.Controller()(AppController)
  const imports = []
  const providers = []
  let close = () => {}
  let store = null
  if (cfg.impl === 'sluice') {
    const { SluiceModule, SluiceGuard } = require('../lib/entries/nestjs.js')
    store = await sluiceStore()
    const defaults = {
      limit: cfg.limit,
      windowMs: cfg.windowMs,
      standardHeaders: 'draft-7',
      legacyHeaders: false,
      keyGenerator,
      ...algorithm,
    }
    imports.push(SluiceModule.forRoot({ store, defaults }))
    providers.push({ provide: APP_GUARD, useClass: SluiceGuard })
    close = () => store.close()
  } else if (cfg.impl === 'peer') {
    const { ThrottlerModule, ThrottlerGuard } = require('@nestjs/throttler')
    const { ThrottlerStorageRedisService } = require('@nest-lab/throttler-storage-redis')
    const Redis = require('ioredis')
    const client = new Redis(cfg.url, { keyPrefix: `${cfg.prefix}:` })
    class KeyedGuard extends ThrottlerGuard {
      async getTracker(req) {
        return keyGenerator(req)
      }
    }
    common.Injectable()(KeyedGuard)
    imports.push(
      ThrottlerModule.forRoot({
        throttlers: [{ limit: cfg.limit, ttl: cfg.windowMs }],
        storage: new ThrottlerStorageRedisService(client),
      }),
    )
    providers.push({ provide: APP_GUARD, useClass: KeyedGuard })
    close = () => client.quit()
  }
  class AppModule {}
  common.Module({ imports, controllers: [AppController], providers })(AppModule)
  const app = await NestFactory.create(AppModule, { logger: false })
  await app.init()
  return {
    listen: async () => {
      await app.listen(0, '127.0.0.1')
      return app.getHttpServer()
    },
    close: async () => {
      await app.close()
      await close()
    },
    store,
  }
}

const APPS = { express: expressApp, fastify: fastifyApp, hono: honoApp, koa: koaApp, nestjs: nestApp }

async function main() {
  const { listen, close, store } = await APPS[cfg.framework]()
  const server = await listen()
  // counts the requests handled in the measured window (a listener after the app's own)
  let requests = 0
  server.on('request', () => requests++)
  let cpu0, requests0, batches0, denials0
  process.on('message', async (msg) => {
    if (msg === 'start') {
      cpu0 = process.cpuUsage()
      requests0 = requests
      batches0 = store ? store.batching.batches : NaN
      denials0 = store ? store.localDenials : NaN
    } else if (msg === 'stop') {
      const cpu = process.cpuUsage(cpu0)
      const report = {
        handled: requests - requests0,
        cpuUs: cpu.user + cpu.system,
        // IPC carries NaN as null: no sluice store here
        nativeCalls: store ? store.batching.batches - batches0 : NaN,
        localDenials: store ? store.localDenials - denials0 : NaN,
      }
      server.closeAllConnections()
      // the decisions still in flight settle before the store closes (else they fail, and
      // Express logs the errors)
      await new Promise((resolve) => setTimeout(resolve, 250))
      await Promise.resolve()
        .then(close)
        .catch(() => {})
      process.send(report, () => process.exit(0))
    }
  })
  process.send({ port: server.address().port })
}

main().catch((err) => {
  console.error(err)
  process.exit(1)
})
