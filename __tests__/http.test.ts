// The HTTP doors, sluice/express (Express 5 and 4) and sluice/fastify (Fastify 5), on real
// servers over loopback HTTP, on the memory store and on Redis, with a ManualClock.
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import {
  BucketLimiter,
  DistributedPacer,
  ManualClock,
  MemoryStore,
  SlidingWindowLimiter,
  SluiceError,
  type Store,
} from '../lib/entries/index.js'
import { freshPrefix, makeStore, redisUrl } from './helpers/stores.js'
import { freePort, startRedis, stop } from './helpers/servers.js'
import { FRAMEWORKS, get, limitHeaders, serve, type Served } from './helpers/http.js'

import Fastify from 'fastify'
import { rateLimit, ipKeyGenerator } from '../lib/entries/express.js'
import sluiceFastify from '../lib/entries/fastify.js'

const T0 = 1_800_000_000_000 // ms, on a whole minute (UTC)
const PK = 'MTJjYTE3YjQ5YWYy' // express-rate-limit's draft-8 partition key of 127.0.0.1

// a rejection nobody handles is a defect of the door
const unhandled: unknown[] = []
const onUnhandled = (reason: unknown) => unhandled.push(reason)
beforeAll(() => {
  process.on('unhandledRejection', onUnhandled)
})
afterAll(() => {
  process.off('unhandledRejection', onUnhandled)
  expect(unhandled).toEqual([])
})

