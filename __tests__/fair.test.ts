// FairTenant: sidekiq-fair_tenant's routing on every store with a ManualClock, against a
// model of both modes; then its bad inputs.
import { describe, expect, it } from 'vitest'
import { FairTenant, ManualClock, MemoryStore } from '../lib/entries/index.js'
import { STORE_KINDS, keysUnder, useStore } from './helpers/stores.js'
import { codeOf } from './helpers/errors.js'

const T0 = 1_800_000_000_000

/** What a tenant's record must answer: the specification, written plainly. */
class Model {
  ids = new Map<string, number>()
  granules = new Map<string, number>() // `${g}:${h}` -> count
  constructor(
    readonly mode: 'exact' | 'approximate',
    readonly horizonMs: number,
  ) {}

  /** `rules`: [perMs, granularityMs] */
  register(id: string, now: number, rules: [number, number][]): number[] {
    if (this.mode === 'exact') {
      for (const [k, at] of this.ids) if (at <= now - this.horizonMs) this.ids.delete(k)
      this.ids.set(id, now)
      return rules.map(([per]) => [...this.ids.values()].filter((at) => at > now - per).length)
    }
    const keep = new Map<number, number>()
    for (const [per, g] of rules) keep.set(g, Math.max(keep.get(g) ?? 0, per))
    for (const field of [...this.granules.keys()]) {
      const [g, h] = field.split(':').map(Number)
      if (!keep.has(g) || (h + 1) * g + keep.get(g)! <= now) this.granules.delete(field)
    }
    for (const g of keep.keys()) {
      const field = `${g}:${Math.floor(now / g)}`
      this.granules.set(field, (this.granules.get(field) ?? 0) + 1)
    }
    return rules.map(([per, g]) => {
      const current = Math.floor(now / g)
      const from = current + 1 - Math.floor(per / g)
      let sum = 0
      for (let h = from; h <= current; h++) sum += this.granules.get(`${g}:${h}`) ?? 0
      return sum
    })
  }
}

/** A small deterministic generator (mulberry32). */
function random(seed: number) {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed)
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

