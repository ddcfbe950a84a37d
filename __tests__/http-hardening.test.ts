// Issue 24, the HTTP doors' part: keys of any size cost bounded memory and CPU and reach
// Redis hashed past 64 bytes; a key over 1 MiB fails its request through the framework's
// error path; no key (a pacer's, a limiter's name) is ever shown in a header; the one-window
// doors count statistics; counter names are read one way only; two doors naming their
// counters alike with different options warn once.
import { execFileSync } from 'node:child_process'
import { createHash } from 'node:crypto'
import http from 'node:http'
import { createRequire } from 'node:module'
import type { AddressInfo } from 'node:net'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import express5 from 'express'
import express4 from 'express4'
import Fastify from 'fastify'
import {
  BucketLimiter,
  DistributedPacer,
  LeakyLimiter,
  ManualClock,
  MemoryStore,
  PacerComposite,
  SlidingWindowLimiter,
  WindowLimiter,
  type Store,
} from '../lib/entries/index.js'
import { rateLimit } from '../lib/entries/express.js'
import sluiceFastify from '../lib/entries/fastify.js'
import { freshPrefix, keysUnder, makeStore, rawClient, REDIS_KINDS } from './helpers/stores.js'

const internal = createRequire(__filename)
const { Door, DOOR } = internal('../lib/doors/http/door.js') as { Door: any; DOOR: symbol }
const { doorConfig } = internal('../lib/doors/http/options.js') as { doorConfig: (options: object) => any }
const { keyId, escapeName } = internal('../lib/doors/http/key.js') as {
  keyId: (key: string) => string
  escapeName: (text: string) => string
}

const T0 = 1_800_000_000_000
const MiB = 1024 * 1024
const FRAMEWORKS = ['express5', 'express4', 'fastify'] as const
type Framework = (typeof FRAMEWORKS)[number]

interface App {
  url: string
  /** the door of the (global) limit */
  door: () => any
  close: () => Promise<void>
}

/**
 * An app limited by `options` whose key is read from the JSON body (POST /) or the query
 * (GET /): the framework's error handler answers 500 with the error's code.
 */
async function serve(framework: Framework, options: any): Promise<App> {
  if (framework === 'fastify') {
    const app = Fastify({ bodyLimit: 4 * MiB })
    app.setErrorHandler((err: any, _req: any, reply: any) => {
      // a refusal comes as an error with its status (@fastify/rate-limit's errorResponseBuilder)
      if (err.statusCode >= 400 && err.statusCode < 500) return reply.code(err.statusCode).send(err)
      reply.code(500).send({ code: err.code, message: err.message })
    })
    let hooks: any[] = []
    await app.register(sluiceFastify as any, { hook: 'preHandler', ...options })
    app.addHook('onRoute', (route: any) => {
      if (route.url === '/') hooks = [].concat(route.preHandler ?? [])
    })
    app.post('/', async (req: any) => ({ remaining: req.rateLimit?.remaining }))
    app.get('/', async (req: any) => ({ remaining: req.rateLimit?.remaining }))
    await app.listen({ port: 0, host: '127.0.0.1' })
    const { port } = app.server.address() as AddressInfo
    return {
      url: `http://127.0.0.1:${port}`,
      door: () => hooks.map((h) => h[DOOR]).find(Boolean),
      close: () => app.close(),
    }
  }
  const express: any = framework === 'express4' ? express4 : express5
  const app = express()
  app.use(express.json({ limit: '4mb' }))
  const middleware: any = rateLimit(options)
  app.use(middleware)
  app.post('/', (req: any, res: any) => res.json({ remaining: req.rateLimit?.remaining }))
  app.get('/', (req: any, res: any) => res.json({ remaining: req.rateLimit?.remaining }))
  app.use((err: any, _req: any, res: any, _next: any) => res.status(500).json({ code: err.code, message: err.message }))
  const server: http.Server = await new Promise((resolve) => {
    const s = app.listen(0, '127.0.0.1', () => resolve(s))
  })
  const { port } = server.address() as AddressInfo
  return {
    url: `http://127.0.0.1:${port}`,
    door: () => middleware[DOOR],
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections()
        server.close(() => resolve())
      }),
  }
}

interface Reply {
  status: number
  headers: [string, string][]
  json: () => any
}

