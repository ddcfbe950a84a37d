'use strict'
// The HTTP doors' decision path without HTTP: the sluice/express middleware, the sluice/fastify
// hook and (in a tree that has them) the sluice/hono and sluice/koa middlewares and the
// sluice/nestjs guard called with minimal request and response objects (a Hono context, a Koa
// context, a Nest ExecutionContext) on a MemoryStore, one
// request at a time, every request admitted (limit 1e9), the key from a header (one of 10,000
// clients at random). Measures the process's CPU per request (process.cpuUsage), so that a
// change of the door's code can be compared before and after on a shared, noisy machine where
// the HTTP suite (bench/doors.js) varies by more than the change.
//   node bench/doors-path.js [root of a sluice tree (default: this one)] [requests (200000)]
//   BENCH_DOORS=express,nestjs: only those doors, in that order
//   BENCH_DOORS_ALGORITHM=fixed: the doors' algorithm (default: the tree's own default)
//   BENCH_DOORS_REFUSED=1: a limit of 1, so after the warm-up every request is refused (the
//   refusal path: headers, the 429 answer, and the count of a refusal where the door keeps one)
//   BENCH_DOORS_REAL_RESPONSE=1: Hono's response a real Response (its Headers written by the door:
//   undici's Headers.set is the framework's cost), not a stand-in as Express's and Koa's are
// Prints one JSON line: { express, fastify, hono, koa, nestjs: ns per request (null: not in the tree) }.
const path = require('node:path')

const root = path.resolve(process.argv[2] || path.join(__dirname, '..'))
const N = Number(process.argv[3] || 200_000)
const CLIENTS = 10_000
/** A module of the tree at `root`: its path in lib/ as laid out now, else as before the layers (a tree to compare). */
const inTree = (now, before) => {
  const p = path.join(root, now)
  return require(require('node:fs').existsSync(p) ? p : path.join(root, before))
}
const { MemoryStore } = inTree('lib/entries/index.js', 'lib/index.js')
const { rateLimit } = inTree('lib/entries/express.js', 'lib/express.js')
const { DOOR } = inTree('lib/doors/http/door.js', 'lib/http/door.js')
const algorithm = process.env.BENCH_DOORS_ALGORITHM ? { algorithm: process.env.BENCH_DOORS_ALGORITHM } : {}
const REFUSED = process.env.BENCH_DOORS_REFUSED === '1'
const LIMIT = REFUSED ? 1 : 1e9

const keyGenerator = (req) => req.headers['x-client']
const clients = Array.from({ length: CLIENTS }, (_, i) => `client-${i}`)
let seed = 42
const next = () => {
  seed = (seed * 1103515245 + 12345) & 0x7fffffff
  return clients[seed % CLIENTS]
}

function response() {
  return {
    headersSent: false,
    statusCode: 200,
    setHeader() {},
    append() {},
    status() {
      return this
    },
    send() {},
    once() {},
  }
}

async function express() {
  const store = new MemoryStore()
  const mw = rateLimit({
    store,
    limit: LIMIT,
    windowMs: 60_000,
    standardHeaders: 'draft-7',
    legacyHeaders: false,
    keyGenerator,
    ...algorithm,
  })
  const res = response()
  const one = (client) =>
    new Promise((resolve, reject) => {
      res.send = resolve // a refusal ends with the handler's answer
      mw({ ip: '127.0.0.1', headers: { 'x-client': client } }, res, (err) => (err ? reject(err) : resolve()))
    })
  for (let i = 0; i < 20_000; i++) await one(next()) // warm up
  const start = process.cpuUsage()
  for (let i = 0; i < N; i++) await one(next())
  const used = process.cpuUsage(start)
  await store.close()
  return ((used.user + used.system) * 1000) / N
}

async function fastify() {
  const store = new MemoryStore()
  // the plugin's hook, as the plugin makes it for a route (no Fastify server: the hook alone)
  const hooks = []
  const app = {
    hasRequestDecorator: () => true,
    decorateRequest() {},
    hasDecorator: () => true,
    decorate() {},
    addHook: (_name, fn) => fn,
  }
  app.addHook = (_name, fn) => {
    const route = { url: '/', method: 'GET' }
    hooks.push({ fn, route })
  }
  await inTree('lib/entries/fastify.js', 'lib/fastify.js')(app, {
    store,
    max: LIMIT,
    timeWindow: 60_000,
    keyGenerator,
    ...algorithm,
  })
  const route = { url: '/', method: 'GET' }
  hooks[0].fn(route)
  const hook = route.onRequest[0]
  if (!hook[DOOR]) throw new Error('no door')
  const reply = { header() {}, raw: { once() {} }, code() {} }
  const one = (client) =>
    new Promise((resolve, reject) =>
      hook({ ip: '127.0.0.1', headers: { 'x-client': client } }, reply, (err) =>
        // a refusal is the peer's 429 error, handed to Fastify's error handler
        err && !(REFUSED && err.statusCode === 429) ? reject(err) : resolve(),
      ),
    )
  for (let i = 0; i < 20_000; i++) await one(next())
  const start = process.cpuUsage()
  for (let i = 0; i < N; i++) await one(next())
  const used = process.cpuUsage(start)
  await store.close()
  return ((used.user + used.system) * 1000) / N
}