describe.each(STORE_KINDS)('FairTenant on %s', (kind) => {
  const clock = new ManualClock(T0)
  const s = useStore(kind, { clock })
  let n = 0
  const make = (o: Partial<ConstructorParameters<typeof FairTenant>[1]> & { rules: any }) =>
    new FairTenant(s.store, { name: `f${n++}`, ...o })

  it('routes by the last matching rule, this job counted, re-routed jobs counted too', async () => {
    clock.set(T0)
    const f = make({
      rules: [
        { queue: 'slow', threshold: 2, perMs: 60_000 },
        { queue: 'slower', threshold: 4, perMs: 60_000 },
      ],
    })
    const queues = []
    for (let i = 0; i < 6; i++) queues.push(await f.assign('acme', `j${i}`, 'fast'))
    expect(queues).toEqual(['fast', 'fast', 'slow', 'slow', 'slower', 'slower'])
    const r = await f.route('acme', 'j6', 'fast')
    expect(r).toEqual({ queue: 'slower', rule: 1, counts: [7, 7], degraded: false })
    // tenants are counted apart
    expect(await f.route('other', 'j0', 'fast')).toEqual({ queue: 'fast', rule: -1, counts: [1, 1], degraded: false })
  })

  it('the last matching rule wins even when an earlier one is more restrictive (order matters)', async () => {
    clock.set(T0)
    const f = make({
      rules: [
        { queue: 'strict', threshold: 1, perMs: 60_000 },
        { queue: 'lenient', threshold: 3, perMs: 60_000 },
      ],
    })
    const queues = []
    for (let i = 0; i < 5; i++) queues.push(await f.assign('t', `j${i}`, 'default'))
    expect(queues).toEqual(['default', 'strict', 'strict', 'lenient', 'lenient'])
  })

  it('exact: a retried or re-added job id never counts twice', async () => {
    clock.set(T0)
    const f = make({ rules: [{ queue: 'slow', threshold: 2, perMs: 10_000 }] })
    expect((await f.route('t', 'a', 'q')).counts).toEqual([1])
    for (let i = 0; i < 5; i++) {
      clock.advance(100)
      expect((await f.route('t', 'a', 'q')).counts).toEqual([1])
    }
    expect((await f.route('t', 'b', 'q')).counts).toEqual([2])
    // numeric ids are the same job as their decimal string
    expect((await f.route('t', 7, 'q')).counts).toEqual([3])
    expect((await f.route('t', '7', 'q')).counts).toEqual([3])
  })

  it('exact: a job leaves a window exactly perMs after it was (last) registered', async () => {
    clock.set(T0)
    const f = make({
      rules: [
        { queue: 'a', threshold: 100, perMs: 1000 },
        { queue: 'b', threshold: 100, perMs: 5000 },
      ],
    })
    await f.route('t', 'j1', 'q')
    clock.set(T0 + 999)
    expect((await f.route('t', 'j2', 'q')).counts).toEqual([2, 2])
    clock.set(T0 + 1000)
    expect((await f.route('t', 'j3', 'q')).counts).toEqual([2, 3])
    clock.set(T0 + 5999)
    expect((await f.route('t', 'j4', 'q')).counts).toEqual([1, 2])
    // registering j2 again moves it to now: it stays in the 5 s window past T0 + 5999
    expect((await f.route('t', 'j2', 'q')).counts).toEqual([2, 3])
    clock.set(T0 + 6500)
    expect((await f.route('t', 'j5', 'q')).counts).toEqual([3, 3])
  })

  it('approximate: counts the newest granules; a re-added id counts again', async () => {
    clock.set(T0)
    const f = make({ mode: 'approximate', granularityMs: 100, rules: [{ queue: 'slow', threshold: 1, perMs: 300 }] })
    expect(f.granularityMs).toBe(100)
    expect((await f.route('t', 'a', 'q')).counts).toEqual([1])
    expect(await f.route('t', 'a', 'q')).toEqual({ queue: 'slow', rule: 0, counts: [2], degraded: false })
    // T0 is a granule boundary: at T0 + 300 the granule [T0, T0 + 100) has left the 3 newest
    clock.set(T0 + 299)
    expect((await f.route('t', 'b', 'q')).counts).toEqual([3])
    clock.set(T0 + 300)
    expect((await f.route('t', 'c', 'q')).counts).toEqual([2])
  })

  it.each(['exact', 'approximate'] as const)('%s: agrees with the model over a random day', async (mode) => {
    clock.set(T0)
    const rules = [
      { queue: 'q1', threshold: 5, perMs: 60_000 },
      { queue: 'q2', threshold: 20, perMs: 600_000 },
      { queue: 'q3', threshold: 50, perMs: 3_600_000 },
    ]
    // approximate: each rule in 60 granules of its own (1 s, 10 s, 60 s)
    const f = make({ mode, rules })
    const shape = f.rules.map((r: any) => [r.perMs, r.granularityMs ?? 0] as [number, number])
    const models = new Map<string, Model>()
    const next = random(mode === 'exact' ? 7 : 11)
    let now = T0
    for (let i = 0; i < 400; i++) {
      // bursts and gaps: mostly ms apart, sometimes minutes, now and then an hour
      const gap = next()
      now += gap < 0.7 ? Math.floor(next() * 2000) : gap < 0.97 ? Math.floor(next() * 300_000) : 3_600_000
      clock.set(now)
      const tenant = `t${Math.floor(next() * 3)}`
      const id = `j${Math.floor(next() * 150)}`
      let model = models.get(tenant)
      if (!model) models.set(tenant, (model = new Model(mode, 3_600_000)))
      const want = model.register(id, now, shape)
      let rule = -1
      want.forEach((c, r) => {
        if (c > rules[r].threshold) rule = r
      })
      const got = await f.route(tenant, id, 'q0')
      expect({ i, ...got }).toEqual({
        i,
        queue: rule < 0 ? 'q0' : rules[rule].queue,
        rule,
        counts: want,
        degraded: false,
      })
    }
  })

  it('keeps tenants with look-alike names apart, and every key under one tag per tenant', async () => {
    clock.set(T0)
    const f = make({ rules: [{ queue: 'slow', threshold: 0, perMs: 1000 }] })
    const tenants = ['a}b', 'a:b', 'a', 'a%7Db', 'ü', 'u\uFFFD', '🙂', ' ']
    for (const t of tenants) {
      expect((await f.route(t, 'j', 'q')).counts).toEqual([1])
      expect((await f.route(t, 'k', 'q')).counts).toEqual([2])
    }
    if (s.raw) {
      const keys = await keysUnder(s.raw, s.prefix)
      const mine = keys.filter((k) => k.includes(`:fair:{${f.name}:`))
      expect(mine.length).toBe(tenants.length)
      for (const k of mine) expect(k.match(/[{}]/g)).toEqual(['{', '}'])
    }
  })

  it('approximate: the record stays within its granules however many jobs arrive', async () => {
    clock.set(T0)
    const f = make({ mode: 'approximate', rules: [{ queue: 'slow', threshold: 1e6, perMs: 60_000 }] })
    expect(f.granularityMs).toBe(1000)
    let now = T0
    for (let i = 0; i < 3000; i++) {
      now += 97
      clock.set(now)
      await f.route('big', `j${i}`, 'q')
    }
    if (s.raw) {
      const keys = (await keysUnder(s.raw, s.prefix)).filter((k) => k.includes(`:fair-approx:{${f.name}:`))
      expect(keys.length).toBe(1)
      // the 60 granules of the 60 s window, plus the one being filled
      expect(await s.raw.hlen(keys[0])).toBeLessThanOrEqual(61)
      expect(await s.raw.pttl(keys[0])).toBeGreaterThan(0)
    }
  })

  it('rejects bad arguments before the store is touched', async () => {
    const f = make({ rules: [{ queue: 'slow', threshold: 1 }] })
    for (const [tenant, id, q] of [
      ['', 'j', 'q'],
      ['x'.repeat(257), 'j', 'q'],
      ['u\uD800', 'j', 'q'],
      ['t', '', 'q'],
      ['t', 'a\nb', 'q'],
      ['t', '\uDC00', 'q'],
      ['t', -1, 'q'],
      [1.5, 'j', 'q'],
      ['t', 1.5, 'q'],
      ['t', 'j', ''],
      ['t', 'j', undefined],
    ] as any[]) {
      await expect(f.assign(tenant, id, q)).rejects.toMatchObject({ code: 'ERR_INVALID_ARGUMENT' })
    }
  })
})