function request(url: string, body?: unknown): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const data = body === undefined ? undefined : Buffer.from(JSON.stringify(body))
    const req = http.request(
      url,
      {
        method: data ? 'POST' : 'GET',
        agent: false,
        headers: data ? { 'content-type': 'application/json', 'content-length': data.length } : {},
      },
      (res) => {
        let text = ''
        res.setEncoding('utf8')
        res.on('data', (c) => (text += c))
        res.on('end', () => {
          const raw = res.rawHeaders
          const headers: [string, string][] = []
          for (let i = 0; i < raw.length; i += 2) headers.push([raw[i].toLowerCase(), raw[i + 1]])
          resolve({ status: res.statusCode!, headers, json: () => JSON.parse(text) })
        })
      },
    )
    req.on('error', reject)
    req.end(data)
  })
}

/** A key of `bytes` UTF-8 bytes, distinct per `i`. */
const bigKey = (i: number, bytes: number) => {
  const head = `user-${i}@example.com/`
  return head + 'x'.repeat(bytes - head.length)
}
const sha256 = (text: string) => createHash('sha256').update(text).digest('hex')

for (const framework of FRAMEWORKS) {
  describe(`${framework}: keys of any size`, () => {
    it('issue-24-key-cache-bytes: 200 distinct 100 KB keys keep the cache under its byte bound', async () => {
      const store = new MemoryStore({ clock: new ManualClock(T0) })
      const cacheBytes = 64 * 1024
      const app = await serve(framework, {
        store,
        limit: 2,
        windowMs: 60_000,
        identifier: 'email',
        cacheBytes,
        keyGenerator: (req: any) => req.body.email,
      })
      try {
        let max = 0
        for (let i = 0; i < 200; i++) {
          const r = await request(`${app.url}/`, { email: bigKey(i, 100_000) })
          expect(r.status).toBe(200)
          max = Math.max(max, app.door().cacheBytes)
        }
        const door = app.door()
        expect(max).toBeGreaterThan(cacheBytes / 2)
        expect(max).toBeLessThanOrEqual(cacheBytes)
        // no raw key is kept: every cached key is a hash (66 characters)
        for (const cached of door._limiters.keys()) expect(cached.length).toBeLessThanOrEqual(66)
        // the recent keys are still counted (a key dropped from the cache is only remade)
        expect((await request(`${app.url}/`, { email: bigKey(199, 100_000) })).status).toBe(200)
        expect((await request(`${app.url}/`, { email: bigKey(199, 100_000) })).status).toBe(429)
        expect((await request(`${app.url}/`, { email: bigKey(0, 100_000) })).status).toBe(200)
      } finally {
        await app.close()
      }
    })

    it('issue-24-key-over-1mib: a key over 1 MiB fails through the error path with ERR_INVALID_ARGUMENT', async () => {
      const store = new MemoryStore({ clock: new ManualClock(T0) })
      const app = await serve(framework, {
        store,
        limit: 1,
        windowMs: 60_000,
        identifier: 'huge',
        keyGenerator: (req: any) => req.body.key,
      })
      try {
        const over = await request(`${app.url}/`, { key: bigKey(1, MiB + 1) })
        expect([over.status, over.json().code]).toEqual([500, 'ERR_INVALID_ARGUMENT'])
        // characters count in UTF-8 bytes: 524,289 × 2 bytes is over 1 MiB
        const wide = await request(`${app.url}/`, { key: 'ж'.repeat(MiB / 2 + 1) })
        expect([wide.status, wide.json().code]).toEqual([500, 'ERR_INVALID_ARGUMENT'])
        // exactly 1 MiB is a key like any other (and the refused one charged nothing)
        expect((await request(`${app.url}/`, { key: bigKey(1, MiB) })).status).toBe(200)
        expect((await request(`${app.url}/`, { key: bigKey(1, MiB) })).status).toBe(429)
        expect((await request(`${app.url}/`, { key: bigKey(1, MiB + 1) })).status).toBe(500)
      } finally {
        await app.close()
      }
    })

    it('issue-24-non-latin1-keys: 李雷 and Ольга get 200 with draft-8 and draft-10, no key in any header', async () => {
      const store = new MemoryStore({ clock: new ManualClock(T0) })
      const users = ['李雷', 'Ольга', 'olga-secret-42']
      for (const standardHeaders of ['draft-8', 'draft-10', 'draft-7', true]) {
        for (const kind of ['pacer', 'composite', 'bucket', 'sliding']) {
          const app = await serve(framework, {
            store,
            standardHeaders,
            keyGenerator: (req: any) => req.query.user,
            limiter: (req: any) => {
              const user = `${req.query.user}/${standardHeaders}` // a limiter per test
              const safe = escapeName(user) // limiter names are [A-Za-z0-9_-]
              if (kind === 'pacer') return new DistributedPacer(store, { key: user, qps: 1, maxBurst: 3 })
              if (kind === 'composite') {
                return new PacerComposite([
                  new DistributedPacer(store, { key: `${user}:burst`, qps: 10, maxBurst: 2 }),
                  new DistributedPacer(store, { key: `${user}:hour`, qps: 0.01, maxBurst: 30 }),
                ])
              }
              if (kind === 'bucket') return new BucketLimiter(store, { name: `u-${safe}`, limit: 3, interval: 60_000 })
              return new SlidingWindowLimiter(store, { name: `u-${safe}`, windows: [{ limit: 3, intervalMs: 60_000 }] })
            },
          })
          try {
            for (const user of users) {
              const r = await request(`${app.url}/?user=${encodeURIComponent(user)}&k=${kind}${standardHeaders}`)
              const where = `${kind} ${standardHeaders} ${user}`
              expect(r.status, where).toBe(200)
              const limits = r.headers.filter(([n]) => /ratelimit/.test(n))
              expect(limits.length, where).toBeGreaterThan(0)
              for (const [, value] of limits) {
                expect(value, where).toMatch(/^[\x20-\x7e]*$/)
                for (const shown of [user, encodeURIComponent(user), escapeName(user), 'secret']) {
                  expect(value.includes(shown), `${where}: ${value}`).toBe(false)
                }
              }
              const policy = limits.find(([n]) => n === 'ratelimit-policy')![1]
              if (standardHeaders === 'draft-8' || standardHeaders === 'draft-10') {
                // policy names from the numbers, integers for q
                expect(policy, where).toMatch(/^"[0-9]+-per-[0-9]+m?s"; ?q=[0-9]+; ?w=[0-9]+/)
              }
            }
          } finally {
            await app.close()
          }
        }
      }
      // with an identifier, the policy is named by it
      const namedStore = new MemoryStore({ clock: new ManualClock(T0) })
      const named = await serve(framework, {
        store: namedStore,
        standardHeaders: 'draft-10',
        identifier: 'per-user',
        keyGenerator: (req: any) => req.query.user,
        limiter: (req: any) => new DistributedPacer(namedStore, { key: String(req.query.user), qps: 1, maxBurst: 3 }),
      })
      try {
        const r = await request(`${named.url}/?user=${encodeURIComponent('李雷')}&named`)
        expect(r.headers.find(([n]) => n === 'ratelimit')).toEqual(['ratelimit', '"per-user";r=2;t=0'])
      } finally {
        await named.close()
      }
    })

    it('issue-24-single-window-stats: fixed, window and leaky with one window count their decisions (as the door, issue 36)', async () => {
      for (const kind of ['memory', 'redis'] as const) {
        const store = await makeStore(kind, { clock: new ManualClock(T0) })
        try {
          for (const [algorithm, Kind] of [
            ['fixed', BucketLimiter],
            ['window', WindowLimiter],
            ['leaky', LeakyLimiter],
          ] as const) {
            const identifier = `${algorithm}-${framework}`
            const app = await serve(framework, {
              store,
              algorithm,
              limit: 2,
              windowMs: 60_000,
              identifier,
              keyGenerator: () => 'client',
            })
            try {
              const statuses = []
              for (let i = 0; i < 3; i++) statuses.push((await request(`${app.url}/`)).status)
              expect(statuses).toEqual([200, 200, 429])
            } finally {
              await app.close()
            }
            // the door is one limiter (issue 36): kind door, named by its identifier, its clients unlisted
            const listed = await store.limiters()
            const names = listed.map((l: any) => `${l.kind}:${l.name}`)
            expect(names, `${kind} ${algorithm}`).toContain(`door:${identifier}`)
            expect(
              names.filter((n: string) => n.includes('_client')),
              `${kind} ${algorithm}`,
            ).toEqual([])
            // the client's own counter holds its count (state is per client, statistics per door)
            const counter = new Kind(store, { name: `${escapeName(identifier)}_client`, limit: 2, interval: 60_000 })
            expect((await counter.peek()).allowed, `${kind} ${algorithm}`).toBe(false)
            const stats = await (store as any)._statsOf('door', identifier)
            expect([stats.admitted, stats.refused, stats.admittedWeight], `${kind} ${algorithm}`).toEqual([2, 1, 2])
          }
        } finally {
          await store.close()
        }
      }
    })
  })
}

