// The pacer behaviour suite, written once, run on every store with a ManualClock.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import {
  DistributedPacer,
  ManualClock,
  MemoryStore,
  PacerComposite,
  SluiceError,
  type Store,
} from '../lib/entries/index.js'
import { STORE_KINDS, freshPrefix, keysUnder, makeStore, rawClient } from './helpers/stores.js'

const T0 = 1_800_000_000_000 // ms

describe.each(STORE_KINDS)('DistributedPacer on %s', (kind) => {
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
    await store.close()
    raw?.disconnect()
  })

  let n = 0
  const pacer = (o: { qps: number; maxBurst?: number; burstAllowanceFactor?: number }) =>
    new DistributedPacer(store, { key: `k${n++}`, ...o })

  it('lets maxBurst + 1 calls through at once, then spaces them at 1/qps', async () => {
    const p = pacer({ qps: 10, maxBurst: 2 })
    const delays = []
    for (let i = 0; i < 6; i++) delays.push((await p.pace()).delayMs)
    expect(delays).toEqual([0, 0, 0, 100, 200, 300])
  })

  it('reports the reference reason format', async () => {
    const p = pacer({ qps: 10, maxBurst: 2 })
    expect((await p.pace()).reason).toBe('watermark=0.00/2 + weight=1, delayMs=0')
    expect((await p.pace(0.5)).reason).toBe('watermark=1.00/2 + weight=0.5, delayMs=0')
    await p.pace()
    expect((await p.pace()).reason).toBe('watermark=2.00/2 + weight=1, delayMs=100')
  })

  it('keeps the key as given', () => {
    expect(pacer({ qps: 1 }).key).toMatch(/^k\d+$/)
    expect(new DistributedPacer(store, { key: 'a{b}', qps: 1 }).key).toBe('a{b}')
  })

  it('concurrent pace calls in one tick get consecutive slots', async () => {
    const p = pacer({ qps: 10 })
    const outcomes = await Promise.all([p.pace(), p.pace(), p.pace(), p.pace()])
    expect(outcomes.map((o) => o.delayMs)).toEqual([0, 100, 200, 300])
  })

  it('many calls in one tick (several script calls) keep their call order', async () => {
    const p = pacer({ qps: 1000 })
    const outcomes = await Promise.all(Array.from({ length: 300 }, () => p.pace()))
    expect(outcomes.map((o) => o.delayMs)).toEqual(Array.from({ length: 300 }, (_, i) => i))
  })

  it('rateLimit refuses until the tail, exactly, and admits at it', async () => {
    const p = pacer({ qps: 10 })
    expect((await p.rateLimit()).delayMs).toBe(0)
    clock.advance(30)
    expect((await p.rateLimit()).delayMs).toBe(70)
    clock.advance(69.999)
    expect((await p.rateLimit()).delayMs).toBe(1)
    clock.advance(0.001)
    expect((await p.rateLimit()).delayMs).toBe(0)
  })

  it('a refused rateLimit charges nothing', async () => {
    const p = pacer({ qps: 1 })
    expect((await p.rateLimit()).delayMs).toBe(0)
    for (let i = 0; i < 5; i++) {
      clock.advance(100)
      expect((await p.rateLimit()).delayMs).toBe(1000 - 100 * (i + 1))
    }
    clock.advance(500)
    expect((await p.rateLimit()).delayMs).toBe(0)
  })

  it('rateLimit under overload admits at most maxBurst + qps*T (+ the opening call)', async () => {
    const qps = 10
    const maxBurst = 5
    const p = pacer({ qps, maxBurst })
    const admitted: number[] = []
    const start = clock.now()
    // 1000 calls/s offered for 3 s, counted per call
    for (let i = 0; i < 3000; i++) {
      if ((await p.rateLimit()).delayMs === 0) admitted.push(clock.now() - start)
      clock.advance(1)
    }
    // every span [admitted[i], admitted[j]] holds at most maxBurst + qps*T + 1
    for (let i = 0; i < admitted.length; i++) {
      for (let j = i; j < admitted.length; j++) {
        const spanS = (admitted[j] - admitted[i]) / 1000
        expect(j - i + 1).toBeLessThanOrEqual(maxBurst + qps * spanS + 1)
      }
    }
    // the reference admits ~15.7/s here; the fixed pacer gives the burst then exactly qps
    expect(admitted.length).toBeLessThanOrEqual(maxBurst + 1 + qps * 3)
    expect(admitted.length).toBeGreaterThanOrEqual(maxBurst + qps * 3 - 1)
  })

  it('weight 0 is a probe: never charges, never jumps the queue', async () => {
    const p = pacer({ qps: 10 })
    expect((await p.pace(0)).delayMs).toBe(0)
    await p.pace()
    await p.pace() // queued to +100 ms
    clock.advance(10)
    expect((await p.pace(0)).delayMs).toBe(190)
    expect((await p.pace(0)).delayMs).toBe(190)
    expect((await p.pace()).delayMs).toBe(190)
  })

  it('fractional weights and bursts work', async () => {
    const p = pacer({ qps: 2, maxBurst: 1.5 })
    expect((await p.rateLimit(0.75)).delayMs).toBe(0)
    expect((await p.rateLimit(0.75)).delayMs).toBe(0)
    expect((await p.rateLimit(0.5)).delayMs).toBe(0) // first overflow is free
    expect((await p.rateLimit(0.5)).delayMs).toBe(250)
  })

  it('the bucket refills at qps * burstAllowanceFactor while idle', async () => {
    const p = pacer({ qps: 10, maxBurst: 4, burstAllowanceFactor: 0.5 })
    for (let i = 0; i < 4; i++) expect((await p.rateLimit()).delayMs).toBe(0)
    clock.advance(400) // leaks 10 * 0.5 * 0.4 = 2 units
    expect((await p.rateLimit()).delayMs).toBe(0)
    expect((await p.rateLimit()).delayMs).toBe(0)
    expect((await p.rateLimit()).delayMs).toBe(0) // overflow into an empty queue
    expect((await p.rateLimit()).delayMs).toBe(100)
  })

  it('keys with braces, percent signs and newlines stay distinct and in one slot', async () => {
    const keys = ['a', 'a{b}', '{a}', 'a}b{', 'a%7Bb%7D', 'line\nbreak']
    for (const key of keys) {
      const p = new DistributedPacer(store, { key, qps: 1 })
      expect((await p.rateLimit()).delayMs).toBe(0)
    }
    for (const key of keys) {
      const p = new DistributedPacer(store, { key, qps: 1 })
      expect((await p.rateLimit()).delayMs).toBeGreaterThan(0)
    }
    if (raw) {
      const written = await keysUnder(raw, prefix)
      for (const key of written) expect(key).toMatch(/^[^{}]*\{[^{}]*\}$/)
    }
  })

  it('pacers with the same key share state; other keyPrefixes do not', async () => {
    const a = new DistributedPacer(store, { key: 'shared', qps: 1 })
    const b = new DistributedPacer(store, { key: 'shared', qps: 1 })
    expect((await a.rateLimit()).delayMs).toBe(0)
    expect((await b.rateLimit()).delayMs).toBeGreaterThan(0)
    const other = await makeStore(kind, { clock })
    try {
      expect((await new DistributedPacer(other, { key: 'shared', qps: 1 }).rateLimit()).delayMs).toBe(0)
    } finally {
      await other.close()
    }
  })

  it('a weight above maxBurst passes on an idle key and holds the rest back', async () => {
    const p = pacer({ qps: 10, maxBurst: 5 })
    expect((await p.rateLimit(20)).delayMs).toBe(0)
    expect((await p.rateLimit()).delayMs).toBe(2000)
  })

  if (kind !== 'memory') {
    it('writes one key per pacer, with a TTL covering its queue', async () => {
      const p = pacer({ qps: 1 })
      for (let i = 0; i < 300; i++) await p.pace()
      const key = `${prefix}:pacer:{${p.key}}`
      const ttl = await raw!.pttl(key)
      // 300 queued seconds + 120 s margin
      expect(ttl).toBeGreaterThan(415_000)
      expect(ttl).toBeLessThanOrEqual(420_000)
      expect(await raw!.type(key)).toBe('string')
    })

    it('a state value it cannot parse is treated as a fresh key', async () => {
      const p = pacer({ qps: 1 })
      await raw!.set(`${prefix}:pacer:{${p.key}}`, 'garbage', 'PX', 60000)
      expect((await p.rateLimit()).delayMs).toBe(0)
      expect((await p.rateLimit()).delayMs).toBe(1000)
      // the right length, but NaNs: still a fresh key, never a poisoned one
      const q = pacer({ qps: 1 })
      await raw!.set(`${prefix}:pacer:{${q.key}}`, Buffer.alloc(24, 0xff), 'PX', 60000)
      expect((await q.rateLimit()).delayMs).toBe(0)
      expect((await q.rateLimit()).delayMs).toBe(1000)
    })

    it('a key of another type is a script error, and other keys still work', async () => {
      const p = pacer({ qps: 1 })
      await raw!.rpush(`${prefix}:pacer:{${p.key}}`, 'x')
      await raw!.pexpire(`${prefix}:pacer:{${p.key}}`, 600_000) // planted here: the keyspace scan wants a TTL on every key
      await expect(p.rateLimit()).rejects.toMatchObject({ code: 'ERR_SCRIPT' })
      expect((await pacer({ qps: 1 }).rateLimit()).delayMs).toBe(0)
    })
  }
})

