// issue-38-names: the names users name things by (`ip-1.2.3.4`, `user@example.com`, `ip-::1`,
// spaces, `/`, `:`, non-Latin scripts) name every limiter class, a sliding window, a fair
// tenant, a budget and a budget's dimension, on every store: each name its own limit (never
// shared with another name, however alike), under its own name in statistics; a name of
// `[A-Za-z0-9_-]` keeps the key it always had; what cannot name (empty, a lone surrogate,
// over 256 UTF-8 bytes, not a string) is refused with ERR_INVALID_CONFIG before any store call.
import { describe, expect, it } from 'vitest'
import {
  BucketLimiter,
  Budget,
  ConcurrentLimiter,
  FairTenant,
  LeakyLimiter,
  ManualClock,
  MemoryStore,
  PointsLimiter,
  SlidingCounterLimiter,
  SlidingWindowLimiter,
  WindowLimiter,
} from '../lib/entries/index.js'
import { STORE_KINDS, useStore } from './helpers/stores.js'
import { codeOf } from './helpers/errors.js'

/** Names alike in every way a packed or escaped key could confuse. */
const NAMES = [
  'ip-1.2.3.4',
  'user@example.com',
  'ip-::1',
  'ip-::2',
  'a b',
  'a/b',
  'a:b',
  'a_b',
  'a%3Ab',
  'a%253Ab',
  '{a}',
  'a}',
  'a\nb',
  '名前',
  'имя',
  '😀',
  'e\u0301',
  'é',
  'x'.repeat(256),
]
const T0 = 1_800_000_000_000

/** One decision of weight 1 on a limiter of limit 2 named `name`: true when admitted. */
type Make = (store: never, name: string) => () => Promise<boolean>
const MAKERS: Record<string, Make> = {
  BucketLimiter: (store, name) => {
    const l = new BucketLimiter(store, { name, limit: 2, interval: 'minute' })
    return async () => (await l.check()).allowed
  },
  WindowLimiter: (store, name) => {
    const l = new WindowLimiter(store, { name, limit: 2, interval: 'minute' })
    return async () => (await l.check()).allowed
  },
  LeakyLimiter: (store, name) => {
    const l = new LeakyLimiter(store, { name, limit: 2, interval: 'minute' })
    return async () => (await l.check()).allowed
  },
  PointsLimiter: (store, name) => {
    const l = new PointsLimiter(store, { name, points: 2, interval: 'minute' })
    return async () => (await l.check()).allowed
  },
  ConcurrentLimiter: (store, name) => {
    const l = new ConcurrentLimiter(store, { name, limit: 2, lockTimeoutMs: 60_000 })
    return async () => (await l.tryAcquire()) !== null
  },
  SlidingWindowLimiter: (store, name) => {
    const l = new SlidingWindowLimiter(store, { name, windows: [{ limit: 2, intervalMs: 60_000 }] })
    return async () => (await l.check()).allowed
  },
  SlidingCounterLimiter: (store, name) => {
    const l = new SlidingCounterLimiter(store, { name, windows: [{ limit: 2, intervalMs: 60_000 }] })
    return async () => (await l.check()).allowed
  },
  Budget: (store, name) => {
    // the dimension carries the name too
    const b = new Budget(store, { name, dimensions: { [name]: { limit: 2, intervalMs: 60_000, maxBurst: 1 } } })
    return async () => {
      try {
        await b.reserve({ [name]: 1 }, { maxWaitMs: 0 })
        return true
      } catch (err) {
        if ((err as { code?: string }).code === 'ERR_OVER_LIMIT') return false
        throw err
      }
    }
  },
}