describe.each(REDIS_KINDS)('the doors with long keys on %s', (kind) => {
  let store: Store
  const prefix = freshPrefix()
  const raw = rawClient(kind)
  beforeAll(async () => {
    store = await makeStore(kind, { keyPrefix: prefix, clock: new ManualClock(T0) })
  })
  afterAll(() => {
    raw.disconnect()
  })

  it('issue-24-long-keys-hashed: a key over 64 bytes reaches Redis as its SHA-256, never raw', async () => {
    const door = new Door(
      // 'fixed' (the default before issue 29): the bucket segment below
      doorConfig({
        store,
        algorithm: 'fixed',
        limit: 5,
        windowMs: 60_000,
        identifier: 'mail',
        keyGenerator: (req: any) => req.key,
      }),
    )
    const keys = [
      'a'.repeat(64), // 64 bytes: kept (escaped), readable
      'b'.repeat(65), // 65 bytes: hashed
      'é'.repeat(33), // 33 characters, 66 bytes: hashed
      bigKey(7, 100_000),
    ]
    for (const key of keys) expect((await door.decide({ key }, {})).allowed).toBe(true)
    await store.close() // writes the statistics too
    const names = await keysUnder(raw, prefix)
    expect(names.length).toBeGreaterThanOrEqual(4)
    for (const n of names) {
      expect(n.length, n).toBeLessThan(400)
      expect(n.includes('bbbbbbbbbb') || n.includes('xxxxxxxxxx') || n.includes('-c3-a9-c3-a9'), n).toBe(false)
    }
    const joined = names.join('\n')
    expect(joined).toContain(`bucket:{mail_${'a'.repeat(64)}}`)
    expect(joined).toContain(`bucket:{mail_-h${sha256('b'.repeat(65))}}`)
    expect(joined).toContain(`bucket:{mail_-h${sha256('é'.repeat(33))}}`)
    expect(joined).toContain(`bucket:{mail_-h${sha256(bigKey(7, 100_000))}}`)
  })
})