describe.each(STORE_KINDS)('PacerComposite on %s', (kind) => {
  let clock: ManualClock
  let store: Store
  beforeAll(async () => {
    clock = new ManualClock(T0)
    store = await makeStore(kind, { clock })
  })
  afterAll(() => store.close())

  let n = 0
  const pacer = (o: { qps: number; maxBurst?: number }) => new DistributedPacer(store, { key: `c${n++}`, ...o })

  it('rateLimit charges no member when any member refuses', async () => {
    const user = pacer({ qps: 10, maxBurst: 100 })
    const global = pacer({ qps: 1 })
    const both = new PacerComposite([user, global])
    expect((await both.rateLimit()).delayMs).toBe(0)
    for (let i = 0; i < 3; i++) {
      const o = await both.rateLimit()
      expect(o.delayMs).toBe(1000)
      expect(o.pacer).toBe(global)
      expect(o.reason).toBe(`DistributedPacer ${global.key}\nwatermark=0.00/0 + weight=1, delayMs=1000`)
    }
    // the user pacer saw exactly one charge: 99 more fit in its bucket
    let admitted = 0
    while ((await user.rateLimit()).delayMs === 0) admitted++
    expect(admitted).toBe(100) // 99 in the bucket + the free overflow
  })

  it('rateLimit admits when every member admits, and charges every member', async () => {
    const a = pacer({ qps: 10, maxBurst: 1 })
    const b = pacer({ qps: 10, maxBurst: 1 })
    const both = new PacerComposite([a, b])
    expect(await both.rateLimit()).toEqual({
      delayMs: 0,
      reason: 'no delay',
      pacer: null,
      degraded: false,
    })
    // issue 29: the members' watermarks are sluice's own (not a field of the result)
    expect(Object.keys(await both.rateLimit(0))).toEqual(['delayMs', 'reason', 'pacer', 'degraded'])
    expect((await a.rateLimit()).delayMs).toBe(0)
    expect((await a.rateLimit()).delayMs).toBe(100)
    expect((await b.rateLimit()).delayMs).toBe(0)
  })

  it('pace reserves a slot in every member and reports the largest delay', async () => {
    const fast = pacer({ qps: 100 })
    const slow = pacer({ qps: 10 })
    const both = new PacerComposite([fast, slow])
    const delays = []
    for (let i = 0; i < 3; i++) delays.push((await both.pace()).delayMs)
    expect(delays).toEqual([0, 100, 200])
    expect((await fast.pace()).delayMs).toBe(30)
  })

  it('the first member wins ties; empty and nested composites', async () => {
    const a = pacer({ qps: 1 })
    const b = pacer({ qps: 1 })
    await a.pace()
    await b.pace()
    const o = await new PacerComposite([a, b]).rateLimit()
    expect(o.pacer).toBe(a)
    expect(await new PacerComposite([]).pace()).toEqual({
      delayMs: 0,
      reason: 'no pacers',
      pacer: null,
      degraded: false,
    })
    expect(JSON.stringify(await new PacerComposite([]).pace())).not.toContain('watermarks')
    const inner = new PacerComposite([pacer({ qps: 100 }), b])
    const outer = new PacerComposite([pacer({ qps: 100 }), inner])
    const nested = await outer.rateLimit()
    expect(nested.pacer).toBe(inner)
    expect(nested.reason).toBe(`DistributedPacer ${b.key}\nwatermark=0.00/0 + weight=1, delayMs=1000`)
    expect(inner.key).toBe('')
  })

  it('members on many keys (many cluster slots) stay all-or-nothing', async () => {
    const members = Array.from({ length: 8 }, () => pacer({ qps: 1, maxBurst: 2 }))
    const refusing = pacer({ qps: 1 })
    await refusing.rateLimit()
    const all = new PacerComposite([...members, refusing])
    for (let i = 0; i < 5; i++) expect((await all.rateLimit()).delayMs).toBeGreaterThan(0)
    for (const m of members) {
      // untouched: 2 in the bucket + the free overflow
      for (let i = 0; i < 3; i++) expect((await m.rateLimit()).delayMs).toBe(0)
      expect((await m.rateLimit()).delayMs).toBe(1000)
    }
  })
})