describe.each(STORE_KINDS)('issue-38-names on %s', (kind) => {
  const clock = new ManualClock(T0)
  const s = useStore(kind, { clock })

  it.each(Object.keys(MAKERS))('%s: every name its own limit of 2, never shared', async (cls) => {
    const take = NAMES.map((name) => MAKERS[cls](s.store as never, name))
    // two each: admitted, whatever the other names hold
    for (let round = 0; round < 2; round++) {
      for (const [i, t] of take.entries()) expect(await t(), `${cls} ${JSON.stringify(NAMES[i])}`).toBe(true)
    }
    // a third: refused, for every name
    for (const [i, t] of take.entries()) expect(await t(), `${cls} ${JSON.stringify(NAMES[i])}`).toBe(false)
  })

  it('FairTenant: every name its own counts', async () => {
    const rules = [{ queue: 'slow', threshold: 1, perMs: 60_000 }]
    for (const [i, name] of NAMES.entries()) {
      const f = new FairTenant(s.store, { name, rules })
      expect(await f.assign('t', `job-${i}-1`, 'default')).toBe('default')
      // the second job of the tenant under this name goes slow; other names are untouched
      expect(await f.assign('t', `job-${i}-2`, 'default'), JSON.stringify(name)).toBe('slow')
    }
  })

  it('statistics list each limiter under its own name', async () => {
    const names = NAMES.slice(0, 6)
    for (const name of names)
      await new BucketLimiter(s.store, { name: `stats ${name}`, limit: 5, interval: 'minute' }).check()
    await (s.store as unknown as { _flushStats(): Promise<void> })._flushStats?.()
    const listed = new Set((await s.store.limiters()).filter((l) => l.kind === 'bucket').map((l) => l.name))
    for (const name of names) expect(listed.has(`stats ${name}`), JSON.stringify(name)).toBe(true)
  })
})

describe('issue-38-names: keys and refusals', () => {
  it('a name of [A-Za-z0-9_-] keeps its key; others are escaped into the hash tag only where they must be', () => {
    const store = new MemoryStore({ keyPrefix: 'p' })
    const key = (name: string) =>
      (new BucketLimiter(store, { name, limit: 1, interval: 'second' }) as never as { _storeKey: string })._storeKey
    expect(key('api_user-42')).toBe('p:bucket:{api_user-42}')
    expect(key('user@example.com')).toBe('p:bucket:{user@example.com}')
    expect(key('{a}')).toBe('p:bucket:{%7Ba%7D}')
    expect(key('a%b')).toBe('p:bucket:{a%25b}')
  })

  it('refuses what cannot name, with ERR_INVALID_CONFIG, before any store call', () => {
    const store = new MemoryStore()
    for (const name of ['', 'u\uD800', '\uDC00x', 'é'.repeat(129), 'x'.repeat(257), 5, null, undefined, ['a']]) {
      for (const make of [
        () => new BucketLimiter(store, { name: name as never, limit: 1, interval: 'second' }),
        () => new ConcurrentLimiter(store, { name: name as never, limit: 1 }),
        () => new SlidingWindowLimiter(store, { name: name as never, windows: [{ limit: 1, intervalMs: 1000 }] }),
        () => new SlidingCounterLimiter(store, { name: name as never, windows: [{ limit: 1, intervalMs: 1000 }] }),
        () => new FairTenant(store, { name: name as never, rules: [{ queue: 'q', threshold: 1, perMs: 1000 }] }),
        () => new Budget(store, { name: name as never, dimensions: { a: { limit: 1, intervalMs: 1000 } } }),
      ]) {
        expect(codeOf(make), JSON.stringify(name)).toBe('ERR_INVALID_CONFIG')
      }
      // a dimension is named by a property key, always a string
      if (typeof name === 'string') {
        const dims = { [name]: { limit: 1, intervalMs: 1000 } }
        expect(
          codeOf(() => new Budget(store, { name: 'b', dimensions: dims })),
          JSON.stringify(name),
        ).toBe('ERR_INVALID_CONFIG')
      }
    }
    // the message names the type of what was given
    expect(() => new BucketLimiter(store, { name: 5 as never, limit: 1, interval: 'second' })).toThrow(
      /got the number 5/,
    )
  })
})
