// store.rules applied to the HTTP doors (DESIGN §9): by the door's identifier, a client key or a
// prefix of keys; deny answers 403 with no store call, allow lets through uncharged, an override
// is the key's limit, shadow mode sends the headers as usual and no 429. Each framework for real.
import { afterEach, describe, expect, it } from 'vitest'
import { Registry } from 'prom-client'
import { ManualClock, type Store } from '../lib/entries/index.js'
import { collectMetrics } from '../lib/entries/metrics.js'
import { STORE_KINDS, makeStore } from './helpers/stores.js'
import { FRAMEWORKS, get, serve, type Served } from './helpers/http.js'

const T0 = 1_800_000_000_000
type Rules = {
  set(target: object, rule: object, o?: object): Promise<void>
  delete(target: object): Promise<boolean>
}
const rulesOf = (s: Store) => (s as unknown as { rules: Rules }).rules

describe.each(STORE_KINDS.filter((k) => k !== 'cluster'))('issue-39-rules-doors on %s', (kind) => {
  const open: { close(): Promise<unknown> }[] = []
  afterEach(async () => {
    for (const o of open.splice(0).reverse()) await o.close()
  })

  it.each(FRAMEWORKS)('%s: a key denied, a prefix allowed, a key lowered, the door shadowed', async (framework) => {
    const clock = new ManualClock(T0)
    const store = await makeStore(kind, { clock })
    open.push(store)
    const identifier = `api-${framework}`
    const served: Served = await serve(framework, {
      store,
      identifier,
      limit: 3,
      windowMs: 60_000,
      standardHeaders: 'draft-6',
      keyGenerator: (req: any) => String(req.headers['x-user'] ?? 'anon'),
    })
    open.push(served)
    const hit = async (user: string, n: number) => {
      const codes: number[] = []
      for (let i = 0; i < n; i++) codes.push((await get(`${served.url}/`, { 'x-user': user })).status)
      return codes
    }
    // no rule: 3 of 5
    expect(await hit('alice@example.com', 5)).toEqual([200, 200, 200, 429, 429])
    // denied: 403, no store call (a RedisStore's batcher counts none)
    await rulesOf(store).set({ door: identifier, key: 'mallory@example.com' }, { access: 'deny' })
    const batching = (store as unknown as { batching?: { calls: number } }).batching
    const calls = batching?.calls
    expect(await hit('mallory@example.com', 3)).toEqual([403, 403, 403])
    expect(batching?.calls).toBe(calls)
    // denied, not rate limited: no limit described
    const denied = await get(`${served.url}/`, { 'x-user': 'mallory@example.com' })
    expect([denied.status, denied.header('ratelimit-limit'), denied.header('retry-after')]).toEqual([
      403,
      undefined,
      undefined,
    ])
    // allowed by prefix: never limited, nothing charged
    await rulesOf(store).set({ door: identifier, keyPrefix: 'ops:' }, { access: 'allow' })
    expect(await hit('ops:deploy-bot', 6)).toEqual([200, 200, 200, 200, 200, 200])
    // one key lowered to 1 (its own window), another key keeps the door's 3
    await rulesOf(store).set({ door: identifier, key: 'bob' }, { limit: 1 })
    expect(await hit('bob', 3)).toEqual([200, 429, 429])
    const r = await get(`${served.url}/`, { 'x-user': 'bob' })
    expect(r.header('ratelimit-limit')).toBe('1')
    expect(await hit('carol', 4)).toEqual([200, 200, 200, 429])
    // the whole door in shadow: the over-limit key goes through, its headers say 0 remaining
    await rulesOf(store).set({ door: identifier }, { mode: 'shadow' })
    const shadowed = await get(`${served.url}/`, { 'x-user': 'alice@example.com' })
    expect(shadowed.status).toBe(200)
    expect(shadowed.header('ratelimit-remaining')).toBe('0')
    expect(shadowed.header('retry-after')).toBeUndefined()
    // a deny beats the door's shadow rule
    expect(await hit('mallory@example.com', 1)).toEqual([403])
    // gone: enforced again
    await rulesOf(store).delete({ door: identifier })
    expect(await hit('alice@example.com', 1)).toEqual([429])
  })

  it.each(['fixed', 'window', 'leaky', 'sliding'])(
    "a kind's rules never reach a door's counters of one client (algorithm %s): the door's own rules do",
    async (algorithm) => {
      const clock = new ManualClock(T0)
      const store = await makeStore(kind, { clock })
      open.push(store)
      for (const k of ['bucket', 'window', 'leaky', 'sliding']) {
        await rulesOf(store).set({ kind: k, prefix: '' }, { access: 'deny' })
      }
      const served = await serve('express5', {
        store,
        identifier: `kinds-${algorithm}`,
        limit: 2,
        windowMs: 60_000,
        algorithm,
      })
      open.push(served)
      const codes: number[] = []
      for (let i = 0; i < 3; i++) codes.push((await get(`${served.url}/`)).status)
      expect(codes).toEqual([200, 200, 429])
    },
  )

  it("the door's own mode: 'shadow' lets through what enforcing refuses, counted", async () => {
    const clock = new ManualClock(T0)
    const store = await makeStore(kind, { clock })
    open.push(store)
    const served = await serve('express5', {
      store,
      identifier: 'shadow-door',
      limit: 2,
      windowMs: 60_000,
      mode: 'shadow',
    })
    open.push(served)
    const codes: number[] = []
    for (let i = 0; i < 5; i++) codes.push((await get(`${served.url}/`)).status)
    expect(codes).toEqual([200, 200, 200, 200, 200])
    await (store as any)._flushStats?.()
    const info = await (store as any)._statsOf('door', 'shadow-door')
    expect(info).toMatchObject({ admitted: 5, refused: 0, shadowRefused: 3 })
    // and in the metrics: sluice_shadow_refused_total of the door
    const registry = new Registry()
    const m = collectMetrics(store, { registry })
    try {
      const text = await registry.metrics()
      expect(text).toContain('sluice_shadow_refused_total{limiter="shadow-door",kind="door"} 3')
      expect(text).toContain('sluice_denied_total{limiter="shadow-door",kind="door"} 0')
    } finally {
      m.close()
    }
  })
})
