// QuotaLimiter: Sentry's sliding-window quotas (same granule arithmetic and grants) with an
// atomic checkAndUse, on every store with explicit timestamps or a ManualClock; then its bad
// inputs.
import { beforeAll, describe, expect, it } from 'vitest'
import {
  ManualClock,
  QuotaLimiter,
  SlidingWindowLimiter,
  type Quota,
  type RequestedQuota,
} from '../lib/entries/index.js'
import { STORE_KINDS, freshPrefix, keysUnder, makeStore, rawClient, useStore, REDIS_KINDS } from './helpers/stores.js'
import { codeOf } from './helpers/errors.js'

const T0 = 1_800_000_000_000

describe.each(STORE_KINDS)('QuotaLimiter on %s', (kind) => {
  const clock = new ManualClock(T0)
  const s = useStore(kind, { clock })
  const { raw, prefix } = s
  let limiter: QuotaLimiter
  beforeAll(() => {
    limiter = new QuotaLimiter(s.store)
  })

  let n = 0
  const p = () => `org:${n++}`
  const granted = (gs: { granted: number }[]) => gs.map((g) => g.granted)
  const keyCount = async () => (raw ? (await keysUnder(raw, prefix)).length : 0)

  it("charges the granule one step behind the timestamp and counts it for one window, as Sentry's arithmetic", async () => {
    const q: Quota = { windowSeconds: 10, granularitySeconds: 1, limit: 5 }
    const r = (requested: number): RequestedQuota[] => [{ prefix: 'arith', requested, quotas: [q] }]
    expect(granted(await limiter.checkAndUseQuotas(r(5), 100))).toEqual([5]) // granule 99
    expect(granted(await limiter.checkAndUseQuotas(r(1), 109))).toEqual([0]) // granules 99..108
    expect(granted(await limiter.checkAndUseQuotas(r(5), 110))).toEqual([5]) // granules 100..109
    // an hour in minutes: a charge at t counts until the minute granule leaves
    const hour: Quota = { windowSeconds: 3600, granularitySeconds: 60, limit: 1 }
    const h = [{ prefix: 'arith', requested: 1, quotas: [hour] }]
    expect(granted(await limiter.checkAndUseQuotas(h, 1000))).toEqual([1]) // granule 15
    expect(granted(await limiter.checkAndUseQuotas(h, 4559))).toEqual([0]) // granules 15..74
    expect(granted(await limiter.checkAndUseQuotas(h, 4560))).toEqual([1]) // granules 16..75
    // a float timestamp is truncated, like Sentry's int()
    expect((await limiter.checkWithinQuotas(h, 4560.99)).timestamp).toBe(4560)
  })

  it("an empty quota (limit 0) rejects every request, as Sentry's test_empty_quota, and writes nothing", async () => {
    const before = await keyCount()
    const quotas: Quota[] = [{ windowSeconds: 10, granularitySeconds: 1, limit: 0 }]
    const resp = await limiter.checkAndUseQuotas([{ prefix: 'foo', requested: 1, quotas }])
    expect(resp).toEqual([{ prefix: 'foo', granted: 0, reachedQuotas: quotas, degraded: false }])
    expect(resp[0].reachedQuotas[0]).toBe(quotas[0])
    // beside a quota with room, it still grants nothing; the other quota is not charged
    const room: Quota = { windowSeconds: 10, granularitySeconds: 1, limit: 5 }
    const both = await limiter.checkAndUseQuotas([{ prefix: 'foo2', requested: 3, quotas: [room, ...quotas] }], 100)
    expect(both.map((g) => [g.granted, g.reachedQuotas])).toEqual([[0, quotas]])
    expect(granted(await limiter.checkAndUseQuotas([{ prefix: 'foo2', requested: 5, quotas: [room] }], 100))).toEqual([
      5,
    ])
    if (raw) expect(await keyCount()).toBe(before + 1)
  })

  it('grants the minimum remaining and lists the reached quotas in quota order, as the same objects', async () => {
    const prefix1 = p()
    const small: Quota = { windowSeconds: 60, granularitySeconds: 10, limit: 3 }
    const big: Quota = { windowSeconds: 600, granularitySeconds: 60, limit: 100 }
    const tiny: Quota = { windowSeconds: 60, granularitySeconds: 60, limit: 2 }
    const requests = [{ prefix: prefix1, requested: 5, quotas: [big, small, tiny] }]
    const [g] = await limiter.checkAndUseQuotas(requests, 1000)
    expect(g.prefix).toBe(prefix1)
    expect(g.granted).toBe(2)
    expect(g.reachedQuotas).toEqual([small, tiny])
    expect(g.reachedQuotas[0]).toBe(small)
    const [again] = await limiter.checkAndUseQuotas(requests, 1000)
    expect(again.granted).toBe(0)
    expect(again.reachedQuotas).toEqual([small, tiny])
  })

  it('shares a prefixOverride quota between the requests of one call, accounted within the call', async () => {
    const org: Quota = { windowSeconds: 60, granularitySeconds: 10, limit: 5 }
    const global: Quota = { windowSeconds: 60, granularitySeconds: 10, limit: 7, prefixOverride: `g${n++}` }
    const requests = [
      { prefix: p(), requested: 4, quotas: [org, global] },
      { prefix: p(), requested: 4, quotas: [org, global] },
      { prefix: p(), requested: 4, quotas: [org, global] },
    ]
    const check = await limiter.checkWithinQuotas(requests, 2000)
    expect(check.timestamp).toBe(2000)
    expect(granted(check.grants)).toEqual([4, 3, 0])
    expect(check.grants[1].reachedQuotas).toEqual([global])
    expect(granted(await limiter.checkAndUseQuotas(requests, 2000))).toEqual([4, 3, 0])
    expect(granted(await limiter.checkAndUseQuotas(requests, 2000))).toEqual([0, 0, 0])
    // same prefix twice in one call: the second sees the first's grant too
    const same = { prefix: p(), requested: 3, quotas: [org] }
    expect(granted(await limiter.checkAndUseQuotas([same, same], 2000))).toEqual([3, 2])
  })

  it('check, work, then use: useQuotas charges the grants at the returned timestamp', async () => {
    clock.set(T0 + 123_456)
    const q: Quota = { windowSeconds: 300, granularitySeconds: 60, limit: 10 }
    const requests = [{ prefix: p(), requested: 6, quotas: [q] }]
    const { timestamp, grants } = await limiter.checkWithinQuotas(requests)
    expect(timestamp).toBe(Math.floor((T0 + 123_456) / 1000))
    expect(granted(grants)).toEqual([6])
    expect(granted((await limiter.checkWithinQuotas(requests, timestamp)).grants)).toEqual([6])
    await limiter.useQuotas(requests, grants, timestamp)
    expect(granted((await limiter.checkWithinQuotas(requests, timestamp)).grants)).toEqual([4])
    // use is unconditional: a second use over-spends (that is what the atomic call prevents)
    await limiter.useQuotas(requests, grants, timestamp)
    const over = await limiter.checkWithinQuotas(requests, timestamp)
    expect(granted(over.grants)).toEqual([0])
    expect(over.grants[0].reachedQuotas).toEqual([q])
  })

  it('writes nothing for a denied request or a request of 0', async () => {
    const q: Quota = { windowSeconds: 60, granularitySeconds: 60, limit: 1 }
    const name = p()
    const before = await keyCount()
    expect(await limiter.checkAndUseQuotas([{ prefix: name, requested: 0, quotas: [q] }], 5000)).toEqual([
      { prefix: name, granted: 0, reachedQuotas: [], degraded: false },
    ])
    expect(await keyCount()).toBe(before)
    await limiter.checkAndUseQuotas([{ prefix: name, requested: 1, quotas: [q] }], 5000)
    const after = await keyCount()
    expect(granted(await limiter.checkAndUseQuotas([{ prefix: name, requested: 1, quotas: [q] }], 5000))).toEqual([0])
    expect(await keyCount()).toBe(after)
    if (raw) expect(after).toBe(before + 1)
  })

  it('counts a fine-grained window exactly (an hour in seconds: every granule charged)', async () => {
    const q: Quota = { windowSeconds: 3600, granularitySeconds: 1, limit: 1_000_000 }
    const requests = [{ prefix: p(), requested: 2, quotas: [q] }]
    const t0 = 100_000
    const calls = kind === 'memory' ? 3600 : 900
    for (let i = 0; i < calls; i++) await limiter.checkAndUseQuotas(requests, t0 + i * (3600 / calls))
    const at = (t: number) =>
      limiter.checkWithinQuotas([{ ...requests[0], requested: 1_000_000 }], t).then((r) => r.grants[0].granted)
    const last = t0 + (calls - 1) * (3600 / calls)
    expect(await at(last)).toBe(1_000_000 - 2 * calls)
    // the last charge (granule last - 1) counts until its window has passed, and no longer
    expect(await at(last + 3599)).toBe(1_000_000 - 2)
    expect(await at(last + 3600)).toBe(1_000_000)
    // an older timestamp (within a window of the newest) sees exactly what was charged by then
    expect(await at(t0 + 1800)).toBe(1_000_000 - 2 * (calls / 2 + 1))
  })

  it('decides the calls of one tick in call order, each seeing the earlier ones', async () => {
    const org: Quota = { windowSeconds: 60, granularitySeconds: 10, limit: 10 }
    const global: Quota = { windowSeconds: 60, granularitySeconds: 10, limit: 12, prefixOverride: `g${n++}` }
    const a = p()
    const call = (requested: number) =>
      limiter.checkAndUseQuotas([{ prefix: a, requested, quotas: [org, global] }], 7000)
    const other = p()
    const results = await Promise.all([
      call(3),
      call(3),
      limiter.checkWithinQuotas([{ prefix: a, requested: 10, quotas: [org] }], 7000),
      call(3),
      limiter.checkAndUseQuotas([{ prefix: other, requested: 5, quotas: [org, global] }], 7000),
      call(3),
    ])
    const flat = results.map((r) => ('grants' in r ? r.grants[0].granted : r[0].granted))
    expect(flat).toEqual([3, 3, 4, 3, 3, 0])
  })

  it('returns an empty list for no requests without touching the store', async () => {
    expect(await limiter.checkAndUseQuotas([])).toEqual([])
    expect((await limiter.checkWithinQuotas([], 77)).grants).toEqual([])
    await limiter.useQuotas([], [], 77)
  })

  it('answers correctly when the requests of one call live on many hash slots', async () => {
    const org: Quota = { windowSeconds: 60, granularitySeconds: 10, limit: 3 }
    const global: Quota = { windowSeconds: 60, granularitySeconds: 10, limit: 20, prefixOverride: `g${n++}` }
    const requests = Array.from({ length: 10 }, () => ({ prefix: p(), requested: 4, quotas: [org, global] }))
    const first = await limiter.checkAndUseQuotas(requests, 9000)
    expect(granted(first)).toEqual([3, 3, 3, 3, 3, 3, 2, 0, 0, 0])
    expect(first[0].reachedQuotas).toEqual([org])
    expect(first[6].reachedQuotas).toEqual([org, global])
    expect(granted(await limiter.checkAndUseQuotas(requests, 9000))).toEqual(Array(10).fill(0))
    expect(granted((await limiter.checkWithinQuotas(requests, 9060)).grants)).toEqual([3, 3, 3, 3, 3, 3, 2, 0, 0, 0])
  })
})