for (const kind of ['memory', 'redis'] as const) {
  for (const framework of FRAMEWORKS) {
    describe(`${framework} on ${kind}`, () => {
      let clock: ManualClock
      let store: Store
      let served: Served[] = []
      beforeAll(async () => {
        clock = new ManualClock(T0)
        store = await makeStore(kind, { clock })
      })
      afterAll(() => store.close())
      afterEach(async () => {
        await Promise.all(served.map((s) => s.close()))
        served = []
      })
      // these tests pin the calendar-aligned window ('fixed', the default before issue 29 made
      // it 'window'): each client's own window is __tests__/http-peers.test.ts's
      const start = async (options: any, routes?: (app: any) => void) => {
        clock.set(T0 + 2500)
        const fixed = options.algorithm || options.limiter ? {} : { algorithm: 'fixed' }
        const s = await serve(framework, { store, ...fixed, ...options }, routes)
        served.push(s)
        return s
      }
      let n = 0
      const id = () => `t${++n}` // a fresh counter per test (identifier)

      it('headers, byte for byte, for every standardHeaders value, then 429 with Retry-After', async () => {
        const expected: Record<string, [string, string][][]> = {
          legacy: [
            [
              ['x-ratelimit-limit', '3'],
              ['x-ratelimit-remaining', '2'],
              // @fastify/rate-limit sends seconds from now, express-rate-limit epoch seconds
              ['x-ratelimit-reset', framework === 'fastify' ? '8' : '1800000010'],
            ],
          ],
          'draft-6': [
            [
              ['ratelimit-limit', '3'],
              ['ratelimit-policy', '3;w=10'],
              ['ratelimit-remaining', '2'],
              ['ratelimit-reset', '8'],
            ],
          ],
          'draft-7': [
            [
              ['ratelimit', 'limit=3, remaining=2, reset=8'],
              ['ratelimit-policy', '3;w=10'],
            ],
          ],
          'draft-8': [
            [
              ['ratelimit', '"NAME"; r=2; t=8'],
              ['ratelimit-policy', `"NAME"; q=3; w=10; pk=:${PK}:`],
            ],
          ],
          'draft-10': [
            [
              ['ratelimit', '"NAME";r=2;t=8'],
              ['ratelimit-policy', '"NAME";q=3;w=10'],
            ],
          ],
        }
        for (const [variant, [first]] of Object.entries(expected)) {
          const name = id()
          const standardHeaders = variant === 'legacy' ? false : variant
          const s = await start({
            limit: 3,
            windowMs: 10_000,
            identifier: name,
            standardHeaders,
            legacyHeaders: variant === 'legacy',
          })
          const replies = []
          for (let i = 0; i < 4; i++) replies.push(await get(`${s.url}/`))
          expect(replies.map((r) => r.status)).toEqual([200, 200, 200, 429])
          const named = (h: [string, string][]) => h.map(([k, v]) => [k, v.replace('NAME', name)])
          expect(limitHeaders(replies[0]), variant).toEqual(named(first))
          const refused = limitHeaders(replies[3])
          expect(refused.find(([k]) => k === 'retry-after')).toEqual(['retry-after', '8'])
          const rest = refused.filter(([k]) => k !== 'retry-after')
          expect(rest, variant).toEqual(
            named(first).map(([k, v]) => [
              k,
              k.endsWith('remaining') ? '0' : v.replace('remaining=2', 'remaining=0').replace(/r=2/, 'r=0'),
            ]),
          )
        }
      })

      it('several windows: draft-8/10 list each, the rest describe the most restrictive; all or nothing', async () => {
        const limits = [
          { limit: 2, windowMs: 1000 },
          { limit: 5, windowMs: 60_000 },
        ]
        const s10 = await start({ limits, standardHeaders: 'draft-10', legacyHeaders: true })
        const a = await get(`${s10.url}/`)
        expect(limitHeaders(a)).toEqual([
          ['ratelimit', '"2-per-1s";r=1;t=1, "5-per-60s";r=4;t=58'],
          ['ratelimit-policy', '"2-per-1s";q=2;w=1, "5-per-60s";q=5;w=60'],
          ['x-ratelimit-limit', '2'],
          ['x-ratelimit-remaining', '1'],
          ['x-ratelimit-reset', framework === 'fastify' ? '1' : '1800000003'],
        ])
        expect((await get(`${s10.url}/`)).status).toBe(200)
        const refused = await get(`${s10.url}/`)
        expect(refused.status).toBe(429)
        // the 60 s window gave its charge back: 2 used, 3 left
        expect(limitHeaders(refused)).toEqual([
          ['ratelimit', '"2-per-1s";r=0;t=1, "5-per-60s";r=3;t=58'],
          ['ratelimit-policy', '"2-per-1s";q=2;w=1, "5-per-60s";q=5;w=60'],
          ['retry-after', '1'],
          ['x-ratelimit-limit', '2'],
          ['x-ratelimit-remaining', '0'],
          ['x-ratelimit-reset', framework === 'fastify' ? '1' : '1800000003'],
        ])
        clock.advance(1000)
        const next = await get(`${s10.url}/`)
        expect(next.status).toBe(200)
        expect(next.header('ratelimit')).toBe('"2-per-1s";r=1;t=1, "5-per-60s";r=2;t=57')

        const s8 = await start({ limits, identifier: id(), standardHeaders: 'draft-8', legacyHeaders: false })
        const b = await get(`${s8.url}/`)
        const name = b.header('ratelimit')!.slice(1, b.header('ratelimit')!.indexOf('"', 1))
        expect(name).toMatch(/^t\d+-2-per-1s$/)
        expect(limitHeaders(b)).toEqual([
          ['ratelimit', `"${name}"; r=1; t=1, "${name.replace('2-per-1s', '5-per-60s')}"; r=4; t=58`],
          [
            'ratelimit-policy',
            `"${name}"; q=2; w=1; pk=:${PK}:, "${name.replace('2-per-1s', '5-per-60s')}"; q=5; w=60; pk=:${PK}:`,
          ],
        ])
        // sliding windows, atomically: a window that did not refuse reports its length as t
        const slName = id()
        const sl = {
          ...(await start({ limits, identifier: slName, algorithm: 'sliding', standardHeaders: 'draft-10' })),
          name: slName,
        }
        const slid = []
        for (let i = 0; i < 3; i++) slid.push(await get(`${sl.url}/`))
        expect(slid.map((r) => r.status)).toEqual([200, 200, 429])
        expect(slid[2].header('ratelimit')).toBe(`"${sl.name}-2-per-1s";r=0;t=1, "${sl.name}-5-per-60s";r=3;t=60`)
        expect(slid[2].header('retry-after')).toBe('1')
        const s7 = await start({ limits, identifier: id(), standardHeaders: 'draft-7', legacyHeaders: false })
        expect(limitHeaders(await get(`${s7.url}/`))).toEqual([
          ['ratelimit', 'limit=2, remaining=1, reset=1'],
          ['ratelimit-policy', '2;w=1'],
        ])
      })

      it('req.rateLimit, the 429 body and status, statusCode, message and handler', async () => {
        const s = await start({ limit: 1, windowMs: 10_000, identifier: id() })
        const ok = (await get(`${s.url}/`)).json().rateLimit
        expect(ok).toEqual({
          limit: 1,
          used: 1,
          remaining: 0,
          resetTime: new Date(T0 + 10_000).toISOString(),
          degraded: false,
          key: '127.0.0.1',
        })
        const refused = await get(`${s.url}/`)
        expect(refused.status).toBe(429)
        expect(refused.header('retry-after')).toBe('8')
        if (framework === 'fastify') {
          expect(refused.json()).toEqual({
            statusCode: 429,
            error: 'Too Many Requests',
            message: 'Rate limit exceeded, retry in 8 seconds',
          })
        } else {
          expect(refused.body).toBe('Too many requests, please try again later.')
        }
        const custom = await start({
          limit: 1,
          windowMs: 10_000,
          identifier: id(),
          statusCode: 420,
          message: { no: 1 },
        })
        await get(`${custom.url}/`)
        const c = await get(`${custom.url}/`)
        expect([c.status, c.json()]).toEqual([420, { no: 1 }])
        const seen: string[] = []
        const handler =
          framework === 'fastify'
            ? (req: any, reply: any, o: any) => {
                seen.push(`${req.rateLimit.remaining}:${o.statusCode}`)
                reply.send('custom')
              }
            : (req: any, res: any, _next: any, o: any) => {
                seen.push(`${req.rateLimit.remaining}:${o.statusCode}`)
                res.send('custom')
              }
        const h = await start({ limit: 1, windowMs: 10_000, identifier: id(), handler })
        await get(`${h.url}/`)
        const hr = await get(`${h.url}/`)
        expect([hr.status, hr.body, seen]).toEqual([429, 'custom', ['0:429']])
      })

      it('skip, cost, keyGenerator and a custom property name', async () => {
        const s = await start({
          limit: 5,
          windowMs: 10_000,
          identifier: id(),
          skip: (req: any) => req.headers['x-skip'] === '1',
          cost: (req: any) => Number(req.headers['x-cost'] ?? 1),
          keyGenerator: (req: any) => String(req.headers['x-user'] ?? 'anon'),
          requestPropertyName: 'limits',
        })
        const skipped = await get(`${s.url}/`, { 'x-skip': '1' })
        expect(skipped.status).toBe(200)
        expect(limitHeaders(skipped)).toEqual([])
        expect((await get(`${s.url}/`, { 'x-user': 'a', 'x-cost': '4' })).header('x-ratelimit-remaining')).toBe('1')
        const heavy = await get(`${s.url}/`, { 'x-user': 'a', 'x-cost': '2' })
        expect([heavy.status, heavy.header('x-ratelimit-remaining')]).toEqual([429, '1'])
        expect((await get(`${s.url}/`, { 'x-user': 'a', 'x-cost': '0' })).status).toBe(200)
        expect((await get(`${s.url}/`, { 'x-user': 'a' })).status).toBe(200)
        expect((await get(`${s.url}/`, { 'x-user': 'b' })).header('x-ratelimit-remaining')).toBe('4')
        // a weight above the limit is refused without asking the store
        expect((await get(`${s.url}/`, { 'x-user': 'c', 'x-cost': '6' })).status).toBe(429)
        expect((await get(`${s.url}/`, { 'x-user': 'c' })).header('x-ratelimit-remaining')).toBe('4')
      })

      it('a keyGenerator, cost or limit that throws or returns garbage: 500 through the error handler', async () => {
        const cases: [any, string][] = [
          [
            {
              keyGenerator: () => {
                throw new Error('boom')
              },
            },
            'boom',
          ],
          [
            {
              keyGenerator: async () => {
                throw new Error('async boom')
              },
            },
            'async boom',
          ],
          [{ keyGenerator: () => ({}) }, 'ERR_INVALID_ARGUMENT'],
          [{ keyGenerator: () => '' }, 'ERR_INVALID_ARGUMENT'],
          [{ cost: () => -1 }, 'ERR_INVALID_ARGUMENT'],
          [{ cost: () => 'x' }, 'ERR_INVALID_ARGUMENT'],
          [{ limit: () => -1, windowMs: 1000 }, 'ERR_INVALID_ARGUMENT'],
          [{ limiter: () => ({ check: () => true }) }, 'ERR_INVALID_CONFIG'],
        ]
        for (const [options, expected] of cases) {
          const s = await start(options.limiter ? options : { limit: 5, windowMs: 1000, ...options })
          const r = await get(`${s.url}/`)
          expect(r.status).toBe(500)
          const body = r.json()
          expect(body.code === expected || body.message === expected, JSON.stringify(body)).toBe(true)
        }
      })

      it('skipFailedRequests and skipSuccessfulRequests give the charge back', async () => {
        const failed = await start({ limit: 2, windowMs: 10_000, identifier: id(), skipFailedRequests: true })
        for (let i = 0; i < 4; i++) expect((await get(`${failed.url}/fail`)).status).toBe(500)
        // refunds land after the response: wait for them through the store
        let remaining = '0'
        for (let i = 0; i < 100 && remaining !== '1'; i++) {
          remaining = (await get(`${failed.url}/`)).header('x-ratelimit-remaining')!
          if (remaining !== '1') await new Promise((r) => setTimeout(r, 5))
        }
        expect(remaining).toBe('1')
        const ok = await start({ limit: 2, windowMs: 10_000, identifier: id(), skipSuccessfulRequests: true })
        for (let i = 0; i < 5; i++) expect((await get(`${ok.url}/`)).status).toBe(200)
      })

      it('every algorithm admits its limit and no more', async () => {
        for (const algorithm of ['fixed', 'window', 'sliding', 'leaky', 'gcra']) {
          const s = await start({
            limit: 4,
            windowMs: 10_000,
            identifier: id(),
            algorithm,
            standardHeaders: 'draft-10',
          })
          const statuses = []
          for (let i = 0; i < 7; i++) statuses.push((await get(`${s.url}/`)).status)
          const admitted = statuses.filter((x) => x === 200).length
          // gcra is DistributedPacer.rateLimit with maxBurst = limit: it opens with one more
          expect(admitted, algorithm).toBe(algorithm === 'gcra' ? 5 : 4)
          const last = await get(`${s.url}/`)
          expect(Number(last.header('retry-after')), algorithm).toBeGreaterThanOrEqual(1)
          const t = Number(/t=(\d+)/.exec(last.header('ratelimit')!)![1])
          expect(Number(last.header('retry-after')), algorithm).toBeGreaterThanOrEqual(t)
        }
      })

      it('limiter(req): any sluice limiter, or null for none', async () => {
        const bucket = new BucketLimiter(store, { name: id(), limit: 1, interval: 10_000 })
        const sliding = new SlidingWindowLimiter(store, { name: id(), windows: [{ limit: 1, intervalMs: 10_000 }] })
        const pacer = new DistributedPacer(store, { key: id(), qps: 0.1, maxBurst: 0 })
        const s = await start({
          standardHeaders: 'draft-10',
          limiter: (req: any) =>
            (({ b: bucket, s: sliding, p: pacer }) as any)[req.headers['x-kind'] as string] ?? null,
        })
        for (const kind of ['b', 's', 'p']) {
          expect((await get(`${s.url}/`, { 'x-kind': kind })).status, kind).toBe(200)
          expect((await get(`${s.url}/`, { 'x-kind': kind })).status, kind).toBe(429)
        }
        const free = await get(`${s.url}/`, { 'x-kind': 'none' })
        expect([free.status, limitHeaders(free)]).toEqual([200, []])
      })

      if (framework === 'fastify') {
        it('per route: own limits, exemptions, a group shares one counter, the global one counter across routes', async () => {
          const group = id()
          const s = await start({ limit: 2, windowMs: 10_000, identifier: id() }, (app) => {
            app.get('/other', async () => 'other')
            app.get('/own', { config: { rateLimit: { max: 1, timeWindow: '10 seconds' } } }, async () => 'own')
            for (const path of ['/g1', '/g2', '/g3']) {
              app.get(path, { config: { rateLimit: { max: 2, timeWindow: 10_000, groupId: group } } }, async () => 'g')
            }
          })
          // the global limit: one counter for / and /other
          expect((await get(`${s.url}/`)).status).toBe(200)
          expect((await get(`${s.url}/other`)).status).toBe(200)
          expect((await get(`${s.url}/other`)).status).toBe(429)
          expect((await get(`${s.url}/`)).status).toBe(429)
          // exempt
          const free = await get(`${s.url}/free`)
          expect([free.status, limitHeaders(free)]).toEqual([200, []])
          // its own limit
          expect((await get(`${s.url}/own`)).status).toBe(200)
          expect((await get(`${s.url}/own`)).status).toBe(429)
          // a group of three routes allows 2 in all (fastify-rate-limit#463 allows 2 per route)
          const g = [await get(`${s.url}/g1`), await get(`${s.url}/g2`), await get(`${s.url}/g3`)]
          expect(g.map((r) => r.status)).toEqual([200, 200, 429])
        })

        it('global: false limits only the routes that ask; timeWindow strings', async () => {
          clock.set(T0 + 2500)
          const app = Fastify()
          // 'fixed': the calendar-aligned window (the default before issue 29)
          await app.register(sluiceFastify as any, {
            store,
            algorithm: 'fixed',
            global: false,
            max: 1,
            timeWindow: '1 minute',
          })
          app.get('/open', async () => 'open')
          app.get('/limited', { config: { rateLimit: { identifier: id() } } }, async () => 'limited')
          await app.listen({ port: 0, host: '127.0.0.1' })
          served.push({ url: '', close: () => app.close() })
          const url = `http://127.0.0.1:${(app.server.address() as any).port}`
          for (let i = 0; i < 3; i++) expect((await get(`${url}/open`)).status).toBe(200)
          // hook: 'preHandler' runs after the app's own onRequest hooks (an authentication, say)
          const late = Fastify()
          late.addHook('onRequest', async (req: any) => {
            req.user = String(req.headers['x-user'])
          })
          await late.register(sluiceFastify as any, {
            store,
            hook: 'preHandler',
            max: 1,
            identifier: id(),
            keyGenerator: (req: any) => req.user,
          })
          late.get('/', async () => 'ok')
          await late.listen({ port: 0, host: '127.0.0.1' })
          served.push({ url: '', close: () => late.close() })
          const lateUrl = `http://127.0.0.1:${(late.server.address() as any).port}`
          const users = []
          for (const user of ['a', 'a', 'b']) users.push((await get(`${lateUrl}/`, { 'x-user': user })).status)
          expect(users).toEqual([200, 429, 200])
          expect((await get(`${url}/limited`)).status).toBe(200)
          const r = await get(`${url}/limited`)
          expect([r.status, r.header('retry-after')]).toEqual([429, '58'])
        })
      } else {
        it('two middlewares with one identifier share a counter; resetKey forgets a key', async () => {
          const name = id()
          const a = await start({ limit: 2, windowMs: 10_000, identifier: name })
          const b = await start({ limit: 2, windowMs: 10_000, identifier: name })
          expect((await get(`${a.url}/`)).status).toBe(200)
          expect((await get(`${b.url}/`)).status).toBe(200)
          expect((await get(`${a.url}/`)).status).toBe(429)
          await a.middleware.resetKey('127.0.0.1')
          expect((await get(`${b.url}/`)).status).toBe(200)
        })
      }
    })
  }
}

