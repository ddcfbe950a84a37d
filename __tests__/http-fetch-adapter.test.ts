// issue-37-fetch-api-adapter: the HTTP doors' machinery fits a Fetch-API framework (a `Request`
// in, a `Response` out) with no Node req/res anywhere: no server, no socket, only the standard
// Request and Response of Node 20, through lib/doors/http/fetch-api.js (the adapter's accessors
// over a Request and the reply being built). Counted on every store with a ManualClock: each
// algorithm admits exactly its limit over a sweep of limits and windows, the RateLimit headers
// and the 429 are the doors', and refunds settle after the handler's Response (skipSuccessfulRequests,
// skipFailedRequests, requestWasSuccessful).
import { createRequire } from 'node:module'
import { describe, expect, it } from 'vitest'
import { ManualClock } from '../lib/entries/index.js'
import { STORE_KINDS, useStore } from './helpers/stores.js'

type Handler = (request: Request) => Response | Promise<Response>
type Limited = ((request: Request, handler: Handler) => Promise<Response>) & Record<symbol, any>

const internal = createRequire(__filename)
const { fetchLimiter, rateLimitOf, FetchReply } = internal('../lib/doors/http/fetch-api.js') as {
  fetchLimiter: (options: object, adapter?: object) => Limited
  rateLimitOf: (request: Request, name?: string) => any
  FetchReply: new () => object
}
const { DOOR } = internal('../lib/doors/http/door.js') as { DOOR: symbol }

const T0 = 1_800_000_000_000 // a whole second (and minute)
let n = 0
const id = () => `fetch${n++}`

/** A request from `client` (its address in a header the test's clientAddress reads: the platform's part). */
const request = (client: string, path = '/') =>
  new Request(`http://api.test${path}`, { headers: { 'x-client-address': client } })
const clientAddress = (r: Request) => r.headers.get('x-client-address') ?? undefined
const ok: Handler = () => new Response('ok')

/** Until `read()` gives `expected` (refunds land after the response), within 2,000 turns of the event loop. */
async function settled<T>(read: () => Promise<T>, expected: T): Promise<T> {
  let got = await read()
  for (let i = 0; i < 2000 && got !== expected; i++) {
    await new Promise((r) => setImmediate(r))
    got = await read()
  }
  return got
}