describe('doors: keys, names and identifiers', () => {
  it('issue-24-long-key-cpu: a new 100 KB key costs a hash, not an escape of every byte', async () => {
    const store = new MemoryStore()
    const door = new Door(
      doorConfig({ store, limit: 5, windowMs: 60_000, identifier: 'cpu', keyGenerator: (req: any) => req.key }),
    )
    const keys = Array.from({ length: 200 }, (_, i) => bigKey(i, 100_000))
    const start = process.hrtime.bigint()
    for (const key of keys) expect((await door.decide({ key }, {})).allowed).toBe(true)
    const ms = Number(process.hrtime.bigint() - start) / 1e6
    // measured: 0.2-0.4 ms per key (was 3-7 ms: 0.6-1.4 s for 200)
    expect(ms).toBeLessThan(300)
    expect(keyId('a'.repeat(64))).toBe('a'.repeat(64))
    expect(keyId('a'.repeat(65))).toBe(`-h${sha256('a'.repeat(65))}`)
    expect(() => keyId('a'.repeat(MiB + 1))).toThrow(expect.objectContaining({ code: 'ERR_INVALID_ARGUMENT' }))
  })

  it('issue-24-key-cache-heap: 200 distinct 100 KB keys leave under 2 MB on the heap (were 20 MB)', () => {
    // a child with --expose-gc: the heap after a full collection, before and after the keys
    const program = `
      const { Door } = require(${JSON.stringify(join(__dirname, '..', 'lib', 'doors', 'http', 'door.js'))})
      const { doorConfig } = require(${JSON.stringify(join(__dirname, '..', 'lib', 'doors', 'http', 'options.js'))})
      const { MemoryStore } = require(${JSON.stringify(join(__dirname, '..', 'lib', 'entries', 'index.js'))})
      const door = new Door(doorConfig({ store: new MemoryStore(), limit: 5, windowMs: 60000, identifier: 'heap',
        keyGenerator: (req) => req.body.email }))
      ;(async () => {
        global.gc(); global.gc()
        const before = process.memoryUsage().heapUsed
        for (let i = 0; i < 200; i++) {
          // a key read from a parsed body, as keyGenerator: req => req.body.email
          const body = JSON.parse(JSON.stringify({ email: 'user-' + i + '@example.com/' + 'x'.repeat(100000) }))
          await door.decide({ body }, {})
        }
        global.gc(); global.gc()
        console.log(process.memoryUsage().heapUsed - before)
      })()`
    const grown = Number(execFileSync(process.execPath, ['--expose-gc', '-e', program], { encoding: 'utf8' }))
    expect(grown).toBeLessThan(2 * MiB)
  })

  it('issue-24-unambiguous-names: one window of a key is never a window of several of another key', async () => {
    const clock = new ManualClock(T0)
    const store = new MemoryStore({ clock })
    const single = new Door(
      doorConfig({ store, limit: 1, windowMs: 60_000, identifier: 'shared', keyGenerator: (req: any) => req.key }),
    )
    // 11 windows: the old name of window 10 of key `a` was `shared_a-10`, the name of key `a\x10`
    const several = new Door(
      doorConfig({
        store,
        limits: Array.from({ length: 11 }, (_, i) => ({ limit: 5, windowMs: i === 10 ? 60_000 : 1000 * (i + 1) })),
        identifier: 'shared',
        keyGenerator: (req: any) => req.key,
      }),
    )
    expect((await several.decide({ key: 'a' }, {})).allowed).toBe(true)
    expect((await single.decide({ key: 'a\x10' }, {})).allowed).toBe(true)
    expect((await single.decide({ key: 'a\x10' }, {})).allowed).toBe(false)
    // a limit(req) door caches by limit and key: no key is read as another limit's
    const dynamic = new Door(
      doorConfig({
        store,
        limit: (req: any) => req.limit,
        windowMs: 60_000,
        identifier: 'dyn',
        keyGenerator: (req: any) => req.key,
      }),
    )
    const pairs: [number, string][] = [
      [1, '2\nk'],
      [12, 'k'],
      [1, '2:k'],
      [12, ':k'],
      [1, 'k'],
    ]
    for (const [limit, key] of pairs) expect((await dynamic.decide({ key, limit }, {})).windows[0].limit).toBe(limit)
    const cached = [...dynamic._limiters.entries()].map(([k, v]: [string, any]) => [k, (v.limiter ?? v).limit])
    expect(new Set(cached.map(([k]) => k)).size).toBe(pairs.length)
    for (const [k, limit] of cached) expect(k.startsWith(`${limit}:`)).toBe(true)
  })

  it('issue-24-identifier-warning: two doors naming their counters alike with different options warn once', async () => {
    await new Promise((resolve) => setImmediate(resolve)) // the warnings of the tests before
    const warnings: Error[] = []
    const onWarning = (w: Error) => warnings.push(w)
    process.on('warning', onWarning)
    try {
      const store = new MemoryStore()
      const other = new MemoryStore()
      // the same options: one counter on purpose, no warning
      rateLimit({ store, limit: 100, windowMs: 60_000 })
      rateLimit({ store, limit: 100, windowMs: 60_000 })
      rateLimit({ store, limit: 10, windowMs: 60_000, identifier: 'api' })
      rateLimit({ store, limit: 10, windowMs: 60_000, identifier: 'api' })
      // another store: other counters
      rateLimit({ store: other, limit: 50, windowMs: 60_000, identifier: 'api' })
      await new Promise((resolve) => setImmediate(resolve))
      expect(warnings).toEqual([])
      // different options under one identifier: once, however many doors
      rateLimit({ store, limit: 50, windowMs: 60_000, identifier: 'api' })
      rateLimit({ store, limit: 10, windowMs: 60_000, identifier: 'api', algorithm: 'sliding' })
      const app = Fastify()
      await app.register(sluiceFastify as any, { store, max: 7, timeWindow: 1000, identifier: 'api' })
      await app.close()
      await new Promise((resolve) => setImmediate(resolve))
      expect(warnings.map((w) => [w.name, (w as any).code])).toEqual([['SluiceWarning', 'SLUICE_IDENTIFIER_REUSED']])
      expect(warnings[0].message).toContain('"api"')
      // the default identifier comes from the numbers only: other algorithm (than the default
      // 'window', issue 29), same name
      rateLimit({ store, limit: 100, windowMs: 60_000, algorithm: 'fixed' })
      await new Promise((resolve) => setImmediate(resolve))
      expect(warnings.length).toBe(2)
      expect(warnings[1].message).toContain('"100-per-60s"')
    } finally {
      process.off('warning', onWarning)
    }
  })
})