describe('door options', () => {
  const store = new MemoryStore()
  it('invalid options throw ERR_INVALID_CONFIG at setup', async () => {
    const bad: any[] = [
      undefined,
      {},
      { store: {} },
      { store, limit: 1.5 },
      { store, windowMs: 0 },
      { store, algorithm: 'token' },
      { store, legacyHeaders: 'yes' },
      { store, statusCode: 200 },
      { store, keyGenerator: 'ip' },
      { store, skip: true },
      { store, limits: [] },
      { store, limits: [{ limit: 1 }] },
      { store, limits: [{ limit: 1, windowMs: 1000 }], limit: 2 },
      { store, limiter: () => null, limit: 2 },
      { store, algorithm: 'sliding', skipFailedRequests: true },
      { store, identifier: '' },
      { store, logger: console.log },
      { store, validate: 'yes' },
      { store, requestPropertyName: '' },
      // an unknown option is logged and ignored, as the peers do (http-peers.test.ts)
    ]
    for (const options of bad) {
      let error: unknown
      try {
        rateLimit(options)
      } catch (e) {
        error = e
      }
      expect(error, JSON.stringify(options)).toBeInstanceOf(SluiceError)
      expect((error as SluiceError).code).toBe('ERR_INVALID_CONFIG')
    }
    // issue 29: a limit of 0 refuses everything, an unknown standardHeaders or unusable
    // ipv6Subnet is logged and falls back (express-rate-limit's validate); Fastify's unusable
    // max/timeWindow/global fall back to its defaults (@fastify/rate-limit): see http-peers
    for (const options of [
      { store, max: 1, limit: 1 },
      { store, hook: 'onSend' },
      { store, allowList: 'x' },
    ]) {
      const app = Fastify()
      await expect(app.register(sluiceFastify as any, options as any).ready()).rejects.toMatchObject({
        code: 'ERR_INVALID_CONFIG',
      })
    }
    const app = Fastify()
    await app.register(sluiceFastify as any, { store })
    // a route's own options are checked when the route is added
    expect(() => app.get('/x', { config: { rateLimit: { algorithm: 'token' } as any } }, async () => 'x')).toThrow(
      expect.objectContaining({ code: 'ERR_INVALID_CONFIG' }),
    )
    await app.close()
  })

  it('any key: long, or full of characters a name cannot hold, with several windows', async () => {
    const s = await serve('express5', {
      store,
      limits: [
        { limit: 1, windowMs: 60_000 },
        { limit: 5, windowMs: 3_600_000 },
      ],
      keyGenerator: (req: any) => String(req.headers['x-key']),
    })
    try {
      for (const key of ['k'.repeat(300), 'ключ/{x}:y'.repeat(20), 'a_b', 'a-5fb']) {
        const statuses = [(await get(`${s.url}/`, { 'x-key': encodeURIComponent(key) })).status]
        statuses.push((await get(`${s.url}/`, { 'x-key': encodeURIComponent(key) })).status)
        expect(statuses, key.slice(0, 20)).toEqual([200, 429])
      }
    } finally {
      await s.close()
    }
  })

  it('the default key: the IP, IPv6 masked to /56, IPv4-mapped as IPv4', () => {
    expect(ipKeyGenerator('203.0.113.9')).toBe('203.0.113.9')
    expect(ipKeyGenerator('::ffff:203.0.113.9')).toBe('203.0.113.9')
    expect(ipKeyGenerator('2001:db8:1234:56ff:ffff::1')).toBe('2001:db8:1234:5600::/56')
    expect(ipKeyGenerator('2001:db8:1234:56ff:ffff::1', 64)).toBe('2001:db8:1234:56ff::/64')
    expect(ipKeyGenerator('2001:db8::1', false)).toBe('2001:db8::1')
    expect(ipKeyGenerator('fe80::1%eth0')).toBe('fe80::/56')
    expect(ipKeyGenerator('::1')).toBe('::/56')
  })
})

