// block(ms): upstream back-pressure on the pacer and the rate limiters, on every store with a
// ManualClock: nobody is admitted on the name until the block ends, counts are kept, a longer
// block is never shortened, reset ends it, and the key lives at least as long as the block.
import { describe, expect, it } from 'vitest'
import {
  BucketLimiter,
  DistributedPacer,
  LeakyLimiter,
  ManualClock,
  PointsLimiter,
  SlidingWindowLimiter,
  WindowLimiter,
} from '../lib/index.js'
import { STORE_KINDS, keysUnder, useStore } from './helpers/stores.js'

const T0 = 1_800_000_000_000

describe.each(STORE_KINDS)('block(ms) on %s', (kind) => {
  const clock = new ManualClock(T0)
  const s = useStore(kind, { clock })
  let n = 0
  const name = () => `b${n++}`

  const makers = {
    bucket: () => new BucketLimiter(s.store, { name: name(), limit: 5, interval: 'minute' }),
    window: () => new WindowLimiter(s.store, { name: name(), limit: 5, interval: 60_000 }),
    leaky: () => new LeakyLimiter(s.store, { name: name(), limit: 5, interval: 60_000 }),
    points: () => new PointsLimiter(s.store, { name: name(), points: 5, interval: 60_000 }),
  }

  it.each(Object.keys(makers) as (keyof typeof makers)[])(
    '%s: refuses everyone until the block ends, keeping its counts',
    async (which) => {
      clock.set(T0)
      const l = makers[which]()
      expect((await l.check(2)).allowed).toBe(true)
      await l.block(1500)
      clock.advance(1)
      const refused = await l.check()
      expect(refused).toMatchObject({ allowed: false, remaining: 0, retryAfterMs: 1499 })
      expect(await l.peek()).toMatchObject({ allowed: false, remaining: 0 })
      clock.advance(1498)
      expect((await l.check()).allowed).toBe(false)
      // a shorter block does not shorten the one in place
      await l.block(1)
      clock.advance(1)
      // the block is over: the 2 units used before it still count (3 left)
      const after = await l.check(3)
      expect(after.allowed).toBe(true)
      expect(after.remaining).toBe(0)
      expect((await l.check()).allowed).toBe(false)
    },
  )

  it('a block on a fresh name, a longer block extends, reset ends it; the key outlives the block', async () => {
    clock.set(T0)
    const l = new BucketLimiter(s.store, { name: name(), limit: 100, interval: 'second' })
    await l.block(10_000)
    clock.advance(2000)
    expect(await l.check()).toMatchObject({ allowed: false, retryAfterMs: 8000 })
    if (s.raw) {
      const [key] = (await keysUnder(s.raw, s.prefix)).filter((k) => k.includes(`{${l.name}}`))
      // blocked for 10 s although a bucket of 1 s would expire in 1 s
      expect(await s.raw.pttl(key)).toBeGreaterThan(8000)
    }
    await l.block(20_000)
    clock.advance(9000)
    expect(await l.check()).toMatchObject({ allowed: false, retryAfterMs: 11_000 })
    await l.reset()
    expect((await l.check()).allowed).toBe(true)
  })

  it('an adjustment (refund) during a block applies and keeps the block', async () => {
    clock.set(T0)
    const l = new WindowLimiter(s.store, { name: name(), limit: 3, interval: 60_000 })
    expect((await l.check(3)).allowed).toBe(true)
    await l.block(1000)
    await (l as any)._call(-2, -1)
    clock.advance(500)
    expect((await l.check()).allowed).toBe(false)
    clock.advance(500)
    expect((await l.check(2)).allowed).toBe(true)
  })

  it('pacer: rateLimit refuses and pace waits until the block ends, then calls resume at qps', async () => {
    clock.set(T0)
    const p = new DistributedPacer(s.store, { key: name(), qps: 10, maxBurst: 5 })
    expect((await p.rateLimit()).delayMs).toBe(0)
    await p.block(2000)
    clock.advance(500)
    const refused = await p.rateLimit()
    expect(refused.delayMs).toBe(1500)
    const paced = await p.pace()
    expect(paced.delayMs).toBe(1500)
    // the paced call took the slot at the block's end; the next one is 100 ms later
    clock.set(T0 + 2000)
    expect((await p.rateLimit()).delayMs).toBe(100)
    clock.set(T0 + 2100)
    expect((await p.rateLimit()).delayMs).toBe(0)
    // no burst was left: the next call is paced at qps
    expect((await p.rateLimit()).delayMs).toBe(100)
  })

  it('pacer: a block keeps a queue that already reaches past it', async () => {
    clock.set(T0)
    const p = new DistributedPacer(s.store, { key: name(), qps: 1, maxBurst: 0 })
    for (let i = 0; i < 5; i++) await p.pace()
    // the queue tail is 5 s away: a block of 1 s does not move it earlier
    await p.block(1000)
    expect((await p.pace()).delayMs).toBe(5000)
  })

  it('sliding windows: refused with no window reporting room until the block ends; the log is kept', async () => {
    clock.set(T0)
    const l = new SlidingWindowLimiter(s.store, {
      name: name(),
      windows: [
        { limit: 3, intervalMs: 1000 },
        { limit: 5, intervalMs: 10_000 },
      ],
    })
    expect((await l.check(2)).allowed).toBe(true)
    await l.block(3000)
    clock.advance(1)
    const refused = await l.check()
    expect(refused.allowed).toBe(false)
    expect(refused.retryAfterMs).toBe(2999)
    expect(refused.windows.map((w) => [w.remaining, w.retryAfterMs])).toEqual([
      [0, 2999],
      [0, 2999],
    ])
    expect((await l.peek()).allowed).toBe(false)
    // a shorter block keeps the longer one
    await l.block(10)
    clock.set(T0 + 2999)
    expect((await l.check()).allowed).toBe(false)
    clock.set(T0 + 3000)
    // the 2 units logged before the block still count in the 10 s window: 3 left there
    const after = await l.check(3)
    expect(after.allowed).toBe(true)
    expect(after.windows.map((w) => w.remaining)).toEqual([0, 0])
    if (s.raw) {
      const [key] = (await keysUnder(s.raw, s.prefix)).filter((k) => k.includes(`{${l.name}}`))
      expect(await s.raw.pttl(key)).toBeGreaterThan(9000)
    }
    // a block on a fresh name keeps its key for the block; reset ends it
    const fresh = new SlidingWindowLimiter(s.store, { name: name(), windows: [{ limit: 1, intervalMs: 100 }] })
    await fresh.block(60_000)
    clock.advance(30_000)
    expect(await fresh.check()).toMatchObject({ allowed: false, retryAfterMs: 30_000 })
    if (s.raw) {
      const [key] = (await keysUnder(s.raw, s.prefix)).filter((k) => k.includes(`{${fresh.name}}`))
      expect(await s.raw.pttl(key)).toBeGreaterThan(50_000)
    }
    await fresh.reset()
    expect((await fresh.check()).allowed).toBe(true)
  })

  it('rejects a bad duration with ERR_INVALID_ARGUMENT', async () => {
    const l = makers.bucket()
    const p = new DistributedPacer(s.store, { key: name(), qps: 1 })
    const w = new SlidingWindowLimiter(s.store, { name: name(), windows: [{ limit: 1, intervalMs: 100 }] })
    for (const ms of [0, -1, 1.5, NaN, '10', undefined, 1e15]) {
      for (const target of [l, p, w]) {
        await expect(target.block(ms as any)).rejects.toMatchObject({ code: 'ERR_INVALID_ARGUMENT' })
      }
    }
  })
})
