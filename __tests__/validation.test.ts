// Bad input gets a typed error with a stable code before anything touches the store.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import {
  DistributedPacer,
  ErrorCodes,
  ManualClock,
  MemoryStore,
  OverLimitError,
  PacerComposite,
  RedisStore,
  SluiceError,
  type Store,
} from '../lib/entries/index.js'
import { STORE_KINDS, freshPrefix, keysUnder, makeStore, rawClient, redisUrl } from './helpers/stores.js'
import { codeOf } from './helpers/errors.js'
import { QuotaLimiter } from '../lib/entries/index.js'
import { createRequire } from 'node:module'

// the HTTP doors' counter names (lib/doors/http/key.js has no public types)
const { counterName } = createRequire(__filename)('../lib/doors/http/key.js') as {
  counterName: (identifier: string, key: string) => string
}

const BAD_NUMBERS: unknown[] = [NaN, Infinity, -Infinity, '10', null, {}, 1e12, -1]

describe.each(STORE_KINDS)('input validation on %s', (kind) => {
  let store: Store
  let prefix: string
  const raw = kind === 'memory' ? null : rawClient(kind)
  beforeAll(async () => {
    prefix = freshPrefix()
    store = await makeStore(kind, { keyPrefix: prefix, clock: new ManualClock(1_800_000_000_000) })
  })
  afterAll(async () => {
    await store.close()
    raw?.disconnect()
  })

  const make = (options: unknown) => () => new DistributedPacer(store, options as never)

  it('rejects bad pacer options with ERR_INVALID_CONFIG, synchronously', () => {
    for (const qps of [0, ...BAD_NUMBERS, undefined]) {
      expect(codeOf(make({ key: 'k', qps }))).toBe('ERR_INVALID_CONFIG')
    }
    for (const maxBurst of BAD_NUMBERS) {
      expect(codeOf(make({ key: 'k', qps: 1, maxBurst }))).toBe('ERR_INVALID_CONFIG')
    }
    for (const burstAllowanceFactor of [0, 1.5, ...BAD_NUMBERS]) {
      expect(codeOf(make({ key: 'k', qps: 1, burstAllowanceFactor }))).toBe('ERR_INVALID_CONFIG')
    }
    for (const key of ['', 5, null, undefined, {}, 'x'.repeat(513)]) {
      expect(codeOf(make({ key, qps: 1 }))).toBe('ERR_INVALID_CONFIG')
    }
    expect(codeOf(make({ key: 'k', qps: 1, qpss: 2 }))).toBe('ERR_INVALID_CONFIG')
    expect(codeOf(make(null))).toBe('ERR_INVALID_CONFIG')
    expect(codeOf(make('k'))).toBe('ERR_INVALID_CONFIG')
    expect(codeOf(() => new DistributedPacer({} as never, { key: 'k', qps: 1 }))).toBe('ERR_INVALID_CONFIG')
    expect(codeOf(() => new PacerComposite('x' as never))).toBe('ERR_INVALID_CONFIG')
    expect(codeOf(() => new PacerComposite([{} as never]))).toBe('ERR_INVALID_CONFIG')
  })

  it('accepts the edges of every range', async () => {
    const p = new DistributedPacer(store, { key: 'edges', qps: 1e9, maxBurst: 1e9, burstAllowanceFactor: 1 })
    expect((await p.rateLimit(1e9)).delayMs).toBe(0)
    expect((await p.rateLimit(0)).delayMs).toBe(0)
    for (const key of ['x'.repeat(512), '{'.repeat(512), '語'.repeat(512), '😀'.repeat(256)]) {
      expect((await new DistributedPacer(store, { key, qps: 1 }).rateLimit()).delayMs).toBe(0)
    }
    const tiny = new DistributedPacer(store, { key: 'tiny', qps: 1e-6, maxBurst: 0, burstAllowanceFactor: 1e-9 })
    expect((await tiny.rateLimit(1e-9)).delayMs).toBe(0)
  })

  it('rejects bad weights with ERR_INVALID_ARGUMENT and writes nothing', async () => {
    const p = new DistributedPacer(store, { key: 'weights', qps: 1 })
    const c = new PacerComposite([p])
    const calls = [
      (w: never) => p.pace(w),
      (w: never) => p.rateLimit(w),
      (w: never) => c.pace(w),
      (w: never) => c.rateLimit(w),
    ]
    for (const weight of [...BAD_NUMBERS, -0.5, true]) {
      for (const call of calls) {
        const promise = call(weight as never)
        await expect(promise).rejects.toBeInstanceOf(SluiceError)
        await expect(promise).rejects.toMatchObject({ code: 'ERR_INVALID_ARGUMENT' })
      }
    }
    if (raw) expect((await keysUnder(raw, prefix)).filter((k) => k.includes('{weights}'))).toEqual([])
  })

  it('extreme but valid schedules work and keep working', async () => {
    const slow = new DistributedPacer(store, { key: 'slow', qps: 1e-6, maxBurst: 1e9, burstAllowanceFactor: 1e-9 })
    for (let i = 0; i < 3; i++) await slow.pace(1e9)
    // delays are reported up to 9e15 µs (~285 years): exact, and never 0 for a refusal
    expect((await slow.pace(1e9)).delayMs).toBe(9e12)
    expect((await slow.rateLimit(1e9)).delayMs).toBe(9e12)
    if (raw) {
      const ttl = await raw.pttl(`${prefix}:pacer:{slow}`)
      expect(ttl).toBeGreaterThan(0)
      expect(ttl).toBeLessThanOrEqual(315_360_000_000)
    }
  })

  it('undefined weight means 1', async () => {
    const p = new DistributedPacer(store, { key: 'default-weight', qps: 1, maxBurst: 1 })
    expect((await p.rateLimit(undefined)).reason).toContain('weight=1,')
  })

  it('no input leaves a key unusable', async () => {
    const p = new DistributedPacer(store, { key: 'sturdy', qps: 1 })
    for (const weight of [NaN, Infinity, -1, 1e12]) await p.rateLimit(weight).catch(() => undefined)
    expect(codeOf(() => new DistributedPacer(store, { key: 'sturdy', qps: 0 }))).toBe('ERR_INVALID_CONFIG')
    expect((await p.rateLimit()).delayMs).toBe(0)
    expect((await p.rateLimit()).delayMs).toBe(1000)
  })
})

