// store.rules applied to the pacers, the sliding windows, the sliding counters, budgets and the
// concurrency limiter (DESIGN §9): an override is the call's, a deny or an allow answers with no
// round trip, shadow mode decides at once and admits. Two stores stand for two processes.
import { afterEach, describe, expect, it } from 'vitest'
import {
  ConcurrentLimiter,
  DistributedPacer,
  type Lease,
  Budget,
  ManualClock,
  PacerComposite,
  SlidingCounterLimiter,
  SlidingWindowLimiter,
  type Store,
} from '../lib/entries/index.js'
import { STORE_KINDS, makeStores } from './helpers/stores.js'

const T0 = 1_800_000_000_000
const HOUR = 3_600_000
type Rules = {
  set(target: object, rule: object, o?: object): Promise<void>
  delete(target: object): Promise<boolean>
  _forName(kind: string, name: string): { rule: Record<string, unknown> } | undefined
}
const rulesOf = (s: Store) => (s as unknown as { rules: Rules }).rules
/** Round trips a store made (its batcher's calls; a MemoryStore has none: undefined). */
const calls = (s: Store) => (s as unknown as { batching?: { calls: number } }).batching?.calls
const flush = async (...stores: Store[]) => {
  for (const s of stores) await (s as unknown as { _flushStats?: () => Promise<void> })._flushStats?.()
}

/** Sets `rule` on `target` in store `a`, and waits until store `b` (another process) holds it. */
async function setRule(a: Store, b: Store, kind: string, name: string, rule: object | null) {
  const target = { kind, name }
  if (rule === null) await rulesOf(a).delete(target)
  else await rulesOf(a).set(target, rule)
  const want = rule === null ? undefined : JSON.stringify(rule)
  const start = Date.now()
  for (;;) {
    const e = rulesOf(b)._forName(kind, name)
    const have = e === undefined ? undefined : JSON.stringify(e.rule)
    if (have === want) return
    if (Date.now() - start > 2000) throw new Error(`the rule ${want} never arrived (have ${have})`)
    await new Promise((r) => setTimeout(r, 1))
  }
}

