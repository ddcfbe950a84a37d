// block(ms): upstream back-pressure on the pacer and the rate limiters, on every store with a
// ManualClock: nobody is admitted on the name until the block ends, counts are kept, a longer
// block is never shortened, reset ends it, and the key lives at least as long as the block.
import { describe, expect, it } from 'vitest'
import {
  BucketLimiter,
  DistributedPacer,
  LeakyLimiter,
  ManualClock,
  PacerComposite,
  PointsLimiter,
  SlidingWindowLimiter,
  WindowLimiter,
} from '../lib/entries/index.js'
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

  // issue 24: block() takes what upstreams send, a Retry-After value (DESIGN §7)
  describe('issue-24-block-retry-after: block({ retryAfter })', () => {
    // each target, and how to tell whether a call of weight 1 would be admitted now
    const targets = {
      bucket: () => makers.bucket(),
      window: () => makers.window(),
      leaky: () => makers.leaky(),
      points: () => makers.points(),
      sliding: () => new SlidingWindowLimiter(s.store, { name: name(), windows: [{ limit: 5, intervalMs: 60_000 }] }),
      pacer: () => new DistributedPacer(s.store, { key: name(), qps: 10, maxBurst: 5 }),
      composite: () =>
        new PacerComposite([
          new DistributedPacer(s.store, { key: name(), qps: 10, maxBurst: 5 }),
          new PacerComposite([new DistributedPacer(s.store, { key: name(), qps: 1, maxBurst: 5 })]),
        ]),
    }
    type Target = ReturnType<(typeof targets)[keyof typeof targets]>
    /** ms until weight 1 is admitted (0: now), charging nothing */
    const waitOf = async (t: Target): Promise<number> => {
      if (t instanceof DistributedPacer || t instanceof PacerComposite) return (await t.rateLimit(0)).delayMs
      const d = await t.peek()
      return d.allowed ? 0 : d.retryAfterMs
    }
    const names = Object.keys(targets) as (keyof typeof targets)[]

    it.each(names)('%s: delta-seconds (string or number, fractions rounded up) block that long', async (which) => {
      for (const [retryAfter, ms] of [
        ['2', 2000],
        [' 3 ', 3000],
        [4, 4000],
        ['1.5', 1500],
        [0.0001, 1],
        ['0.0011', 2],
      ] as const) {
        clock.set(T0)
        const t = targets[which]()
        await t.block({ retryAfter })
        expect(await waitOf(t)).toBe(ms)
        clock.advance(ms - 1)
        expect(await waitOf(t)).toBe(1)
        clock.advance(1)
        expect(await waitOf(t)).toBe(0)
      }
    })

    it.each(names)('%s: an HTTP-date blocks until then, measured on the store clock', async (which) => {
      clock.set(T0 + 250)
      const t = targets[which]()
      // IMF-fixdate, and the obsolete rfc850 and asctime forms of the same second
      const at = new Date(T0 + 5000)
      const imf = at.toUTCString()
      expect(imf).toMatch(/^[A-Z][a-z]{2}, \d{2} [A-Z][a-z]{2} \d{4} \d{2}:\d{2}:\d{2} GMT$/)
      await t.block({ retryAfter: imf })
      expect(await waitOf(t)).toBe(4750)
      const [day, dd, mon, yyyy, time] = imf.replace(',', '').split(' ')
      const long = new Intl.DateTimeFormat('en-US', { weekday: 'long', timeZone: 'UTC' }).format(at)
      const t2 = targets[which]()
      await t2.block({ retryAfter: `${long}, ${dd}-${mon}-${yyyy.slice(2)} ${time} GMT` })
      expect(await waitOf(t2)).toBe(4750)
      const t3 = targets[which]()
      await t3.block({ retryAfter: `${day} ${mon} ${String(Number(dd)).padStart(2, ' ')} ${time} ${yyyy}` })
      expect(await waitOf(t3)).toBe(4750)
      clock.set(T0 + 5000)
      for (const x of [t, t2, t3]) expect(await waitOf(x)).toBe(0)
    })

    it.each(names)('%s: 0 and a past date block nothing and resolve', async (which) => {
      clock.set(T0)
      const t = targets[which]()
      for (const retryAfter of ['0', 0, '0.000', new Date(T0 - 1000).toUTCString(), new Date(T0).toUTCString()]) {
        await expect(t.block({ retryAfter })).resolves.toBeUndefined()
      }
      expect(await waitOf(t)).toBe(0)
      // the README's old example: block(Number(header) * 1000) threw on Retry-After: 0
      await expect(t.block(Number('0') * 1000)).rejects.toMatchObject({ code: 'ERR_INVALID_ARGUMENT' })
    })

    it.each(names)('%s: garbage is ERR_INVALID_ARGUMENT and blocks nothing', async (which) => {
      clock.set(T0)
      const t = targets[which]()
      for (const retryAfter of [
        '',
        'soon',
        '-1',
        -1,
        '1e3',
        '0x10',
        '1,5',
        NaN,
        Infinity,
        null,
        undefined,
        true,
        ['5'],
        { seconds: 5 },
        'Sun, 06 Nov 2094 08:49:37', // no zone
        'Sun, 06 Nov 2094 08:49:37 CET',
        'Sun, 30 Feb 2094 08:49:37 GMT',
        'Sun, 06 Nov 2094 24:00:00 GMT',
        'Funday, 06-Nov-94 08:49:37 GMT',
        '2094-11-06T08:49:37Z', // ISO 8601 is not an HTTP-date
        '315360001', // more than 10 years
        new Date(T0 + 315_360_001_000).toUTCString(),
      ]) {
        await expect(t.block({ retryAfter } as any), String(retryAfter)).rejects.toMatchObject({
          code: 'ERR_INVALID_ARGUMENT',
        })
      }
      for (const arg of [{}, { retryAfter: '5', ms: 5 }, 'x', [5]]) {
        await expect(t.block(arg as any)).rejects.toMatchObject({ code: 'ERR_INVALID_ARGUMENT' })
      }
      expect(await waitOf(t)).toBe(0)
      // the longest accepted: 10 years
      await t.block({ retryAfter: '315360000' })
      expect(await waitOf(t)).toBe(315_360_000_000)
    })

    it('composite: blocks every member, nested ones included, each seen on its own', async () => {
      clock.set(T0)
      const a = new DistributedPacer(s.store, { key: name(), qps: 10, maxBurst: 5 })
      const b = new DistributedPacer(s.store, { key: name(), qps: 1 })
      const both = new PacerComposite([a, new PacerComposite([b]), a])
      await both.block({ retryAfter: '3' })
      expect((await a.rateLimit()).delayMs).toBe(3000)
      expect((await b.rateLimit()).delayMs).toBe(3000)
      await both.block(5000)
      const o = await both.rateLimit()
      expect(o.delayMs).toBe(5000)
      expect(o.pacer).toBe(a)
      // an empty composite blocks nothing, and still refuses garbage
      await expect(new PacerComposite([]).block({ retryAfter: '5' })).resolves.toBeUndefined()
      await expect(new PacerComposite([]).block({ retryAfter: 'x' })).rejects.toMatchObject({
        code: 'ERR_INVALID_ARGUMENT',
      })
    })
  })
})