describe('MemoryStore housekeeping', () => {
  it('drops expired keys as new ones arrive, and pacers keep working across sweeps', async () => {
    const clock = new ManualClock(T0)
    const store = new MemoryStore({ clock })
    const live = new DistributedPacer(store, { key: 'live', qps: 0.001 }) // a 1000 s queue slot
    expect((await live.rateLimit()).delayMs).toBe(0)
    const old = new DistributedPacer(store, { key: 'old', qps: 1 })
    expect((await old.rateLimit()).delayMs).toBe(0)
    for (let i = 0; i < 5000; i++) await new DistributedPacer(store, { key: `a${i}`, qps: 1 }).rateLimit()
    clock.advance(200_000) // past every TTL of qps 1 (1 s + 120 s), inside live's
    for (let i = 0; i < 20000; i++) await new DistributedPacer(store, { key: `b${i}`, qps: 1 }).rateLimit()
    // sweeps ran (ids were freed and reused); state survived only where the TTL had not passed
    expect((await live.rateLimit()).delayMs).toBe(800_000)
    expect((await old.rateLimit()).delayMs).toBe(0)
    expect((await old.rateLimit()).delayMs).toBe(1000)
    expect((await new DistributedPacer(store, { key: 'b19999', qps: 1 }).rateLimit()).delayMs).toBe(1000)
  })
})

describe('composites and stores', () => {
  it('members must share one store', async () => {
    const a = await makeStore('memory')
    const b = await makeStore('memory')
    const p1 = new DistributedPacer(a, { key: 'x', qps: 1 })
    const p2 = new DistributedPacer(b, { key: 'x', qps: 1 })
    expect(() => new PacerComposite([p1, p2])).toThrow(SluiceError)
  })
})