describe.each(STORE_KINDS)('issue-39-rules-kinds on %s', (kind) => {
  const open: Store[] = []
  afterEach(async () => {
    await Promise.all([...new Set(open.splice(0))].map((s) => s.close()))
  })
  const stores = async (clock: ManualClock) => {
    const [a, b] = await makeStores(kind, 2, clock)
    open.push(a, b)
    return [a, b] as const
  }

  it('DistributedPacer: maxBurst and qps overridden, denied, allowed, shadowed, in two processes', async () => {
    const clock = new ManualClock(T0)
    const [a, b] = await stores(clock)
    const key = 'user@example.com:api.v1'
    // a burst of 9: 10 calls pass at once (the bucket holds maxBurst, plus the call that fills it)
    const pa = new DistributedPacer(a, { key, qps: 1, maxBurst: 9 })
    const pb = new DistributedPacer(b, { key, qps: 1, maxBurst: 9 })
    const admitted = async (n: number) => {
      let ok = 0
      for (let i = 0; i < n; i++) if ((await (i % 2 ? pa : pb).rateLimit()).delayMs === 0) ok++
      return ok
    }
    // lowered to a burst of 3: 4 of 20
    await setRule(a, b, 'pacer', key, { maxBurst: 3 })
    expect(await admitted(20)).toBe(4)
    // raised back to 9: the level (4) kept, 6 more
    await setRule(a, b, 'pacer', key, { maxBurst: 9 })
    expect(await admitted(20)).toBe(6)
    // qps 5: the state kept (the level reached at 1 a second drains as it was charged), what
    // is charged from now on drains at 5 a second
    await setRule(a, b, 'pacer', key, { qps: 5, maxBurst: 9 })
    clock.advance(1000)
    expect(await admitted(20)).toBe(1)
    clock.advance(1000)
    expect(await admitted(20)).toBe(5)
    // denied: no round trip, reason 'denied', a retry hint; pace() rejects with that reason
    await setRule(a, b, 'pacer', key, { access: 'deny' })
    const before = calls(a)
    const d = await pa.rateLimit()
    expect(d).toMatchObject({ reason: 'denied' })
    expect(d.delayMs).toBeGreaterThan(0)
    await expect(pa.pace()).rejects.toMatchObject({ code: 'ERR_OVER_LIMIT', reason: 'denied' })
    expect(calls(a)).toBe(before)
    // allowed: admitted, nothing charged, no round trip
    await setRule(a, b, 'pacer', key, { access: 'allow' })
    expect(await admitted(50)).toBe(50)
    expect((await pa.pace()).delayMs).toBe(0)
    expect(calls(a)).toBe(before)
    // shadow (the bucket full): every call admitted at once, nothing charged, pace() never waits
    await setRule(a, b, 'pacer', key, { mode: 'shadow' })
    expect(await pa.rateLimit()).toMatchObject({ delayMs: 0, reason: 'shadow' })
    expect(await pb.pace()).toMatchObject({ delayMs: 0, reason: 'shadow' })
    expect(await admitted(8)).toBe(8)
    // rule gone: the pacer's own options, its level kept (full): refused
    await setRule(a, b, 'pacer', key, null)
    expect(await admitted(5)).toBe(0)
    await flush(a, b)
    const stats = await pa.stats()
    expect(stats.denied).toBe(2)
    expect(stats.shadowRefused).toBe(10)
  })

  it("DistributedPacer: a block and a slot given back under a rule's qps and maxBurst are the rule's", async () => {
    const clock = new ManualClock(T0)
    const [a, b] = await stores(clock)
    const key = 'blocked-under-a-rule'
    const pa = new DistributedPacer(a, { key, qps: 1 })
    const pb = new DistributedPacer(b, { key, qps: 1 })
    await setRule(a, b, 'pacer', key, { qps: 100, maxBurst: 100 })
    // the burst of the rule is spent by the block: after it, calls resume at the rule's 100 a
    // second, not a burst of 100 at once (nor the pacer's own 1 a second)
    await pa.block(1000)
    clock.advance(1001)
    let ok = 0
    for (let i = 0; i < 20; i++) if ((await (i % 2 ? pa : pb).rateLimit()).delayMs === 0) ok++
    expect(ok).toBe(1)
    clock.advance(100)
    ok = 0
    for (let i = 0; i < 20; i++) if ((await (i % 2 ? pa : pb).rateLimit()).delayMs === 0) ok++
    expect(ok).toBe(10)
    // another pacer, no rule of its own (the store holds one): a slot given back with later ones
    // after it is kept for this process's next call, at its own time, as with no rule at all
    const other = new DistributedPacer(a, { key: 'no-rule-of-its-own', qps: 10 })
    const outs = []
    for (let i = 0; i < 5; i++) outs.push(await other.pace())
    expect(outs.map((o) => o.delayMs)).toEqual([0, 100, 200, 300, 400])
    expect(await outs[2].cancel()).toBe(true)
    expect((await other.pace()).delayMs).toBe(200)
  })

  it("DistributedPacer's mode 'shadow': the shadow count equals what enforcing refuses on the same traffic", async () => {
    const clock = new ManualClock(T0)
    const [a, b] = await stores(clock)
    const enforced = [a, b].map((s) => new DistributedPacer(s, { key: 'e@x:1.2', qps: 2, maxBurst: 3 }))
    const shadow = [a, b].map((s) => new DistributedPacer(s, { key: 's@x:1.2', qps: 2, maxBurst: 3, mode: 'shadow' }))
    let refused = 0
    let shadowed = 0
    for (let i = 0; i < 60; i++) {
      if (i % 7 === 0) clock.advance(300 + ((i * 137) % 900))
      const e = await enforced[i % 2].rateLimit()
      if (e.delayMs > 0) refused++
      const s = await shadow[i % 2].rateLimit()
      expect(s.delayMs).toBe(0)
      if (s.reason === 'shadow') shadowed++
      // pace() in shadow never waits either
      expect((await shadow[i % 2].pace(0)).delayMs).toBe(0)
    }
    expect(refused).toBeGreaterThan(10)
    expect(shadowed).toBe(refused)
    await flush(a, b)
    expect((await shadow[0].stats()).shadowRefused).toBe(refused)
    expect((await enforced[0].stats()).refused).toBe(refused)
    expect(() => new DistributedPacer(a, { key: 'x', qps: 1, mode: 'dry' as never })).toThrow(
      /mode must be 'enforce' or 'shadow'/,
    )
  })

  it("PacerComposite: each member's rule applies, a deny of any member denies the whole", async () => {
    const clock = new ManualClock(T0)
    const [a, b] = await stores(clock)
    const k1 = 'tenant@acme:orders.read'
    const k2 = 'tenant@acme:orders.*'
    const members = (s: Store) => [
      new DistributedPacer(s, { key: k1, qps: 1, maxBurst: 2 }),
      new DistributedPacer(s, { key: k2, qps: 1, maxBurst: 5 }),
    ]
    const ma = members(a)
    const make = (s: Store) => new PacerComposite(s === a ? ma : members(s))
    const ca = make(a)
    const cb = make(b)
    const admitted = async (n: number) => {
      let ok = 0
      for (let i = 0; i < n; i++) if ((await (i % 2 ? ca : cb).rateLimit()).delayMs === 0) ok++
      return ok
    }
    // the second member denied: the whole denied, no round trip
    await setRule(a, b, 'pacer', k2, { access: 'deny' })
    const before = calls(a)
    expect(await ca.rateLimit()).toMatchObject({ reason: 'denied' })
    await expect(ca.pace()).rejects.toMatchObject({ reason: 'denied' })
    expect(calls(a)).toBe(before)
    // the first member allowed, the second's burst lowered to 1: the second alone limits (2)
    await setRule(a, b, 'pacer', k1, { access: 'allow' })
    await setRule(a, b, 'pacer', k2, { maxBurst: 1 })
    expect(await admitted(10)).toBe(2)
    // every member allowed: no round trip
    await setRule(a, b, 'pacer', k2, { access: 'allow' })
    const allowedFrom = calls(b)
    expect(await admitted(10)).toBe(10)
    expect(calls(b)).toBe(allowedFrom)
    // the first member (burst 2, empty) in shadow, the second (burst 5) enforced at its level
    // of 2: 3 admitted by both, a 4th by the second alone (the first would refuse: 'shadow'),
    // then the second refuses: the enforced member's limit holds whatever the other's mode
    await setRule(a, b, 'pacer', k1, { mode: 'shadow' })
    await setRule(a, b, 'pacer', k2, null)
    const outcomes = []
    for (let i = 0; i < 10; i++) outcomes.push(await (i % 2 ? ca : cb).rateLimit())
    expect(outcomes.map((o) => (o.delayMs === 0 ? (o.reason === 'shadow' ? 's' : 'a') : 'r')).join('')).toBe(
      'aaasrrrrrr',
    )
    // both in shadow: every call admitted at once, 'shadow' (nothing charged)
    await setRule(a, b, 'pacer', k2, { mode: 'shadow' })
    for (let i = 0; i < 5; i++) expect(await (i % 2 ? ca : cb).pace()).toMatchObject({ delayMs: 0, reason: 'shadow' })
    await flush(a, b)
    expect((await ma[0].stats()).shadowRefused).toBe(1 + 5)
    expect((await ma[1].stats()).shadowRefused).toBe(5)
    expect((await ma[1].stats()).denied).toBe(2)
  })

  it('PacerComposite: when an enforced member refuses, what a member in shadow took is given back', async () => {
    const clock = new ManualClock(T0)
    const [a, b] = await stores(clock)
    const k1 = 'shadow@x:give.back'
    const k2 = 'full@x:give.back'
    const p1 = new DistributedPacer(a, { key: k1, qps: 1, maxBurst: 2 })
    const p2 = new DistributedPacer(a, { key: k2, qps: 1, maxBurst: 0 })
    expect((await p2.rateLimit()).delayMs).toBe(0) // p2 full from now on (the clock stands still)
    const c = new PacerComposite([p1, p2])
    await setRule(a, b, 'pacer', k1, { mode: 'shadow' })
    for (let i = 0; i < 5; i++) expect((await c.rateLimit()).delayMs).toBeGreaterThan(0)
    await setRule(a, b, 'pacer', k1, null)
    // p1 charged nothing for the 5 refusals: its whole burst (2, plus the call that fills it)
    const p1b = new DistributedPacer(b, { key: k1, qps: 1, maxBurst: 2 })
    let ok = 0
    for (let i = 0; i < 10; i++) if ((await p1b.rateLimit()).delayMs === 0) ok++
    expect(ok).toBe(3)
  })

  it('SlidingWindowLimiter: windows overridden, denied, allowed, shadowed, in two processes', async () => {
    const clock = new ManualClock(T0)
    const [a, b] = await stores(clock)
    const name = 'ip:10.0.0.1@edge.eu'
    const make = (s: Store) => new SlidingWindowLimiter(s, { name, windows: [{ limit: 10, intervalMs: HOUR }] })
    const la = make(a)
    const lb = make(b)
    const admitted = async (n: number) => {
      let ok = 0
      for (let i = 0; i < n; i++) if ((await (i % 2 ? la : lb).check()).allowed) ok++
      return ok
    }
    await setRule(a, b, 'sliding', name, { windows: [{ limit: 4, intervalMs: HOUR }] })
    expect(await admitted(20)).toBe(4)
    expect((await la.check()).windows[0].limit).toBe(4)
    // raised to two windows, the log kept (4 calls within the minute): the minute's 5 binds (1
    // more), then a minute later the hour's 12 and the minute's 5 (5 more)
    await setRule(a, b, 'sliding', name, {
      windows: [
        { limit: 12, intervalMs: HOUR },
        { limit: 5, intervalMs: 60_000 },
      ],
    })
    expect(await admitted(20)).toBe(1)
    clock.advance(60_000)
    expect(await admitted(20)).toBe(5)
    await setRule(a, b, 'sliding', name, { access: 'deny' })
    const before = calls(a)
    expect(await la.check()).toMatchObject({ allowed: false, reason: 'denied' })
    await expect(la.ensure(() => 1)).rejects.toMatchObject({ code: 'ERR_OVER_LIMIT', reason: 'denied' })
    await setRule(a, b, 'sliding', name, { access: 'allow' })
    expect(await admitted(50)).toBe(50)
    expect(calls(a)).toBe(before)
    // shadow at 10 an hour (10 logged): every call admitted at once, none logged
    await setRule(a, b, 'sliding', name, { windows: [{ limit: 10, intervalMs: HOUR }], mode: 'shadow' })
    expect(await la.check()).toMatchObject({ allowed: true, reason: 'shadow', retryAfterMs: 0 })
    expect(await admitted(9)).toBe(9)
    await setRule(a, b, 'sliding', name, null)
    expect(await admitted(5)).toBe(0)
    await flush(a, b)
    const stats = await la.stats()
    expect(stats.denied).toBe(2)
    expect(stats.shadowRefused).toBe(10)
  })

  it('SlidingCounterLimiter: limit, interval and windows overridden, denied, allowed, shadowed', async () => {
    const clock = new ManualClock(T0)
    const [a, b] = await stores(clock)
    const name = 'user:42@billing.eu'
    const make = (s: Store) =>
      new SlidingCounterLimiter(s, { name, windows: [{ limit: 10, intervalMs: HOUR }], waitTimeoutMs: 0 })
    const la = make(a)
    const lb = make(b)
    const admitted = async (n: number) => {
      let ok = 0
      for (let i = 0; i < n; i++) if ((await (i % 2 ? la : lb).check()).allowed) ok++
      return ok
    }
    await setRule(a, b, 'sliding-counter', name, { limit: 4 })
    expect(await admitted(20)).toBe(4)
    expect((await la.check()).limit).toBe(4)
    await setRule(a, b, 'sliding-counter', name, { limit: 12 })
    expect(await admitted(20)).toBe(8)
    // a windows rule: a second window of 2 per hour... already 12 counted: refused
    await setRule(a, b, 'sliding-counter', name, { windows: [{ limit: 20, intervalMs: HOUR }] })
    expect(await admitted(20)).toBe(8)
    await setRule(a, b, 'sliding-counter', name, { access: 'deny' })
    const before = calls(a)
    expect(await la.check()).toMatchObject({ allowed: false, reason: 'denied' })
    await expect(la.withinLimit(() => 1)).rejects.toMatchObject({ code: 'ERR_OVER_LIMIT', reason: 'denied' })
    await setRule(a, b, 'sliding-counter', name, { access: 'allow' })
    expect(await admitted(50)).toBe(50)
    expect(calls(a)).toBe(before)
    await setRule(a, b, 'sliding-counter', name, { limit: 20, mode: 'shadow' })
    expect(await la.check()).toMatchObject({ allowed: true, reason: 'shadow', retryAfterMs: 0 })
    expect(await la.withinLimit(() => 'ran')).toBe('ran')
    expect(await admitted(8)).toBe(8)
    await setRule(a, b, 'sliding-counter', name, null)
    expect(await admitted(5)).toBe(0)
    await flush(a, b)
    const stats = await la.stats()
    expect(stats.denied).toBe(2)
    expect(stats.shadowRefused).toBe(10)
  })

  it('ConcurrentLimiter: limit overridden, denied, allowed (a lease that holds nothing), shadowed', async () => {
    const clock = new ManualClock(T0)
    const [a, b] = await stores(clock)
    const name = 'job:export@tenant.42'
    const make = (s: Store) => new ConcurrentLimiter(s, { name, limit: 3, waitTimeoutMs: 0 })
    const la = make(a)
    const lb = make(b)
    const held: Lease[] = []
    const acquire = async (n: number) => {
      let ok = 0
      for (let i = 0; i < n; i++) {
        const l = await (i % 2 ? la : lb).tryAcquire()
        if (l !== null) {
          held.push(l)
          ok++
        }
      }
      return ok
    }
    await setRule(a, b, 'concurrent', name, { limit: 1 })
    expect(await acquire(5)).toBe(1)
    await setRule(a, b, 'concurrent', name, { limit: 4 })
    expect(await acquire(5)).toBe(3)
    await setRule(a, b, 'concurrent', name, { access: 'deny' })
    const before = calls(a)
    expect(await la.tryAcquire()).toBeNull()
    await expect(la.acquire()).rejects.toMatchObject({ code: 'ERR_OVER_LIMIT', reason: 'denied' })
    await expect(la.withinLimit(async () => 1)).rejects.toMatchObject({ reason: 'denied' })
    await setRule(a, b, 'concurrent', name, { access: 'allow' })
    const free = await la.acquire()
    expect(await la.withinLimit(async () => 'ran')).toBe('ran')
    expect(await free.release()).toBe(true)
    expect(calls(a)).toBe(before)
    await setRule(a, b, 'concurrent', name, { limit: 4, mode: 'shadow' })
    const shadowed = await lb.acquire()
    expect(shadowed).toMatchObject({ reason: 'shadow' })
    expect(await acquire(4)).toBe(4)
    await setRule(a, b, 'concurrent', name, null)
    // its own 3, 4 held: refused until two are released
    expect(await la.tryAcquire()).toBeNull()
    for (const l of held.splice(0)) await l.release()
    expect(await acquire(5)).toBe(3)
    await flush(a, b)
    const stats = await la.stats()
    expect(stats.denied).toBe(3)
    expect(stats.shadowRefused).toBe(5)
    expect(stats.current).toBe(3)
  })

  it("the constructor's mode 'shadow' of the windows and the semaphore: shadow counts equal enforced refusals", async () => {
    const clock = new ManualClock(T0)
    const [a, b] = await stores(clock)
    const windows = [
      { limit: 3, intervalMs: 1000 },
      { limit: 5, intervalMs: 10_000 },
    ]
    const pairs = [
      [SlidingWindowLimiter, {}],
      [SlidingCounterLimiter, { waitTimeoutMs: 0 }],
    ] as const
    for (const [Class, extra] of pairs) {
      const e = [a, b].map((s) => new (Class as any)(s, { name: `e@${Class.name}`, windows, ...extra }))
      const sh = [a, b].map(
        (s) => new (Class as any)(s, { name: `s@${Class.name}`, windows, mode: 'shadow', ...extra }),
      )
      let refused = 0
      let shadowed = 0
      for (let i = 0; i < 40; i++) {
        if (i % 5 === 0) clock.advance(700 + ((i * 311) % 1500))
        if (!(await e[i % 2].check()).allowed) refused++
        const d = await sh[i % 2].check()
        expect(d.allowed).toBe(true)
        if (d.reason === 'shadow') shadowed++
      }
      expect(refused).toBeGreaterThan(5)
      expect(shadowed).toBe(refused)
    }
    const ce = new ConcurrentLimiter(a, { name: 'ce', limit: 2, waitTimeoutMs: 0 })
    const cs = new ConcurrentLimiter(b, { name: 'cs', limit: 2, waitTimeoutMs: 0, mode: 'shadow' })
    let refused = 0
    let shadowed = 0
    for (let i = 0; i < 6; i++) {
      if ((await ce.tryAcquire()) === null) refused++
      const l = await cs.acquire()
      if (l.reason === 'shadow') shadowed++
    }
    expect(refused).toBe(4)
    expect(shadowed).toBe(refused)
  })

  it('Budget: dimensions overridden (the budget, a tenant), denied, allowed, shadowed, in two processes', async () => {
    const clock = new ManualClock(T0)
    const [a, b] = await stores(clock)
    const name = 'llm@acme:gpt.4o'
    const dimensions = { requests: { limit: 10, intervalMs: HOUR }, tokens: { limit: 10_000, intervalMs: HOUR } }
    const ba = new Budget(a, { name, dimensions })
    const bb = new Budget(b, { name, dimensions })
    /** Reservations admitted over an hour: 3 tries every 3 minutes, alternating processes. */
    const hour = async (views: Budget[]) => {
      let ok = 0
      for (let step = 0; step < 20; step++) {
        clock.advance(HOUR / 20)
        for (let i = 0; i < 3; i++) {
          try {
            await views[i % views.length].reserve({ requests: 1 }, { maxWaitMs: 0 })
            ok++
          } catch (err) {
            expect(err).toMatchObject({ code: 'ERR_OVER_LIMIT', reason: 'limit' })
          }
        }
      }
      return ok
    }
    expect(await hour([ba, bb])).toBe(10)
    await setRule(a, b, 'budget', name, { dimensions: { requests: { limit: 5 } } })
    expect(await hour([ba, bb])).toBe(5)
    await setRule(a, b, 'budget', name, { dimensions: { requests: { limit: 20 } } })
    expect(await hour([ba, bb])).toBe(20)
    // stats() shows the limits in force (the rule's), in every process
    for (const x of [ba, bb]) expect((await x.stats()).dimensions.requests.limit).toBe(20)
    // a tenant's rule caps the tenant (at 2 of the budget's 20 an hour); another tenant is not
    const tenant = 'customer@42:eu.west'
    await rulesOf(a).set({ budget: name, tenant }, { dimensions: { requests: { limit: 2 } } })
    const start = Date.now()
    while ((b as any).rules._forTenant(name, tenant) === undefined) {
      if (Date.now() - start > 2000) throw new Error("the tenant's rule never arrived")
      await new Promise((r) => setTimeout(r, 1))
    }
    expect(await hour([ba.tenant(tenant, { share: 0.5 }), bb.tenant(tenant, { share: 0.5 })])).toBe(2)
    expect(await hour([ba.tenant('other', { share: 0.5 }), bb.tenant('other', { share: 0.5 })])).toBe(20)
    // the tenant denied, the budget not: no round trip
    await rulesOf(a).set({ budget: name, tenant }, { access: 'deny' })
    const before = calls(a)
    await expect(ba.tenant(tenant, { share: 0.5 }).reserve({ requests: 1 })).rejects.toMatchObject({
      code: 'ERR_OVER_LIMIT',
      reason: 'denied',
    })
    expect(calls(a)).toBe(before)
    // the budget denied, the budget allowed (a reservation that holds nothing)
    await setRule(a, b, 'budget', name, { access: 'deny' })
    await expect(bb.reserve({ requests: 1 })).rejects.toMatchObject({ reason: 'denied' })
    await setRule(a, b, 'budget', name, { access: 'allow' })
    const before2 = calls(a)
    for (let i = 0; i < 30; i++) await (await ba.reserve({ requests: 1, tokens: 9_000 })).settle({ tokens: 50_000 })
    expect(calls(a)).toBe(before2)
    // shadow on the budget's own 10 an hour: one fits every 6 minutes, the rest admitted at once
    await setRule(a, b, 'budget', name, { mode: 'shadow' })
    clock.advance(HOUR) // what the hours before queued has drained
    let shadowed = 0
    for (let step = 0; step < 20; step++) {
      clock.advance(HOUR / 20)
      for (let i = 0; i < 3; i++) {
        const r = await (i % 2 ? ba : bb).reserve({ requests: 1 }, { maxWaitMs: 60_000 })
        expect(r.delayMs).toBe(0)
        if (r.reason === 'shadow') shadowed++
      }
    }
    expect(shadowed).toBe(60 - 10)
    await flush(a, b)
    const stats = await ba.stats()
    expect(stats.denied).toBe(2)
    expect(stats.shadowRefused).toBe(50)
  })
})
