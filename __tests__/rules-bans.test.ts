// The doors' `ban: { after, withinMs, forMs }` (issue 39, DESIGN §9): a client refused `after`
// times within `withinMs`, counted fleet-wide, is denied (403) for `forMs` by every process;
// the refusals are tallied inside the decision's own script call (counted with MONITOR: no
// extra round trip on fixed, window and leaky doors); bans live in a bounded table of their
// own, never in the operators' rules or history; `rules.unban` lifts one everywhere.
// Two stores on one prefix stand for two processes, each serving a real framework.
import { afterEach, describe, expect, it } from 'vitest'
import { ManualClock, type Store } from '../lib/entries/index.js'
import { rateLimit } from '../lib/entries/express.js'
import { STORE_KINDS, makeStore, makeStores, rawClient, redisUrl } from './helpers/stores.js'
import { get, serve, type Served } from './helpers/http.js'
import { args, monitor } from './helpers/monitor.js'

const T0 = 1_800_000_000_000
type Rule = { target: { door?: string; key?: string }; access?: string; expiresAt?: number }
type Rules = {
  set(target: object, rule: object, o?: object): Promise<void>
  list(): Promise<Rule[]>
  bans(): Promise<Rule[]>
  history(): Promise<unknown[]>
  unban(target: object): Promise<boolean>
  _forDoorKey(door: string, key: string): { rule: { access?: string } } | undefined
  _table: { _maxBans: number }
}
const rulesOf = (s: Store) => (s as unknown as { rules: Rules }).rules

/** Waits (real time: a message on the rules' channel) until `ok()`, at most 3 s. */
async function until(ok: () => boolean) {
  const end = Date.now() + 3000
  while (!ok()) {
    if (Date.now() > end) throw new Error('not propagated within 3 s')
    await new Promise((r) => setTimeout(r, 10))
  }
}
const banned = (s: Store, door: string, key: string) => rulesOf(s)._forDoorKey(door, key)?.rule.access === 'deny'

const options = (store: Store, extra: object = {}) => ({
  store,
  identifier: 'login',
  limit: 2,
  windowMs: 60_000,
  keyGenerator: (req: any) => String(req.headers['x-user'] ?? 'anon'),
  ban: { after: 3, withinMs: 60_000, forMs: 600_000 },
  ...extra,
})