describe.each(STORE_KINDS)('QuotaLimiter input validation on %s', (kind) => {
  const s = useStore(kind, { clock: new ManualClock(T0), after: 'empty' })
  let limiter: QuotaLimiter
  beforeAll(() => {
    limiter = new QuotaLimiter(s.store)
  })

  const good: Quota = { windowSeconds: 60, granularitySeconds: 10, limit: 5 }
  const both = (requests: unknown, code: string) =>
    Promise.all([
      expect(limiter.checkAndUseQuotas(requests as never, 100)).rejects.toMatchObject({ code }),
      expect(limiter.checkWithinQuotas(requests as never, 100)).rejects.toMatchObject({ code }),
    ])

  it('rejects bad quotas and prefixes with ERR_INVALID_CONFIG', async () => {
    const quotas: unknown[] = [
      { ...good, granularitySeconds: 7 },
      { ...good, granularitySeconds: 0 },
      { ...good, granularitySeconds: 120 },
      { ...good, windowSeconds: 0 },
      { ...good, windowSeconds: 1.5 },
      { ...good, limit: -3 },
      { ...good, limit: 2.5 },
      { ...good, limit: '5' },
      { ...good, prefixOverride: 'a{b}' },
      { ...good, prefixOverride: '' },
      { ...good, window_seconds: 60 },
      null,
    ]
    for (const q of quotas) await both([{ prefix: 'a', requested: 1, quotas: [q] }], 'ERR_INVALID_CONFIG')
    for (const prefix of ['{a}', 'a}', '', 'a\nb', 5]) {
      await both([{ prefix, requested: 1, quotas: [good] }], 'ERR_INVALID_CONFIG')
    }
    await both([{ prefix: 'a', requested: 1, quotas: [] }], 'ERR_INVALID_CONFIG')
    // sparse arrays: a hole is checked like any other value, with a code
    // eslint-disable-next-line no-sparse-arrays
    await both([{ prefix: 'a', requested: 1, quotas: [good, , good] }], 'ERR_INVALID_CONFIG')
    // eslint-disable-next-line no-sparse-arrays
    await both(
      [{ prefix: 'a', requested: 1, quotas: [good] }, , { prefix: 'b', requested: 1, quotas: [good] }],
      'ERR_INVALID_ARGUMENT',
    )
    expect(codeOf(() => new QuotaLimiter({} as never))).toBe('ERR_INVALID_CONFIG')
  })

  it('rejects bad requests, timestamps and grants with ERR_INVALID_ARGUMENT', async () => {
    for (const requested of [-2, 1.5, NaN, '1', 2e12]) {
      await both([{ prefix: 'a', requested, quotas: [good] }], 'ERR_INVALID_ARGUMENT')
    }
    await both('nope', 'ERR_INVALID_ARGUMENT')
    await both([null], 'ERR_INVALID_ARGUMENT')
    const requests = [{ prefix: 'a', requested: 1, quotas: [good] }]
    for (const t of [-1, NaN, Infinity, '100', 1e12]) {
      await expect(limiter.checkAndUseQuotas(requests, t as never)).rejects.toMatchObject({
        code: 'ERR_INVALID_ARGUMENT',
      })
    }
    const grant = { prefix: 'a', granted: 1, reachedQuotas: [] }
    for (const [rs, gs, t] of [
      [requests, [grant], undefined],
      [requests, [], 100],
      [requests, [{ ...grant, prefix: 'b' }], 100],
      [requests, [{ ...grant, granted: -1 }], 100],
      [requests, [{ ...grant, granted: 0.5 }], 100],
      // more than was requested: a request of 1 must not be charged 1e6
      [requests, [{ ...grant, granted: 1e6 }], 100],
    ] as const) {
      await expect(limiter.useQuotas(rs, gs as never, t as never)).rejects.toMatchObject({
        code: 'ERR_INVALID_ARGUMENT',
      })
    }
  })
})

