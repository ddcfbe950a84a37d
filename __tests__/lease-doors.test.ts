// Lease mode on the HTTP doors (DESIGN §11): each client's counter leases. Three Express apps on
// three RedisStores (three processes) on one ManualClock, the default key (the client's address),
// every request counted: admitted never above the limit in any window, for the fixed window,
// the window and the leaky bucket; the headers' remaining never above the limit; a counter the
// cache drops gives back what it holds; what the door refuses to lease with (ERR_INVALID_CONFIG).
import { afterEach, describe, expect, it } from 'vitest'
import { ManualClock, MemoryStore, type Store } from '../lib/entries/index.js'
import { rateLimit } from '../lib/entries/express.js'
import { REDIS_KINDS, makeStores } from './helpers/stores.js'
import { serve, type Served } from './helpers/http.js'

const T0 = 1_800_000_000_000

describe('lease on a door: what it takes', () => {
  it('one window of fixed, window or leaky, the door making its limiters, no ban', () => {
    const store = new MemoryStore()
    const bad: [object, RegExp][] = [
      [
        {
          limits: [
            { limit: 5, windowMs: 1000 },
            { limit: 50, windowMs: 60_000 },
          ],
        },
        /one window/,
      ],
      [{ limit: 5, windowMs: 1000, algorithm: 'sliding' }, /lease takes algorithm 'fixed', 'window' or 'leaky'/],
      [{ limit: 5, windowMs: 1000, ban: { after: 3, withinMs: 1000, forMs: 1000 } }, /not taken with ban/],
      [{ limit: 5, windowMs: 1000, lease: { maxTokens: 0 } }, /maxTokens/],
    ]
    for (const [o, message] of bad) {
      expect(() => rateLimit({ store, lease: true, ...o } as any)).toThrow(message)
    }
    expect(() => rateLimit({ store, limit: 5, windowMs: 1000, lease: { maxTokens: 50, maxAgeMs: 10 } })).not.toThrow()
  })
})

describe.each(REDIS_KINDS)('issue-41-lease-doors on %s', (redis) => {
  const open: (Store | Served)[] = []
  afterEach(async () => {
    for (const o of open.splice(0).reverse()) await o.close()
  })

  it.each(['fixed', 'window', 'leaky'])(
    '%s, limit 20 per second, 3 processes x 16 concurrent requests a round: admitted never above the limit',
    async (algorithm) => {
      const clock = new ManualClock(T0)
      const stores = await makeStores(redis, 3, clock)
      open.push(...stores)
      const apps = []
      for (const store of stores) {
        const app = await serve('express5', {
          store,
          limit: 20,
          windowMs: 1000,
          algorithm,
          lease: true,
          standardHeaders: 'draft-7',
        })
        open.push(app)
        apps.push(app)
      }
      const admitted: number[] = []
      for (let round = 0; round < 60; round++) {
        const answers = await Promise.all(apps.flatMap((a) => Array.from({ length: 16 }, () => fetch(`${a.url}/`))))
        for (const res of answers) {
          const remaining = Number(/remaining=(\d+)/.exec(res.headers.get('ratelimit') ?? '')?.[1])
          expect(remaining).toBeLessThanOrEqual(20)
          if (res.status === 200) admitted.push(clock.now())
          else expect(res.status).toBe(429)
          await res.arrayBuffer()
        }
        clock.advance(50)
      }
      if (algorithm === 'fixed') {
        const per = new Map<number, number>()
        for (const t of admitted) per.set(Math.floor(t / 1000), (per.get(Math.floor(t / 1000)) ?? 0) + 1)
        for (const [, n] of per) expect(n).toBeLessThanOrEqual(20)
        expect(Math.max(...per.values())).toBe(20)
      } else if (algorithm === 'window') {
        let end = -Infinity
        let n = 0
        for (const t of admitted) {
          if (t >= end) [end, n] = [t + 1000, 0]
          n++
          expect(n).toBeLessThanOrEqual(20)
        }
      } else {
        admitted.forEach((t, i) => expect(i + 1).toBeLessThanOrEqual(20 + ((t - T0) * 20) / 1000))
      }
      expect(admitted.length).toBeGreaterThan(40)
    },
    30_000,
  )

  it('a counter the cache drops gives back what its lease holds', async () => {
    const clock = new ManualClock(T0)
    const [a, b] = await makeStores(redis, 2, clock)
    open.push(a, b)
    const lease = { maxTokens: 10, maxAgeMs: 60_000 }
    // a cache of one counter: a second key drops the first
    const keyGenerator = (req: any) => req.headers['x-key']
    const common = { limit: 100, windowMs: 3_600_000, lease, keyGenerator }
    const appA = await serve('express5', { store: a, cacheBytes: 1500, ...common })
    open.push(appA)
    const appB = await serve('express5', { store: b, ...common })
    open.push(appB)
    const get = (app: Served, key: string) => fetch(`${app.url}/`, { headers: { 'x-key': key } }).then((r) => r.status)
    expect(await get(appA, 'one')).toBe(200) // a holds 9 more of 'one'
    expect(await get(appA, 'two')).toBe(200) // 'one' dropped: its 9 go back
    await new Promise((r) => setTimeout(r, 20))
    let n = 0
    for (let i = 0; i < 120; i++) if ((await get(appB, 'one')) === 200) n++
    expect(n).toBe(99)
  })
})