describe('FairTenant options', () => {
  const store = new MemoryStore()
  const rules = [{ queue: 'slow', threshold: 1, perMs: 1000 }]

  it('takes the gem defaults: perMs = maxWindowMs (1 day), exact mode', () => {
    const f = new FairTenant(store, { name: 'a', rules: [{ queue: 'slow', threshold: 3 }] })
    expect(f.rules).toEqual([{ queue: 'slow', threshold: 3, perMs: 86_400_000 }])
    expect(f.mode).toBe('exact')
    expect(f.granularityMs).toBe(0)
    // approximate: each rule's window in 60 granules
    expect(new FairTenant(store, { name: 'b', mode: 'approximate', rules }).granularityMs).toBe(16)
    const day = new FairTenant(store, {
      name: 'c',
      mode: 'approximate',
      rules: [
        { queue: 'a', threshold: 1, perMs: 60_000 },
        { queue: 'b', threshold: 1 },
      ],
    })
    expect(day.granularityMs).toBe(1000)
    expect(day.rules.map((r) => r.granularityMs)).toEqual([1000, 1_440_000])
  })

  it('rejects bad options with ERR_INVALID_CONFIG', () => {
    const bad: any[] = [
      undefined,
      {},
      { name: '', rules },
      { name: 'a\uD800', rules },
      { name: 'a', rules: [] },
      { name: 'a', rules: {} },
      { name: 'a', rules: [{ queue: '', threshold: 1 }] },
      { name: 'a', rules: [{ queue: 'q' }] },
      { name: 'a', rules: [{ queue: 'q', threshold: -1 }] },
      { name: 'a', rules: [{ queue: 'q', threshold: 1.5 }] },
      { name: 'a', rules: [{ queue: 'q', threshold: 1, perMs: 0 }] },
      { name: 'a', rules: [{ queue: 'q', threshold: 1, per: 10 }] },
      { name: 'a', rules: [{ queue: 'q', threshold: 1, perMs: 2000 }], maxWindowMs: 1000 },
      { name: 'a', rules: [null] },
      { name: 'a', rules, mode: 'fuzzy' },
      { name: 'a', rules, granularityMs: 10 },
      { name: 'a', rules, mode: 'approximate', granularityMs: 2000 },
      { name: 'a', rules, mode: 'approximate', granularityMs: 0 },
      {
        name: 'a',
        rules: [{ queue: 'q', threshold: 1, perMs: 1e9 }],
        maxWindowMs: 1e9,
        mode: 'approximate',
        granularityMs: 1,
      },
      { name: 'a', rules, extra: 1 },
      { name: 'a', rules: Array.from({ length: 65 }, () => rules[0]) },
    ]
    for (const o of bad) expect(codeOf(() => new FairTenant(store, o))).toBe('ERR_INVALID_CONFIG')
    expect(codeOf(() => new FairTenant({} as any, { name: 'a', rules }))).toBe('ERR_INVALID_CONFIG')
  })

  it('reads own options only: a polluted prototype changes nothing', () => {
    const proto = Object.prototype as any
    proto.perMs = 5
    proto.maxWindowMs = 10
    proto.mode = 'approximate'
    try {
      const f = new FairTenant(store, { name: 'a', rules: [{ queue: 'q', threshold: 1 }] })
      expect(f.rules[0].perMs).toBe(86_400_000)
      expect(f.mode).toBe('exact')
    } finally {
      delete proto.perMs
      delete proto.maxWindowMs
      delete proto.mode
    }
  })
})