describe.each(REDIS_KINDS)("on Redis' own clock (%s)", (kind) => {
  it('every sliding log and quota counter written has a TTL, no longer than its window allows', async () => {
    const prefix = freshPrefix()
    const store = await makeStore(kind, { keyPrefix: prefix })
    const raw = rawClient(kind)
    try {
      const sliding = new SlidingWindowLimiter(store, {
        name: 'own',
        windows: [
          { limit: 100, intervalMs: 2000 },
          { limit: 100, intervalMs: 10_000 },
        ],
      })
      for (let i = 0; i < 20; i++) expect((await sliding.check()).allowed).toBe(true)
      const quotas = new QuotaLimiter(store)
      const q: Quota = { windowSeconds: 120, granularitySeconds: 60, limit: 100 }
      const global: Quota = { ...q, prefixOverride: 'global' }
      for (let i = 0; i < 20; i++) {
        const [g] = await quotas.checkAndUseQuotas([{ prefix: 'own', requested: 1, quotas: [q, global] }])
        expect(g.granted).toBe(1)
      }
      const keys = await keysUnder(raw, prefix)
      expect(keys).toHaveLength(3)
      for (const key of keys) {
        const ttl = await raw.pttl(key)
        expect(ttl, key).toBeGreaterThan(0)
        // the log: until its newest call leaves the 10 s window, at most half a window later;
        // a counter: window + granularity after its newest granule was created
        expect(ttl, key).toBeLessThanOrEqual(key.includes(':sliding:') ? 15_000 : 180_000)
      }
    } finally {
      await store.close()
      raw.disconnect()
    }
  })

  it('rebases running totals near 1e15 without changing answers or losing the TTL', async () => {
    const prefix = freshPrefix()
    const store = await makeStore(kind, { keyPrefix: prefix })
    const raw = rawClient(kind)
    try {
      // a sliding log whose running total is about to pass 1e15
      const log = `${prefix}:sliding:{big}`
      const nowUs = Date.now() * 1000
      await raw.zadd(log, nowUs - 1000, `${String(1e15 - 5).padStart(17, '0')}:3`)
      await raw.pexpire(log, 60_000)
      const sliding = new SlidingWindowLimiter(store, { name: 'big', windows: [{ limit: 10, intervalMs: 60_000 }] })
      expect((await sliding.check(5)).windows[0].remaining).toBe(2)
      expect(await raw.zrange(log, '0', '-1')).toEqual([`${'0'.repeat(17)}:3`, `${'0'.repeat(16)}3:5`])
      expect(await raw.pttl(log)).toBeGreaterThan(0)
      expect((await sliding.check(3)).allowed).toBe(false)
      // a quota counter likewise
      const counter = `${prefix}:quota:{big}:60:60`
      const g = 30_000_000 // the granule of t = (g + 1) * 60 + 30
      await raw.zadd(counter, g, `${g}:${1e15 - 5}:3`)
      await raw.pexpire(counter, 60_000)
      const quotas = new QuotaLimiter(store)
      const q: Quota = { windowSeconds: 60, granularitySeconds: 60, limit: 10 }
      const t = (g + 1) * 60 + 30
      const [grant] = await quotas.checkAndUseQuotas([{ prefix: 'big', requested: 5, quotas: [q] }], t)
      expect(grant.granted).toBe(5)
      expect(await raw.zrange(counter, '0', '-1')).toEqual([`${g}:0:8`])
      expect(await raw.pttl(counter)).toBeGreaterThan(0)
      const [next] = await quotas.checkAndUseQuotas([{ prefix: 'big', requested: 5, quotas: [q] }], t)
      expect(next.granted).toBe(2)
    } finally {
      await store.close()
      raw.disconnect()
    }
  })
})