for (const kind of STORE_KINDS) {
  describe(`issue-37-fetch-api-adapter on ${kind}`, () => {
    const clock = new ManualClock(T0)
    const ctx = useStore(kind, { clock })
    /** The clock on to the next whole minute (never backwards: refunds measure elapsed time). */
    const nextMinute = () => clock.set(Math.floor(clock.now() / 60_000 + 1) * 60_000)

    it('every algorithm admits exactly its limit, per client, over a sweep of limits and windows', async () => {
      for (const algorithm of ['window', 'fixed', 'sliding', 'leaky', 'gcra', 'sliding-counter']) {
        for (const limit of [1, 3, 10]) {
          for (const windowMs of [1000, 60_000]) {
            nextMinute()
            const limited = fetchLimiter(
              { store: ctx.store, algorithm, limit, windowMs, identifier: id() },
              { clientAddress },
            )
            const what = `${algorithm} ${limit} per ${windowMs} ms`
            // gcra is DistributedPacer.rateLimit with maxBurst = limit: it opens with one more
            const burst = algorithm === 'gcra' ? limit + 1 : limit
            for (const client of ['192.0.2.1', '192.0.2.2']) {
              let handled = 0
              const handler: Handler = () => {
                handled++
                return new Response('ok')
              }
              const statuses = []
              for (let i = 0; i < 3 * limit + 2; i++) statuses.push((await limited(request(client), handler)).status)
              expect(statuses.filter((s) => s === 200).length, `${what}, ${client}`).toBe(burst)
              expect(statuses.filter((s) => s === 429).length, `${what}, ${client}`).toBe(3 * limit + 2 - burst)
              // a refused request never reaches the handler
              expect(handled, what).toBe(burst)
            }
            // two windows later every client has its whole limit again, and no more
            clock.advance(2 * windowMs)
            const again = []
            for (let i = 0; i < 3 * limit + 2; i++) again.push((await limited(request('192.0.2.1'), ok)).status)
            expect(again.filter((s) => s === 200).length, `${what}, two windows later`).toBe(burst)
          }
        }
      }
    })

    it('the default key is the client address, IPv6 grouped by its /56 network', async () => {
      nextMinute()
      const limited = fetchLimiter(
        { store: ctx.store, limit: 2, windowMs: 60_000, identifier: id() },
        { clientAddress },
      )
      // one /56: one counter
      expect((await limited(request('2001:db8:1234:5601::1'), ok)).status).toBe(200)
      expect((await limited(request('2001:db8:1234:56ff::2'), ok)).status).toBe(200)
      expect((await limited(request('2001:db8:1234:5600::3'), ok)).status).toBe(429)
      // another /56, and an IPv4-mapped client keyed as its IPv4 address
      expect((await limited(request('2001:db8:1234:5700::1'), ok)).status).toBe(200)
      expect((await limited(request('198.51.100.7'), ok)).status).toBe(200)
      expect((await limited(request('::ffff:198.51.100.7'), ok)).status).toBe(200)
      expect((await limited(request('198.51.100.7'), ok)).status).toBe(429)
      // no address and no keyGenerator: the request fails (ERR_INVALID_ARGUMENT), nothing charged
      await expect(limited(new Request('http://api.test/'), ok)).rejects.toMatchObject({ code: 'ERR_INVALID_ARGUMENT' })
    })

    it('the RateLimit headers, request info and 429 are the doors` own, on plain Responses', async () => {
      nextMinute()
      const name = id()
      const limited = fetchLimiter(
        {
          store: ctx.store,
          limit: 3,
          windowMs: 60_000,
          identifier: name,
          standardHeaders: 'draft-7',
          message: { error: 'slow down' },
        },
        { clientAddress },
      )
      const start = clock.now()
      const seen: unknown[] = []
      for (let i = 0; i < 3; i++) {
        const r = request('203.0.113.9')
        const res = await limited(r, (req) => {
          seen.push(rateLimitOf(req))
          return new Response('ok')
        })
        expect(res.status).toBe(200)
        expect(await res.text()).toBe('ok')
        expect(res.headers.get('x-ratelimit-limit')).toBe('3')
        expect(res.headers.get('x-ratelimit-remaining')).toBe(String(2 - i))
        expect(res.headers.get('x-ratelimit-reset')).toBe(String((start + 60_000) / 1000))
        expect(res.headers.get('ratelimit-policy')).toBe('3;w=60')
        expect(res.headers.get('ratelimit')).toBe(`limit=3, remaining=${2 - i}, reset=60`)
        expect(res.headers.get('retry-after')).toBeNull()
      }
      expect(seen.map((info: any) => [info.limit, info.used, info.remaining, info.key])).toEqual([
        [3, 1, 2, '203.0.113.9'],
        [3, 2, 1, '203.0.113.9'],
        [3, 3, 0, '203.0.113.9'],
      ])
      clock.advance(15_000)
      const refused = await limited(request('203.0.113.9'), ok)
      expect(refused.status).toBe(429)
      expect(refused.headers.get('content-type')).toMatch(/^application\/json/)
      expect(await refused.json()).toEqual({ error: 'slow down' })
      expect(refused.headers.get('retry-after')).toBe('45')
      expect(refused.headers.get('ratelimit')).toBe('limit=3, remaining=0, reset=45')
      expect(refused.headers.get('x-ratelimit-remaining')).toBe('0')
      // draft-8: list fields, appended to what the handler's Response already holds
      const listed = fetchLimiter(
        { store: ctx.store, limit: 1, windowMs: 1000, identifier: id(), standardHeaders: 'draft-8' },
        { clientAddress },
      )
      const res = await listed(
        request('203.0.113.10'),
        () => new Response('ok', { headers: { RateLimit: '"other";r=5;t=1' } }),
      )
      expect(res.headers.get('ratelimit')).toMatch(/^"other";r=5;t=1, "fetch\d+"; r=0; t=1$/)
    })

    it('headers reach a Response whose own are immutable (a copy is answered), and a handler may answer the refusal', async () => {
      nextMinute()
      const limited = fetchLimiter(
        {
          store: ctx.store,
          limit: 1,
          windowMs: 10_000,
          identifier: id(),
          legacyHeaders: false,
          standardHeaders: 'draft-6',
          handler: (req: Request) => new Response(`no, ${req.headers.get('x-client-address')}`, { status: 418 }),
        },
        { clientAddress },
      )
      const redirect = Response.redirect('http://api.test/elsewhere', 302)
      expect(() => redirect.headers.set('x', 'y')).toThrow(TypeError)
      const res = await limited(request('192.0.2.50'), () => redirect)
      expect(res.status).toBe(302)
      expect(res.headers.get('location')).toBe('http://api.test/elsewhere')
      expect(res.headers.get('ratelimit-remaining')).toBe('0')
      expect(res.headers.get('x-ratelimit-limit')).toBeNull()
      const refused = await limited(request('192.0.2.50'), ok)
      expect(refused.status).toBe(418)
      expect(await refused.text()).toBe('no, 192.0.2.50')
      expect(refused.headers.get('retry-after')).toBe('10')
      expect(refused.headers.get('ratelimit-limit')).toBe('1')
    })

    it('refunds settle after the handler`s Response, by its status, with no Node response', async () => {
      nextMinute()
      const remaining = (limited: Limited, client: string) => async () =>
        (await limited[DOOR].getKey(client))?.totalHits ?? 0
      // skipSuccessfulRequests: successes are given back, failures stay counted
      const success = fetchLimiter(
        { store: ctx.store, limit: 2, windowMs: 60_000, identifier: id(), skipSuccessfulRequests: true },
        { clientAddress },
      )
      for (let i = 0; i < 10; i++) {
        expect((await success(request('192.0.2.60'), ok)).status).toBe(200)
        expect(await settled(remaining(success, '192.0.2.60'), 0)).toBe(0)
      }
      const failing: Handler = () => new Response('bad', { status: 500 })
      const statuses = []
      for (let i = 0; i < 4; i++) statuses.push((await success(request('192.0.2.60'), failing)).status)
      expect(statuses).toEqual([500, 500, 429, 429])
      // skipFailedRequests: a handler that throws failed (and its error reaches the caller)
      const failed = fetchLimiter(
        { store: ctx.store, limit: 2, windowMs: 60_000, identifier: id(), skipFailedRequests: true },
        { clientAddress },
      )
      for (let i = 0; i < 6; i++) {
        await expect(
          failed(request('192.0.2.61'), () => {
            throw new Error('boom')
          }),
        ).rejects.toThrow('boom')
        expect(await settled(remaining(failed, '192.0.2.61'), 0)).toBe(0)
      }
      expect((await failed(request('192.0.2.61'), ok)).status).toBe(200)
      expect((await failed(request('192.0.2.61'), ok)).status).toBe(200)
      expect((await failed(request('192.0.2.61'), ok)).status).toBe(429)
      // requestWasSuccessful (a promise) is asked with the Request and the reply, never a Node object
      const asked: unknown[] = []
      const judged = fetchLimiter(
        {
          store: ctx.store,
          limit: 1,
          windowMs: 60_000,
          identifier: id(),
          skipSuccessfulRequests: true,
          requestWasSuccessful: async (req: Request, reply: object) => {
            asked.push([req instanceof Request, reply instanceof FetchReply])
            return new URL(req.url).pathname === '/fine'
          },
        },
        { clientAddress },
      )
      for (let i = 0; i < 5; i++) {
        expect((await judged(request('192.0.2.62', '/fine'), ok)).status).toBe(200)
        expect(await settled(remaining(judged, '192.0.2.62'), 0)).toBe(0)
      }
      expect((await judged(request('192.0.2.62', '/other'), ok)).status).toBe(200)
      expect(await settled(remaining(judged, '192.0.2.62'), 1)).toBe(1)
      expect((await judged(request('192.0.2.62', '/fine'), ok)).status).toBe(429)
      // the refusal too: a door of one 'window' counts refusals, and gives them back as asked (as sluice/express)
      expect(asked.length).toBe(7)
      for (const a of asked) expect(a).toEqual([true, true])
    })

    it('keyGenerator and skip are asked with the Request and the reply, never a Node object', async () => {
      nextMinute()
      const keys: unknown[] = []
      const limited = fetchLimiter({
        store: ctx.store,
        limit: 1,
        windowMs: 60_000,
        identifier: id(),
        keyGenerator: (req: Request, reply: object) => {
          keys.push([req instanceof Request, reply instanceof FetchReply])
          return req.headers.get('authorization') ?? 'anonymous'
        },
        skip: (req: Request) => new URL(req.url).pathname === '/health',
      })
      const as = (user: string, path = '/') =>
        new Request(`http://api.test${path}`, { headers: { authorization: user } })
      expect((await limited(as('alice'), ok)).status).toBe(200)
      expect((await limited(as('alice'), ok)).status).toBe(429)
      expect((await limited(as('bob'), ok)).status).toBe(200)
      // skipped: not counted, no headers
      const health = await limited(as('alice', '/health'), ok)
      expect(health.status).toBe(200)
      expect(health.headers.get('x-ratelimit-limit')).toBeNull()
      expect(keys).toEqual([
        [true, true],
        [true, true],
        [true, true],
      ])
      // without a keyGenerator the Fetch API has no client address to key by: refused at setup
      expect(() => fetchLimiter({ store: ctx.store, limit: 1, windowMs: 1000 })).toThrow(
        expect.objectContaining({ code: 'ERR_INVALID_CONFIG' }),
      )
    })
  })
}