describe('the doors with a RedisStore', () => {
  it('localDenyCache: a hot key refused stays refused in this process, with no round trip, until its reset', async () => {
    const clock = new ManualClock(T0 + 2500)
    const { RedisStore } = await import('../lib/entries/index.js')
    const store = await RedisStore.connect({ url: redisUrl(), keyPrefix: freshPrefix(), clock, localDenyCache: true })
    // 'fixed': the calendar-aligned window (the default before issue 29)
    const s = await serve('express5', { store, algorithm: 'fixed', limit: 3, windowMs: 10_000 })
    try {
      const first = []
      for (let i = 0; i < 4; i++) first.push((await get(`${s.url}/`)).status)
      expect(first).toEqual([200, 200, 200, 429])
      const calls = store.batching.calls
      const refused = await Promise.all(Array.from({ length: 50 }, () => get(`${s.url}/`)))
      expect(refused.every((r) => r.status === 429 && r.header('retry-after') === '8')).toBe(true)
      expect(store.batching.calls).toBe(calls) // none of them reached Redis
      expect(store.localDenials).toBe(50)
      clock.advance(7500) // the window's reset
      expect((await get(`${s.url}/`)).status).toBe(200)
      expect(store.batching.calls).toBe(calls + 1)
    } finally {
      await s.close()
      await store.close()
    }
  })

  it('passOnStoreError lets requests through while the store fails; without it they go to the error handler', async () => {
    const port = await freePort()
    const server = await startRedis(port)
    const { RedisStore } = await import('../lib/entries/index.js')
    const store = await RedisStore.connect({ url: `redis://127.0.0.1:${port}`, commandTimeoutMs: 300 })
    const passing = await serve('express5', { store, limit: 3, windowMs: 10_000, passOnStoreError: true })
    const failing = await serve('fastify', { store, limit: 3, windowMs: 10_000 })
    try {
      expect((await get(`${passing.url}/`)).status).toBe(200)
      await stop(server)
      const passed = await get(`${passing.url}/`)
      expect([passed.status, limitHeaders(passed)]).toEqual([200, []])
      const failed = await get(`${failing.url}/`)
      expect([failed.status, failed.json().code]).toEqual([500, 'ERR_STORE_UNAVAILABLE'])
    } finally {
      await passing.close()
      await failing.close()
      await store.close()
    }
  })
})