describe.each(STORE_KINDS)('issue-39-rules-bans on %s', (kind) => {
  const open: { close(): Promise<unknown> }[] = []
  afterEach(async () => {
    for (const o of open.splice(0).reverse()) await o.close()
  })

  it('a client refused `after` times is banned in every process; others go on; the ban ends; unban lifts it', async () => {
    const clock = new ManualClock(T0)
    const [a, b] = await makeStores(kind, 2, clock)
    open.push(a, b)
    // one process on Express, the other on Fastify: one door, its counts and bans shared
    const sa: Served = await serve('express5', options(a))
    const sb: Served = await serve('fastify', options(b))
    open.push(sa, sb)
    const hit = async (s: Served, user: string) => (await get(`${s.url}/`, { 'x-user': user })).status
    const seq = async (user: string, servers: Served[]) => {
      const out: number[] = []
      for (const s of servers) out.push(await hit(s, user))
      return out
    }
    // 2 admitted, then refusals counted across both processes: the third is the ban
    expect(await seq('alice', [sa, sb, sa, sb, sa])).toEqual([200, 200, 429, 429, 403])
    await until(() => banned(b, 'login', 'alice'))
    const denied = await get(`${sb.url}/`, { 'x-user': 'alice' })
    expect([denied.status, denied.header('retry-after'), denied.header('x-ratelimit-limit')]).toEqual([
      403,
      undefined,
      undefined,
    ])
    expect(await seq('alice', [sa, sb])).toEqual([403, 403])
    expect(await seq('bob', [sa, sb, sa])).toEqual([200, 200, 429])
    // the bans: listed apart, never among the operators' rules nor in their history
    for (const s of [a, b]) {
      expect(await rulesOf(s).bans()).toEqual([
        { target: { door: 'login', key: 'alice' }, access: 'deny', expiresAt: T0 + 600_000 },
      ])
      expect(await rulesOf(s).list()).toEqual([])
      expect(await rulesOf(s).history()).toEqual([])
    }
    // forMs later (the store's clock) the ban is over everywhere, the windows too
    clock.advance(600_001)
    expect(await seq('alice', [sa, sb])).toEqual([200, 200])
    expect(await rulesOf(a).bans()).toEqual([])
    // banned again (each `after`-th refusal bans), then lifted by an operator in every process
    expect(await seq('alice', [sa, sb, sa])).toEqual([429, 429, 403])
    await until(() => banned(b, 'login', 'alice'))
    expect(await rulesOf(b).unban({ door: 'login', key: 'alice' })).toBe(true)
    await until(() => !banned(a, 'login', 'alice'))
    expect(await rulesOf(a).unban({ door: 'login', key: 'alice' })).toBe(false)
    // lifted: refused as usual, and banned again only at the next `after` refusals
    expect(await seq('alice', [sa, sb, sa])).toEqual([429, 429, 403])
  })

  it.each(['fixed', 'window', 'leaky', 'sliding', 'sliding-counter', 'gcra'])(
    'algorithm %s: the second refusal bans (after 2)',
    async (algorithm) => {
      const clock = new ManualClock(T0)
      const store = await makeStore(kind, { clock })
      open.push(store)
      const one = await serve(
        'express5',
        options(store, {
          identifier: `a-${algorithm}`,
          limit: 1,
          algorithm,
          ban: { after: 2, withinMs: 60_000, forMs: 60_000 },
        }),
      )
      open.push(one)
      const codes: number[] = []
      for (let i = 0; i < 6; i++) codes.push((await get(`${one.url}/`, { 'x-user': 'c' })).status)
      // admitted as the algorithm admits (gcra: a burst of 2), then one 429 and the ban
      const first = codes.indexOf(429)
      expect(first).toBeGreaterThan(0)
      expect(codes.slice(0, first).every((c) => c === 200)).toBe(true)
      expect(codes.slice(first)).toEqual([429, ...Array(5 - first).fill(403)])
    },
  )

  it('a door of two windows: a refusal by either is tallied in the same call', async () => {
    const clock = new ManualClock(T0)
    const store = await makeStore(kind, { clock })
    open.push(store)
    const limits = [
      { limit: 1, windowMs: 1_000 },
      { limit: 5, windowMs: 60_000 },
    ]
    const s = await serve('express5', {
      store,
      identifier: 'two',
      limits,
      keyGenerator: () => 'k',
      ban: { after: 2, withinMs: 60_000, forMs: 60_000 },
    })
    open.push(s)
    const codes: number[] = []
    for (let i = 0; i < 3; i++) codes.push((await get(`${s.url}/`)).status)
    expect(codes).toEqual([200, 429, 403])
  })

  it('bans live in a bounded table of their own: a flood of clients never crowds out an operator rule', async () => {
    const clock = new ManualClock(T0)
    const [a, b] = await makeStores(kind, 2, clock)
    open.push(a, b)
    for (const s of [a, b]) rulesOf(s)._table._maxBans = 3
    await rulesOf(a).set({ door: 'login', key: 'vip' }, { access: 'allow', note: 'the operator' })
    const s = await serve('express5', options(a, { limit: 1, ban: { after: 1, withinMs: 60_000, forMs: 60_000 } }))
    open.push(s)
    for (let i = 0; i < 6; i++) {
      clock.advance(1)
      const user = `flood-${i}`
      expect([
        (await get(`${s.url}/`, { 'x-user': user })).status,
        (await get(`${s.url}/`, { 'x-user': user })).status,
      ]).toEqual([200, 403])
    }
    const kept = ['flood-3', 'flood-4', 'flood-5']
    await until(() => kept.every((k) => banned(b, 'login', k)))
    for (const st of [a, b]) {
      expect((await rulesOf(st).bans()).map((r) => r.target.key).sort()).toEqual(kept)
      expect((await rulesOf(st).list()).map((r) => r.target.key)).toEqual(['vip'])
      expect(await rulesOf(st).history()).toHaveLength(1)
    }
    if (kind !== 'memory') {
      const raw = rawClient(kind)
      try {
        const prefix = (a as unknown as { keyPrefix: string }).keyPrefix
        expect(await raw.hlen(`${prefix}:rules:{rules}:bans`)).toBe(3)
        expect(await raw.pttl(`${prefix}:rules:{rules}:bans`)).toBeGreaterThan(0)
      } finally {
        raw.disconnect()
      }
    }
    // the operator's allow still applies
    expect((await get(`${s.url}/`, { 'x-user': 'vip' })).status).toBe(200)
  })

  it('a door in shadow mode never bans: its refusals are let through', async () => {
    const store = await makeStore(kind, { clock: new ManualClock(T0) })
    open.push(store)
    const s = await serve(
      'express5',
      options(store, { mode: 'shadow', ban: { after: 1, withinMs: 60_000, forMs: 60_000 } }),
    )
    open.push(s)
    const codes: number[] = []
    for (let i = 0; i < 4; i++) codes.push((await get(`${s.url}/`, { 'x-user': 'x' })).status)
    expect(codes).toEqual([200, 200, 200, 200])
    expect(await rulesOf(store).bans()).toEqual([])
  })
})