describe('store options', () => {
  it('rejects bad store options with ERR_INVALID_CONFIG', async () => {
    for (const options of [
      { keyPrefix: '' },
      { keyPrefix: 'a{b' },
      { keyPrefix: 5 },
      { clock: {} },
      { nope: 1 },
      'x',
    ]) {
      expect(codeOf(() => new MemoryStore(options as never))).toBe('ERR_INVALID_CONFIG')
    }
    const bad = [
      { url: 'http://localhost' },
      { url: 5 },
      { cluster: [] },
      { cluster: ['redis://127.0.0.1:1', 5] },
      { poolSize: 0 },
      { poolSize: -1 },
      { poolSize: 65 },
      { poolSize: 1.5 },
      { commandTimeoutMs: -5 },
      { commandTimeoutMs: NaN },
      { connectTimeoutMs: 0 },
      { connectTimeoutMs: '100' },
      { keyPrefix: 'a}b' },
      { url: 'redis://[bad' },
    ]
    for (const options of bad) {
      await expect(RedisStore.connect(options as never)).rejects.toMatchObject({ code: 'ERR_INVALID_CONFIG' })
    }
  })

  it('ManualClock validates its input', () => {
    expect(codeOf(() => new ManualClock(NaN))).toBe('ERR_INVALID_ARGUMENT')
    expect(codeOf(() => new ManualClock(-1))).toBe('ERR_INVALID_ARGUMENT')
    const clock = new ManualClock(5)
    expect(codeOf(() => clock.advance(-1))).toBe('ERR_INVALID_ARGUMENT')
    expect(codeOf(() => clock.set(Infinity))).toBe('ERR_INVALID_ARGUMENT')
    clock.advance(10)
    expect(clock.now()).toBe(15)
    clock.set(3)
    expect(clock.now()).toBe(3)
  })

  it('error classes carry their codes and work with instanceof', () => {
    const e = new OverLimitError('over', { limiter: 'api', retryAfterMs: 10 })
    expect(e).toBeInstanceOf(SluiceError)
    expect(e).toBeInstanceOf(Error)
    expect(e.code).toBe('ERR_OVER_LIMIT')
    expect(e.limiter).toBe('api')
    expect(ErrorCodes).toContain('ERR_STORE_UNAVAILABLE')
  })

  it('a closed store rejects with ERR_CLOSED', async () => {
    const store = new MemoryStore()
    const p = new DistributedPacer(store, { key: 'k', qps: 1 })
    await store.close()
    await expect(p.pace()).rejects.toMatchObject({ code: 'ERR_CLOSED' })
  })
})

