// sluice/hono and sluice/koa (issue 40, DESIGN §10), each on its real framework (Hono 4 on
// @hono/node-server, Koa 3 and Koa 2) with a real HTTP client, on the memory store and Redis:
// defaults counted, headers, the request's info, keys, refusals, errors of one request, refunds,
// bad options, store.rules and several processes sharing one count.
import { afterEach, describe, expect, it } from 'vitest'
import { ManualClock, RedisStore, type Store } from '../lib/entries/index.js'
import { rateLimiter } from '../lib/entries/hono.js'
import { rateLimit as koaRateLimit } from '../lib/entries/koa.js'
import { REDIS_KINDS, STORE_KINDS, makeStore, makeStores } from './helpers/stores.js'
import { MORE_FRAMEWORKS, get, limitHeaders, serve, type Served } from './helpers/http.js'
import { freePort, startRedis, stop } from './helpers/servers.js'

const T0 = 1_800_000_000_000
type Door = (typeof MORE_FRAMEWORKS)[number]
const statuses = async (url: string, n: number, headers: Record<string, string> = {}) => {
  const out: number[] = []
  for (let i = 0; i < n; i++) out.push((await get(url, headers)).status)
  return out
}

describe.each(STORE_KINDS.filter((k) => k !== 'cluster'))('issue-40-hono-koa on %s', (kind) => {
  const open: { close(): Promise<unknown> }[] = []
  afterEach(async () => {
    for (const o of open.splice(0).reverse()) await o.close()
  })
  const served = async (door: Door, options: object, store?: Store) => {
    const s = store ?? (await makeStore(kind, { clock: new ManualClock(T0) }))
    if (store === undefined) open.push(s)
    const app = await serve(door, { store: s, ...options })
    open.push(app)
    return { app, store: s }
  }

  it.each(MORE_FRAMEWORKS)(
    '%s: the defaults, counted (hono 5 a minute, koa 2,500 an hour per client)',
    async (door) => {
      const { app } = await served(door, {})
      const limit = door === 'hono' ? 5 : 2500
      const codes = await statuses(`${app.url}/`, limit + 2)
      expect(codes.filter((c) => c === 200)).toHaveLength(limit)
      expect(codes.slice(limit)).toEqual([429, 429])
      const r = await get(`${app.url}/`)
      expect(r.header('retry-after')).toBe(door === 'hono' ? '60' : '3600')
      expect(r.body).toBe(
        door === 'hono' ? 'Too many requests, please try again later.' : 'Rate limit exceeded, retry later.',
      )
    },
  )

  it.each(MORE_FRAMEWORKS)('%s: 10 a second is 10 a second, over 5 seconds of 30 requests each', async (door) => {
    const clock = new ManualClock(T0)
    const store = await makeStore(kind, { clock })
    open.push(store)
    const { app } = await served(door, { limit: 10, windowMs: 1000, algorithm: 'fixed' }, store)
    for (let s = 0; s < 5; s++) {
      const codes = await statuses(`${app.url}/`, 30)
      expect(codes.filter((c) => c === 200)).toHaveLength(10)
      clock.advance(1000)
    }
  })

  it.each(MORE_FRAMEWORKS)("%s: headers, the request's info, the client's key, a custom key", async (door) => {
    const { app } = await served(door, { limit: 2, windowMs: 60_000, standardHeaders: 'draft-7' })
    const first = await get(`${app.url}/`)
    expect(first.status).toBe(200)
    expect(limitHeaders(first)).toEqual([
      ['ratelimit', 'limit=2, remaining=1, reset=60'],
      ['ratelimit-policy', '2;w=60'],
      ['x-ratelimit-limit', '2'],
      ['x-ratelimit-remaining', '1'],
      ['x-ratelimit-reset', String(Math.ceil((T0 + 60_000) / 1000))],
    ])
    const info = first.json().rateLimit
    expect(info).toMatchObject({ limit: 2, used: 1, remaining: 1, key: expect.stringMatching(/127\.0\.0\.1$/) })
    // a key of the app's: its own count
    const { app: keyed } = await served(door, {
      limit: 1,
      windowMs: 60_000,
      keyGenerator: (c: any) => (door === 'hono' ? c.req.header('x-user') : c.get('x-user')),
      identifier: 'keyed',
    })
    expect(await statuses(`${keyed.url}/`, 2, { 'x-user': 'a' })).toEqual([200, 429])
    expect(await statuses(`${keyed.url}/`, 1, { 'x-user': 'b' })).toEqual([200])
  })

  it.each(MORE_FRAMEWORKS)('%s: a refusal answered by message(), handler(), statusCode', async (door) => {
    const { app } = await served(door, {
      limit: 1,
      windowMs: 60_000,
      statusCode: 503,
      message: () => ({ error: 'slow down' }),
    })
    expect(await statuses(`${app.url}/`, 1)).toEqual([200])
    const refused = await get(`${app.url}/`)
    expect([refused.status, refused.json()]).toEqual([503, { error: 'slow down' }])
    const { app: handled } = await served(door, {
      limit: 1,
      windowMs: 60_000,
      identifier: 'handled',
      handler: () => (door === 'hono' ? new Response('custom', { status: 418 }) : 'custom'),
    })
    await get(`${handled.url}/`)
    const custom = await get(`${handled.url}/`)
    expect([custom.status, custom.body]).toEqual([door === 'hono' ? 418 : 429, 'custom'])
    expect(custom.header('retry-after')).toBe('60')
  })

  it.each(MORE_FRAMEWORKS)(
    '%s: a keyGenerator that throws fails its request only; skipFailedRequests gives back',
    async (door) => {
      const { app } = await served(door, {
        limit: 2,
        windowMs: 60_000,
        skipFailedRequests: true,
        keyGenerator: (c: any) => {
          const user = door === 'hono' ? c.req.header('x-user') : c.get('x-user')
          if (user === 'bad') throw Object.assign(new Error('no key'), { code: 'E_KEY' })
          return user ?? 'anon'
        },
      })
      const bad = await get(`${app.url}/`, { 'x-user': 'bad' })
      expect([bad.status, bad.json().code]).toEqual([500, 'E_KEY'])
      // failed responses (500) are given back: never refused
      expect(await statuses(`${app.url}/fail`, 5, { 'x-user': 'u' })).toEqual([500, 500, 500, 500, 500])
      expect(await statuses(`${app.url}/`, 3, { 'x-user': 'u' })).toEqual([200, 200, 429])
    },
  )

  it.each(MORE_FRAMEWORKS)('%s: bad options are ERR_INVALID_CONFIG at setup', async (door) => {
    const store = await makeStore('memory')
    const make = (o: object) =>
      door === 'hono' ? rateLimiter({ store, ...o } as any) : koaRateLimit({ store, ...o } as any)
    for (const bad of [
      { limit: -1 },
      { windowMs: 0 },
      { algorithm: 'nope' },
      { mode: 'loud' },
      { ban: 3 },
      { nope: 1 },
    ]) {
      expect(() => make(bad), JSON.stringify(bad)).toThrow(expect.objectContaining({ code: 'ERR_INVALID_CONFIG' }))
    }
    expect(() => make({ store: {} })).toThrow(expect.objectContaining({ code: 'ERR_INVALID_CONFIG' }))
  })

  it.each(MORE_FRAMEWORKS)('%s: store.rules (deny 403, allow, shadow) and a fleet-wide ban', async (door) => {
    const { app, store } = await served(door, {
      limit: 1,
      windowMs: 60_000,
      identifier: 'api',
      keyGenerator: (c: any) => (door === 'hono' ? c.req.header('x-user') : c.get('x-user')) ?? 'anon',
      ban: { after: 2, withinMs: 60_000, forMs: 60_000 },
    })
    const rules = (store as any).rules
    await rules.set({ door: 'api', key: 'mallory' }, { access: 'deny' })
    await rules.set({ door: 'api', key: 'ops' }, { access: 'allow' })
    expect(await statuses(`${app.url}/`, 2, { 'x-user': 'mallory' })).toEqual([403, 403])
    expect(await statuses(`${app.url}/`, 3, { 'x-user': 'ops' })).toEqual([200, 200, 200])
    expect(await statuses(`${app.url}/`, 4, { 'x-user': 'eve' })).toEqual([200, 429, 403, 403])
    expect((await rules.bans()).map((b: any) => b.target)).toEqual([{ door: 'api', key: 'eve' }])
    await rules.set({ door: 'api' }, { mode: 'shadow' })
    expect(await statuses(`${app.url}/`, 3, { 'x-user': 'carol' })).toEqual([200, 200, 200])
  })
})