describe("issue-39-rules-bans: the tally is in the decision's own script call", () => {
  it.each([
    ['window', 1],
    ['fixed', 1],
    ['leaky', 1],
    ['sliding', 2],
  ])('algorithm %s: %i script call(s) per refused request', async (algorithm, perRefusal) => {
    const store = await makeStore('redis')
    const port = Number(new URL(redisUrl()).port)
    const identifier = `rt-${algorithm}`
    const counted = async (ban: object | undefined, user: string) => {
      const s = await serve('express5', options(store, { identifier, limit: 1, algorithm, ban }))
      const prefix = (store as unknown as { keyPrefix: string }).keyPrefix
      try {
        // the scripts loaded first (a server that lacks one answers NOSCRIPT, then EVAL: two lines)
        for (let i = 0; i < 3; i++) await get(`${s.url}/`, { 'x-user': `warm-${user}` })
        const m = await monitor(port)
        for (let i = 0; i < 6; i++) await get(`${s.url}/`, { 'x-user': user })
        const lines = await m.stop()
        // script calls on this client's keys (its counters and its tally)
        const mine = (x: string) => x.startsWith(`${prefix}:`) && x.includes(`_${user}}`)
        return lines.map(args).filter((a) => /^EVAL/i.test(a[0]) && a.some(mine)).length
      } finally {
        await s.close()
      }
    }
    try {
      const plain = await counted(undefined, 'plain')
      const tallied = await counted({ after: 100, withinMs: 60_000, forMs: 60_000 }, 'tallied')
      expect(plain).toBe(6)
      expect(tallied).toBe(1 + 5 * perRefusal)
    } finally {
      await store.close()
    }
  })

  it('bad ban options are ERR_INVALID_CONFIG at setup', async () => {
    const store = await makeStore('memory')
    for (const ban of [
      3,
      { after: 0, withinMs: 1, forMs: 1 },
      { after: 1, withinMs: 0, forMs: 1 },
      { after: 1, withinMs: 1 },
      { after: 1, withinMs: 1, forMs: 1, for: 1 },
    ]) {
      expect(() => rateLimit({ store, limit: 1, windowMs: 1000, ban } as any)).toThrow(
        expect.objectContaining({ code: 'ERR_INVALID_CONFIG' }),
      )
    }
    expect(() => rateLimit({ store, limiter: () => null, ban: { after: 1, withinMs: 1, forMs: 1 } } as any)).toThrow(
      expect.objectContaining({ code: 'ERR_INVALID_CONFIG' }),
    )
  })
})