describe('secrets in errors', () => {
  it('no error or store object shows the password of a Redis URL', async () => {
    const { RedisStore } = await import('../lib/entries/index.js')
    const util = await import('node:util')
    const secret = 'Zq9pW0rdSECRET'
    const port = new URL(redisUrl()).port
    const seen: string[] = []
    const tries = [
      { url: `redis://user:${secret}@host:notaport` },
      { url: `redis://user:${secret}@:6379` },
      { url: `ftp://user:${secret}@host` },
      { url: `redis://user:${secret}@127.0.0.1:${port}` }, // WRONGPASS
      { url: `redis://user:${secret}@127.0.0.1:1`, connectTimeoutMs: 300 },
      { cluster: [`redis://user:${secret}@127.0.0.1:1`], connectTimeoutMs: 300 },
      { cluster: [`redis://user:${secret}@host:notaport`] },
    ]
    for (const options of tries) {
      try {
        const store = await RedisStore.connect(options)
        seen.push(util.inspect(store, { depth: Infinity }))
        await store.close()
      } catch (err) {
        const e = err as Error & { code: string; cause?: unknown }
        expect(e.code).toMatch(/^ERR_/)
        seen.push(e.message, String(e.stack), String(e.cause), util.inspect(e, { depth: Infinity }), JSON.stringify(e))
      }
    }
    // a store that starts down (whenDown) keeps the URL for its reconnects: never shown either
    const down = await RedisStore.connect({
      url: `redis://:${secret}@127.0.0.1:1`,
      whenDown: 'allow',
      connectTimeoutMs: 200,
    })
    seen.push(util.inspect(down, { depth: Infinity }), JSON.stringify(Object.keys(down)))
    await down.close()
    for (const text of seen) expect(text).not.toContain(secret)
    expect(seen.join(' ')).toContain('//***@')
  })
})