describe('issue-40-koa-ratelimit-names', () => {
  const open: { close(): Promise<unknown> }[] = []
  afterEach(async () => {
    for (const o of open.splice(0).reverse()) await o.close()
  })

  it.each(['koa', 'koa2'] as const)(
    '%s: duration, max, id, whitelist, blacklist, errorMessage, throw; limit with max is an error',
    async (door) => {
      const store = await makeStore('memory', { clock: new ManualClock(T0) })
      open.push(store)
      const app = await serve(door, {
        store,
        duration: 10_000,
        max: 2,
        id: (ctx: any) => ctx.get('x-user') || 'anon',
        whitelist: (ctx: any) => ctx.get('x-user') === 'admin',
        blacklist: (ctx: any) => ctx.get('x-user') === 'banned',
        errorMessage: 'easy there',
      })
      open.push(app)
      expect(await statuses(`${app.url}/`, 3, { 'x-user': 'u' })).toEqual([200, 200, 429])
      const refused = await get(`${app.url}/`, { 'x-user': 'u' })
      expect([refused.body, refused.header('retry-after')]).toEqual(['easy there', '10'])
      expect(await statuses(`${app.url}/`, 4, { 'x-user': 'admin' })).toEqual([200, 200, 200, 200])
      expect(await statuses(`${app.url}/`, 2, { 'x-user': 'banned' })).toEqual([403, 403])
      // throw: the app's error handling answers, the door's headers kept
      const thrown = await serve(door, { store, max: 1, duration: 10_000, identifier: 'thrown', throw: true })
      open.push(thrown)
      await get(`${thrown.url}/`)
      const t = await get(`${thrown.url}/`)
      expect([t.status, t.header('retry-after'), t.header('x-ratelimit-remaining')]).toEqual([429, '10', '0'])
      // an object errorMessage thrown: the error's properties (http-errors'), as koa-ratelimit's
      const props = await serve(door, {
        store,
        max: 1,
        duration: 10_000,
        identifier: 'thrown-object',
        throw: true,
        errorMessage: { expose: true, message: 'slow down' },
      })
      open.push(props)
      await get(`${props.url}/`)
      const p = await get(`${props.url}/`)
      expect([p.status, p.body, p.header('retry-after')]).toEqual([429, 'slow down', '10'])
      expect(() => koaRateLimit({ store, max: 1, limit: 2 } as any)).toThrow(
        expect.objectContaining({ code: 'ERR_INVALID_CONFIG' }),
      )
    },
  )
})

