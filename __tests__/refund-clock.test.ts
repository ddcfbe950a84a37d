// Issue 24, item 9: a refund after a clock step freed room in the next window. `_refund`
// measured elapsed time with Date.now(): with the process's wall clock stepped back an hour, a
// late skipFailedRequests refund of a limit-3 window landed in the next window, which then
// admitted 4. A refund is now tied to the window the server charged: its resetAfterMs against
// time elapsed on a monotonic clock. The window here is the Redis server's own (no
// ManualClock: the step is of the process's wall clock), so the test waits out one real second.
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest'
import express from 'express'
import { Redis } from 'ioredis'
import type { AddressInfo } from 'node:net'
import type { Server } from 'node:http'
import { RedisStore } from '../lib/entries/index.js'
import { rateLimit } from '../lib/entries/express.js'
import { freshPrefix, redisUrl } from './helpers/stores.js'

describe('issue-24-refund-clock-step', () => {
  let store: RedisStore
  let server: Server
  let url: string
  let release: () => void = () => {}
  beforeAll(async () => {
    store = await RedisStore.connect({ url: redisUrl(), keyPrefix: freshPrefix() })
    const app = express()
    app.use(rateLimit({ store, windowMs: 1000, limit: 3, skipFailedRequests: true, identifier: 'refund-step' }))
    app.get('/slow-fail', (_req, res) => {
      release = () => res.status(500).send('failed late')
    })
    app.get('/', (_req, res) => res.send('ok'))
    server = app.listen(0, '127.0.0.1')
    await new Promise((r) => server.once('listening', r))
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  })
  afterAll(async () => {
    vi.restoreAllMocks()
    await new Promise((r) => server.close(r))
    await store.close()
  })

  it('a late refund after the wall clock stepped back an hour frees nothing in the next window', async () => {
    // start just after a second begins on the server's clock (buckets are aligned to it), so
    // the three charges share one window
    const raw = new Redis(redisUrl())
    const [, us] = await raw.time()
    raw.disconnect()
    await new Promise((r) => setTimeout(r, 1000 - Number(us) / 1000 + 20))
    const slow = fetch(`${url}/slow-fail`)
    await new Promise((r) => setTimeout(r, 50))
    expect((await fetch(url)).status).toBe(200)
    expect((await fetch(url)).status).toBe(200)
    expect((await fetch(url)).status).toBe(429)
    // the wall clock steps back an hour; the window charged ends (the server's clock)
    const realNow = Date.now.bind(Date)
    vi.spyOn(Date, 'now').mockImplementation(() => realNow() - 3_600_000)
    await new Promise((r) => setTimeout(r, 1100))
    const next = [(await fetch(url)).status, (await fetch(url)).status, (await fetch(url)).status]
    expect(next).toEqual([200, 200, 200])
    release() // fails now: its refund must not land in this window
    expect((await slow).status).toBe(500)
    await new Promise((r) => setTimeout(r, 50))
    expect((await fetch(url)).status).toBe(429)
  }, 20_000)
})
