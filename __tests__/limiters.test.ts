// The rate limiters (bucket, window, leaky, points, unlimited), each scenario written once and
// run on every store with a ManualClock.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import {
  BucketLimiter,
  LeakyLimiter,
  ManualClock,
  OverLimitError,
  PointsLimiter,
  UnlimitedLimiter,
  WindowLimiter,
  type Decision,
  type Store,
} from '../lib/entries/index.js'
import { STORE_KINDS, freshPrefix, keysUnder, makeStore, rawClient } from './helpers/stores.js'
import { flush, timerArmed } from './helpers/clock.js'

const T0 = 1_800_000_000_000 // ms, on a whole minute and hour (UTC)

const allowed = (ds: { allowed: boolean }[]) => ds.map((d) => d.allowed)

describe.each(STORE_KINDS)('rate limiters on %s', (kind) => {
  let clock: ManualClock
  let store: Store
  let prefix: string
  const raw = kind === 'memory' ? null : rawClient(kind)

  beforeAll(async () => {
    clock = new ManualClock(T0)
    prefix = freshPrefix()
    store = await makeStore(kind, { clock, keyPrefix: prefix })
  })
  afterAll(async () => {
    // every key the scenarios left behind expires
    if (raw) {
      for (const key of await keysUnder(raw, prefix)) expect(`${key} ${await raw.pttl(key)}`).not.toMatch(/ -\d+$/)
    }
    await store.close()
    raw?.disconnect()
  })

  let n = 0
  const name = () => `l${n++}`
  const checks = async (l: { check(w?: number): Promise<Decision> }, count: number, weight = 1) => {
    const out: Decision[] = []
    for (let i = 0; i < count; i++) out.push(await l.check(weight))
    return out
  }

  describe('BucketLimiter', () => {
    it('admits limit per calendar second, and the next bucket opens at the boundary', async () => {
      clock.set(T0 + 999)
      const b = new BucketLimiter(store, { name: name(), limit: 5, interval: 'second' })
      const first = await checks(b, 6)
      expect(allowed(first)).toEqual([true, true, true, true, true, false])
      expect(first[5]).toEqual({
        allowed: false,
        limit: 5,
        remaining: 0,
        retryAfterMs: 1,
        resetAfterMs: 1,
        degraded: false,
      })
      clock.advance(1)
      const second = await checks(b, 6)
      expect(allowed(second)).toEqual([true, true, true, true, true, false])
      expect(second[0].remaining).toBe(4)
      expect(second[0].resetAfterMs).toBe(1000)
    })

    it('aligns minute, hour and day buckets to UTC boundaries', async () => {
      clock.set(T0 + 59_000)
      expect(
        (await new BucketLimiter(store, { name: name(), limit: 1, interval: 'minute' }).check()).resetAfterMs,
      ).toBe(1000)
      expect((await new BucketLimiter(store, { name: name(), limit: 1, interval: 'hour' }).check()).resetAfterMs).toBe(
        3_600_000 - 59_000,
      )
      const day = await new BucketLimiter(store, { name: name(), limit: 1, interval: 'day' }).check()
      expect(day.resetAfterMs).toBe(86_400_000 - ((T0 + 59_000) % 86_400_000))
    })

    it('charges weights, refusing what does not fit without charging it', async () => {
      clock.set(T0)
      const b = new BucketLimiter(store, { name: name(), limit: 10, interval: 60_000 })
      const ds = [await b.check(7), await b.check(4), await b.check(3), await b.check(1)]
      expect(allowed(ds)).toEqual([true, false, true, false])
      expect(ds.map((d) => d.remaining)).toEqual([3, 3, 0, 0])
    })

    it('calls made in one tick are decided one after the other', async () => {
      clock.set(T0)
      const b = new BucketLimiter(store, { name: name(), limit: 5, interval: 'second' })
      const ds = await Promise.all(Array.from({ length: 12 }, () => b.check()))
      expect(ds.filter((d) => d.allowed)).toHaveLength(5)
      expect(allowed(ds.slice(0, 5))).toEqual([true, true, true, true, true])
    })

    it('its key expires when its bucket ends', async () => {
      if (!raw) return
      clock.set(T0 + 400)
      const b = new BucketLimiter(store, { name: name(), limit: 5, interval: 'second' })
      await b.check()
      const keys = (await keysUnder(raw, prefix)).filter((k) => k.includes(`{${b.name}}`))
      expect(keys).toHaveLength(1)
      const ttl = await raw.pttl(keys[0])
      expect(ttl).toBeGreaterThan(0)
      // the bucket has 600 ms left; under a ManualClock the script adds 60 s (Redis expires keys
      // on its own clock, and a test clock must not lose state to it)
      expect(ttl).toBeGreaterThan(60_000)
      expect(ttl).toBeLessThanOrEqual(60_600)
    })
  })

  describe('WindowLimiter', () => {
    it('opens its window at the first call and closes it interval later', async () => {
      clock.set(T0 + 500)
      const w = new WindowLimiter(store, { name: name(), limit: 2, interval: 1000 })
      const ds = await checks(w, 3)
      expect(allowed(ds)).toEqual([true, true, false])
      expect(ds[2].retryAfterMs).toBe(1000)
      clock.advance(999)
      expect((await w.check()).allowed).toBe(false)
      clock.advance(1)
      const next = await w.check()
      expect(next).toMatchObject({ allowed: true, remaining: 1, resetAfterMs: 1000 })
    })

    it('a refusal or a probe never opens a window', async () => {
      clock.set(T0)
      const w = new WindowLimiter(store, { name: name(), limit: 1, interval: 1000 })
      expect((await w.peek()).allowed).toBe(true)
      expect((await w.check(0)).allowed).toBe(true)
      clock.advance(700)
      expect((await w.check()).resetAfterMs).toBe(1000)
    })
  })

  describe('LeakyLimiter', () => {
    it('lets a burst of limit through, then one per interval/limit, exactly', async () => {
      clock.set(T0)
      const l = new LeakyLimiter(store, { name: name(), limit: 3, interval: 3000 })
      const ds = await checks(l, 4)
      expect(allowed(ds)).toEqual([true, true, true, false])
      expect(ds[3].retryAfterMs).toBe(1000)
      expect(ds[2].resetAfterMs).toBe(3000)
      clock.advance(999)
      expect((await l.check()).allowed).toBe(false)
      clock.advance(1)
      expect((await l.check()).allowed).toBe(true)
      expect((await l.check()).retryAfterMs).toBe(1000)
    })

    it('waiters reserve their own slots in arrival order instead of racing for one drip', async () => {
      clock.set(T0)
      const l = new LeakyLimiter(store, { name: name(), limit: 1, interval: 1000, waitTimeoutMs: 2500 })
      const ran: string[] = []
      const calls = ['a', 'b', 'c', 'd'].map((id) => l.withinLimit(() => ran.push(id)).catch((e) => e))
      await timerArmed(clock, 2)
      expect(ran).toEqual(['a'])
      clock.advance(1000)
      await flush()
      expect(ran).toEqual(['a', 'b'])
      clock.advance(1000)
      const results = await Promise.all(calls)
      expect(ran).toEqual(['a', 'b', 'c'])
      expect(results[3]).toBeInstanceOf(OverLimitError)
      expect(results[3]).toMatchObject({ code: 'ERR_OVER_LIMIT', limiter: l.name, retryAfterMs: 3000 })
    })

    it('an aborted reservation gives its slot back', async () => {
      clock.set(T0)
      const l = new LeakyLimiter(store, { name: name(), limit: 1, interval: 1000, waitTimeoutMs: 5000 })
      await l.check()
      const abort = new AbortController()
      const waiting = l.withinLimit(() => 'ran', { signal: abort.signal }).catch((e) => e)
      await timerArmed(clock)
      abort.abort()
      expect(await waiting).toMatchObject({ code: 'ERR_ABORTED' })
      clock.advance(1000)
      expect((await l.check()).allowed).toBe(true)
    })
  })

  describe('PointsLimiter', () => {
    it('charges the estimate, then refunds or charges the difference reported', async () => {
      clock.set(T0)
      const p = new PointsLimiter(store, { name: name(), points: 100, interval: 10_000 })
      const r = await p.withinLimit(
        (h) => {
          h.pointsUsed(30)
          return 'done'
        },
        { estimate: 80 },
      )
      expect(r).toBe('done')
      expect((await p.peek()).remaining).toBe(70)
      await p.withinLimit((h) => h.pointsUsed(110), { estimate: 60 })
      const debt = await p.peek()
      expect(debt.allowed).toBe(false)
      expect(debt.resetAfterMs).toBe(14_000)
      expect(debt.retryAfterMs).toBe(4_100)
    })

    it('keeps the estimate when the real use is not reported, and refills continuously', async () => {
      clock.set(T0)
      const p = new PointsLimiter(store, { name: name(), points: 10, interval: 1000 })
      await p.withinLimit(() => undefined, { estimate: 10 })
      expect((await p.check()).allowed).toBe(false)
      clock.advance(250)
      expect((await p.check(2)).remaining).toBe(0)
    })
  })

  describe.each([
    ['BucketLimiter', (o: object) => new BucketLimiter(store, { name: name(), limit: 2, interval: 1000, ...o })],
    ['WindowLimiter', (o: object) => new WindowLimiter(store, { name: name(), limit: 2, interval: 1000, ...o })],
    ['LeakyLimiter', (o: object) => new LeakyLimiter(store, { name: name(), limit: 2, interval: 1000, ...o })],
    ['PointsLimiter', (o: object) => new PointsLimiter(store, { name: name(), points: 2, interval: 1000, ...o })],
  ] as const)('%s common behaviour', (_, make) => {
    it('peek and check(0) charge nothing; reset forgets everything', async () => {
      clock.set(T0)
      const l = make({})
      expect(await l.peek()).toMatchObject({ allowed: true, remaining: 2 })
      expect((await l.check(0)).remaining).toBe(2)
      await l.check(2)
      expect(await l.peek()).toMatchObject({ allowed: false, remaining: 0 })
      await l.reset()
      expect(await l.peek()).toMatchObject({ allowed: true, remaining: 2 })
    })

    it('withinLimit waits for capacity within waitTimeoutMs and runs fn once', async () => {
      clock.set(T0)
      const l = make({ waitTimeoutMs: 1500 })
      await l.check(2)
      let runs = 0
      const p = l.withinLimit(() => ++runs)
      await timerArmed(clock)
      expect(runs).toBe(0)
      clock.advance(1000)
      expect(await p).toBe(1)
    })

    it('raises OverLimitError with name and retryAfterMs, or skips under policy skip', async () => {
      clock.set(T0)
      const l = make({ waitTimeoutMs: 0 })
      await l.check(2)
      let ran = false
      const err = await l.withinLimit(() => (ran = true)).catch((e) => e)
      expect(err).toBeInstanceOf(OverLimitError)
      expect(err).toMatchObject({ code: 'ERR_OVER_LIMIT', limiter: l.name })
      expect(err.retryAfterMs).toBeGreaterThan(0)
      const skipping = make({ waitTimeoutMs: 0, policy: 'skip' })
      await skipping.check(2)
      expect(await skipping.withinLimit(() => (ran = true))).toBeUndefined()
      expect(ran).toBe(false)
    })

    it('an aborted wait rejects with ERR_ABORTED', async () => {
      clock.set(T0)
      const l = make({ waitTimeoutMs: 5000 })
      await l.check(2)
      const abort = new AbortController()
      const p = l.withinLimit(() => 1, { signal: abort.signal }).catch((e) => e)
      await timerArmed(clock)
      abort.abort()
      expect(await p).toMatchObject({ code: 'ERR_ABORTED' })
      const already = await l.withinLimit(() => 1, { signal: AbortSignal.abort() }).catch((e) => e)
      expect(already).toMatchObject({ code: 'ERR_ABORTED' })
    })
  })

  it('UnlimitedLimiter takes any options and always runs the function', async () => {
    const u = new UnlimitedLimiter('anything', 5, { interval: 'nonsense' })
    expect(
      await u.withinLimit((h: { pointsUsed(n: number): void }) => (h.pointsUsed(3), 'x'), { estimate: 1e12 }),
    ).toBe('x')
    expect((await u.check(1e9)).allowed).toBe(true)
    expect(await (await u.acquire()).release()).toBe(true)
  })
})