describe('a polluted Object.prototype', () => {
  it('changes no option: pacer, limiters, sliding windows, quotas, stores', async () => {
    const {
      MemoryStore,
      RedisStore,
      DistributedPacer,
      ConcurrentLimiter,
      BucketLimiter,
      SlidingWindowLimiter,
      QuotaLimiter,
    } = await import('../lib/entries/index.js')
    const proto = Object.prototype as any
    const polluted = {
      maxBurst: 100,
      policy: 'skip',
      waitTimeoutMs: 0,
      prefixOverride: 'shared',
      url: 'redis://polluted:1',
      windows: [{ limit: 1000, intervalMs: 1 }],
      lockTimeoutMs: 1,
    }
    Object.assign(proto, polluted)
    try {
      const store = new MemoryStore()
      const pacer = new DistributedPacer(store, { key: 'p', qps: 1 })
      expect((await pacer.rateLimit()).delayMs).toBe(0) // the first overflowing call is free
      expect((await pacer.rateLimit()).delayMs).toBeGreaterThan(0) // maxBurst stayed 0
      const mutex = new ConcurrentLimiter(store, { name: 'm', limit: 1 })
      expect((mutex as any)._policy).toBe('raise')
      expect((mutex as any)._waitTimeoutMs).toBe(5000)
      expect((mutex as any)._lockTimeoutMs).toBe(30_000)
      const bucket = new BucketLimiter(store, { name: 'b', limit: 1, interval: 'hour' })
      expect((bucket as any)._policy).toBe('raise')
      expect(() => new SlidingWindowLimiter(store, { name: 's' } as any)).toThrow(
        expect.objectContaining({ code: 'ERR_INVALID_CONFIG' }),
      )
      const quotas = new QuotaLimiter(store)
      const q = [{ windowSeconds: 60, granularitySeconds: 10, limit: 1 }]
      // without the pollution each org has its own quota: both are granted
      const grants = await quotas.checkAndUseQuotas([
        { prefix: 'org-a', requested: 1, quotas: q },
        { prefix: 'org-b', requested: 1, quotas: q },
      ])
      expect(grants.map((g) => g.granted)).toEqual([1, 1])
      // the store's url stays the default, not the polluted one
      const err = await RedisStore.connect({ connectTimeoutMs: 300 }).then(
        (s) => s.close().then(() => null),
        (e) => e,
      )
      if (err !== null) expect(String(err.message)).not.toContain('polluted')
      await store.close()
    } finally {
      for (const k of Object.keys(polluted)) delete proto[k]
    }
  })
})

describe('keys with lone surrogates', () => {
  // "u\uD800", "u\uDC00" and "u\uFFFD" all became U+FFFD at the native boundary and shared one
  // counter: a key is refused with a code where it goes to the store as text, and kept
  // distinct where sluice names the counter itself (the HTTP doors' keys)
  const lone = ['u\uD800', 'u\uDC00', 'x\uDBFF\uDBFF', '\uDFFFy']

  it('pacer keys, key prefixes and quota prefixes are refused with ERR_INVALID_CONFIG', async () => {
    const store = new MemoryStore()
    for (const key of lone) {
      expect(codeOf(() => new DistributedPacer(store, { key, qps: 1 }))).toBe('ERR_INVALID_CONFIG')
      expect(codeOf(() => new MemoryStore({ keyPrefix: key }))).toBe('ERR_INVALID_CONFIG')
      const quotas = [{ windowSeconds: 10, granularitySeconds: 1, limit: 1 }]
      const err = await new QuotaLimiter(store)
        .checkAndUseQuotas([{ prefix: key, requested: 1, quotas }])
        .catch((e) => e)
      expect(err.code).toBe('ERR_INVALID_CONFIG')
      const over = [{ windowSeconds: 10, granularitySeconds: 1, limit: 1, prefixOverride: key }]
      expect(
        (
          await new QuotaLimiter(store)
            .checkAndUseQuotas([{ prefix: 'ok', requested: 1, quotas: over }])
            .catch((e) => e)
        ).code,
      ).toBe('ERR_INVALID_CONFIG')
    }
    // well-formed text, astral characters included, is a key like any other
    expect(new DistributedPacer(store, { key: 'u\uFFFD-😀', qps: 1 }).key).toBe('u\uFFFD-😀')
    await store.close()
  })

  it('HTTP door keys stay distinct: one counter per key, never merged', () => {
    const names = ['u\uD800', 'u\uDC00', 'u\uFFFD', 'u\uD800\uDC00', 'u-ud800', 'u\uD800x', 'u\uDBFF'].map((k) =>
      counterName('api', k),
    )
    expect(new Set(names).size).toBe(names.length)
    for (const n of names) expect(n).toMatch(/^[A-Za-z0-9_-]+$/)
    // a well-formed key is named as before
    expect(counterName('api', 'u\uFFFD')).toBe('api_u-ef-bf-bd')
    // a key too long for a name is hashed from its code units: still distinct
    const long = 'k'.repeat(400)
    expect(counterName('api', `${long}\uD800`)).not.toBe(counterName('api', `${long}\uDC00`))
  })
})