describe.each(REDIS_KINDS)('issue-40-hono-koa-processes on %s', (kind) => {
  it('a Hono, a Koa 3 and a Koa 2 process on one door: 5 admitted of 30, exactly', async () => {
    const stores = await makeStores(kind, 3, new ManualClock(T0))
    const apps: Served[] = []
    try {
      for (const [i, door] of MORE_FRAMEWORKS.entries()) {
        apps.push(
          await serve(door, {
            store: stores[i],
            limit: 5,
            windowMs: 60_000,
            identifier: 'shared',
            keyGenerator: () => 'one',
          }),
        )
      }
      const codes = await Promise.all(
        Array.from({ length: 30 }, (_, i) => get(`${apps[i % 3].url}/`).then((r) => r.status)),
      )
      expect(codes.filter((c) => c === 200)).toHaveLength(5)
    } finally {
      for (const a of apps) await a.close()
      for (const s of stores) await s.close()
    }
  })
})

describe('issue-40-hono-koa-whendown (a private standalone server, stopped)', () => {
  it("whenDown: 'allow' lets through degraded, 'deny' answers 503", async () => {
    const port = await freePort()
    const server = await startRedis(port)
    const stores: RedisStore[] = []
    const apps: Served[] = []
    try {
      for (const whenDown of ['allow', 'deny'] as const) {
        const store = await RedisStore.connect({ url: `redis://127.0.0.1:${port}`, commandTimeoutMs: 300, whenDown })
        stores.push(store)
        for (const door of MORE_FRAMEWORKS) apps.push(await serve(door, { store, limit: 1, windowMs: 60_000 }))
      }
      await stop(server)
      const codes = []
      for (const a of apps) codes.push((await get(`${a.url}/`)).status)
      expect(codes).toEqual([200, 200, 200, 503, 503, 503])
    } finally {
      for (const a of apps) await a.close()
      for (const s of stores) await s.close()
      await stop(server).catch(() => {})
    }
  })
})
