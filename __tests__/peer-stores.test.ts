// SluiceStore behind the peers' own middleware (issue 40, DESIGN §10): express-rate-limit 8 and
// hono-rate-limiter keep their middleware and get an atomic, cluster-aware store. Several apps on
// stores of one prefix stand for several processes; the store's contract is checked as the peers'
// own store tests check theirs (increment, decrement, get, resetKey, the window's end).
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import { afterEach, describe, expect, it } from 'vitest'
import express from 'express'
import { rateLimit as erl, type Store as ErlStore } from 'express-rate-limit'
import { Hono } from 'hono'
import { serve as serveHono } from '@hono/node-server'
import { rateLimiter as hrl } from 'hono-rate-limiter'
import { ManualClock, type Store } from '../lib/entries/index.js'
import { SluiceStore } from '../lib/entries/express.js'
import { SluiceStore as HonoSluiceStore } from '../lib/entries/hono.js'
import { STORE_KINDS, makeStore, makeStores } from './helpers/stores.js'
import { get, listen } from './helpers/http.js'

const T0 = 1_800_000_000_000

describe.each(STORE_KINDS)('issue-40-sluice-store on %s', (kind) => {
  const open: { close(): Promise<unknown> }[] = []
  afterEach(async () => {
    for (const o of open.splice(0).reverse()) await o.close()
  })

  it("the Store contract: increment, decrement, get, resetKey, the window's end, prefixes apart", async () => {
    const clock = new ManualClock(T0)
    const store = await makeStore(kind, { clock })
    open.push(store)
    const s = new SluiceStore({ store, prefix: 'login' })
    s.init({ windowMs: 60_000 })
    expect([s.prefix, s.localKeys]).toEqual(['login', false])
    expect(await s.get('203.0.113.9')).toBeUndefined()
    expect(await s.increment('203.0.113.9')).toEqual({ totalHits: 1, resetTime: new Date(T0 + 60_000) })
    clock.advance(10_000)
    // the window opened at the first hit: its end does not move
    expect(await s.increment('203.0.113.9')).toEqual({ totalHits: 2, resetTime: new Date(T0 + 60_000) })
    expect(await s.get('203.0.113.9')).toEqual({ totalHits: 2, resetTime: new Date(T0 + 60_000) })
    await s.decrement('203.0.113.9')
    expect((await s.get('203.0.113.9'))?.totalHits).toBe(1)
    await s.decrement('203.0.113.9')
    await s.decrement('203.0.113.9') // never below 0
    expect(await s.get('203.0.113.9')).toBeUndefined()
    expect((await s.increment('203.0.113.9')).totalHits).toBe(1)
    // another limiter's prefix counts apart; hostile keys are data
    const other = new SluiceStore({ store, prefix: 'api' })
    other.init({ windowMs: 1000 })
    expect((await other.increment('203.0.113.9')).totalHits).toBe(1)
    for (const key of ['a_b', 'x}{y', '%7B', 'k'.repeat(5000), '']) {
      expect((await other.increment(key)).totalHits).toBe(1)
      expect((await other.increment(key)).totalHits).toBe(2)
    }
    // resetKey forgets; after windowMs a new window opens
    await s.resetKey('203.0.113.9')
    expect(await s.get('203.0.113.9')).toBeUndefined()
    await s.increment('u')
    clock.advance(60_000)
    expect(await s.increment('u')).toEqual({ totalHits: 1, resetTime: new Date(T0 + 130_000) })
    // bad input at setup
    expect(() => new SluiceStore({} as any)).toThrow(expect.objectContaining({ code: 'ERR_INVALID_CONFIG' }))
    expect(() => new SluiceStore({ store, prefix: '' })).toThrow(
      expect.objectContaining({ code: 'ERR_INVALID_CONFIG' }),
    )
    expect(() => s.init({ windowMs: 0 })).toThrow(expect.objectContaining({ code: 'ERR_INVALID_CONFIG' }))
  })

  it('express-rate-limit 8: 4 processes x 50 concurrent requests at a limit of 5 admit exactly 5; skipFailedRequests decrements', async () => {
    const stores: Store[] = await makeStores(kind, 4, new ManualClock(T0))
    for (const s of new Set(stores)) open.push(s)
    const urls: string[] = []
    for (const store of stores) {
      const app = express()
      // typed as express-rate-limit's Store: the types agree (checked by tsc with the tests)
      const erlStore: ErlStore = new SluiceStore({ store, prefix: 'erl-shared' })
      app.use(
        erl({
          store: erlStore,
          limit: 5,
          windowMs: 60_000,
          keyGenerator: () => 'one-client',
          skipFailedRequests: true,
          validate: false,
        }),
      )
      app.get('/', (_req, res) => res.send('ok'))
      app.get('/fail', (_req, res) => res.status(500).send('failed'))
      const served = await listen(http.createServer(app))
      open.push(served)
      urls.push(served.url)
    }
    // failed requests are given back (express-rate-limit calls decrement): they never use the limit up
    for (let i = 0; i < 8; i++) expect((await get(`${urls[i % 4]}/fail`)).status).toBe(500)
    const codes = await Promise.all(Array.from({ length: 200 }, (_, i) => get(`${urls[i % 4]}/`).then((r) => r.status)))
    expect(codes.filter((c) => c === 200)).toHaveLength(5)
    expect(codes.filter((c) => c === 429)).toHaveLength(195)
  })

  it('hono-rate-limiter: 2 processes x 20 concurrent requests at a limit of 5 admit exactly 5', async () => {
    const stores: Store[] = await makeStores(kind, 2, new ManualClock(T0))
    for (const s of new Set(stores)) open.push(s)
    const urls: string[] = []
    for (const store of stores) {
      const app = new Hono()
      app.use(
        hrl({
          store: new HonoSluiceStore({ store, prefix: 'hrl-shared' }) as any,
          limit: 5,
          windowMs: 60_000,
          keyGenerator: () => 'one-client',
        }),
      )
      app.get('/', (c) => c.text('ok'))
      const server = serveHono({ fetch: app.fetch, port: 0, hostname: '127.0.0.1' }) as http.Server
      await new Promise((resolve) => server.once('listening', resolve))
      const { port } = server.address() as AddressInfo
      open.push({ close: () => new Promise<void>((r) => (server.closeAllConnections(), server.close(() => r()))) })
      urls.push(`http://127.0.0.1:${port}`)
    }
    const codes = await Promise.all(Array.from({ length: 40 }, (_, i) => get(`${urls[i % 2]}/`).then((r) => r.status)))
    expect(codes.filter((c) => c === 200)).toHaveLength(5)
  })
})