/** `one(client)` timed over N requests after 20,000 of warm-up: CPU ns per request. */
async function timed(one) {
  for (let i = 0; i < 20_000; i++) await one(next())
  const start = process.cpuUsage()
  for (let i = 0; i < N; i++) await one(next())
  const used = process.cpuUsage(start)
  return ((used.user + used.system) * 1000) / N
}

const hasEntry = (name) => require('node:fs').existsSync(path.join(root, 'lib', 'entries', `${name}.js`))

async function hono() {
  if (!hasEntry('hono')) return null
  const store = new MemoryStore()
  const { rateLimiter } = inTree('lib/entries/hono.js', 'lib/entries/hono.js')
  const mw = rateLimiter({
    store,
    limit: LIMIT,
    windowMs: 60_000,
    standardHeaders: 'draft-7',
    legacyHeaders: false,
    keyGenerator: (c) => c.req.header('x-client'),
    ...algorithm,
  })
  // the handler's response, as Hono holds it (c.res): the door writes its headers into it
  const res =
    process.env.BENCH_DOORS_REAL_RESPONSE === '1'
      ? new Response('ok')
      : { status: 200, headers: { set() {}, append() {} } }
  const context = (client) => ({
    env: undefined,
    req: { header: () => client, raw: null },
    res,
    set() {},
  })
  const ns = await timed((client) => mw(context(client), async () => {}))
  await store.close()
  return ns
}

async function koa() {
  if (!hasEntry('koa')) return null
  const store = new MemoryStore()
  const { rateLimit: koaLimit } = inTree('lib/entries/koa.js', 'lib/entries/koa.js')
  const mw = koaLimit({
    store,
    limit: LIMIT,
    windowMs: 60_000,
    standardHeaders: 'draft-7',
    legacyHeaders: false,
    id: (ctx) => ctx.client,
    ...algorithm,
  })
  const res = { once() {}, statusCode: 200 }
  const context = (client) => ({
    client,
    ip: '127.0.0.1',
    state: {},
    res,
    set() {},
    append() {},
    get: () => client,
    response: { get() {} },
    status: 200,
    body: null,
  })
  const ns = await timed((client) => mw(context(client), async () => {}))
  await store.close()
  return ns
}

async function nestjs() {
  if (!hasEntry('nestjs')) return null
  require('reflect-metadata')
  const store = new MemoryStore()
  const { RateLimit, SluiceGuard, SluiceRateLimits } = inTree('lib/entries/nestjs.js', 'lib/entries/nestjs.js')
  // a controller's route with @RateLimit, decided by the guard as Nest calls it (no Nest app:
  // the guard alone, with an ExecutionContext of the Express platform's objects)
  class Controller {
    route() {}
  }
  const descriptor = Object.getOwnPropertyDescriptor(Controller.prototype, 'route')
  RateLimit({
    limit: LIMIT,
    windowMs: 60_000,
    standardHeaders: 'draft-7',
    legacyHeaders: false,
    keyGenerator,
    ...algorithm,
  })(Controller.prototype, 'route', descriptor)
  const guard = new SluiceGuard(new SluiceRateLimits(store, null, false))
  const res = response()
  let req = null
  const http = { getRequest: () => req, getResponse: () => res }
  const context = { getClass: () => Controller, getHandler: () => descriptor.value, switchToHttp: () => http }
  const ns = await timed((client) => {
    req = { ip: '127.0.0.1', headers: { 'x-client': client } }
    return guard.canActivate(context).catch((err) => {
      if (!(REFUSED && err.getStatus?.() === 429)) throw err
    })
  })
  await store.close()
  return ns
}

const DOORS = { express, fastify, hono, koa, nestjs }
;(async () => {
  // BENCH_DOORS=nestjs,express: those doors only, in that order (a later door in one process
  // runs with the earlier ones' garbage: alternate the order between rounds)
  const names = process.env.BENCH_DOORS ? process.env.BENCH_DOORS.split(',') : Object.keys(DOORS)
  const out = { root, algorithm: algorithm.algorithm ?? 'default', refused: REFUSED }
  for (const name of names) {
    const ns = await DOORS[name]()
    out[name] = ns === null ? null : Math.round(ns)
  }
  console.log(JSON.stringify(out))
})().catch((err) => {
  console.error(err)
  process.exit(1)
})
