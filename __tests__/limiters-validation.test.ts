// Bad limiter options and arguments: a typed error with a stable code, before anything
// touches the store (checked by looking at the store afterwards).
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import {
  BucketLimiter,
  ConcurrentLimiter,
  LeakyLimiter,
  ManualClock,
  PointsLimiter,
  WindowLimiter,
  type Store,
} from '../lib/entries/index.js'
import { STORE_KINDS, freshPrefix, keysUnder, makeStore, rawClient } from './helpers/stores.js'
import { codeOf } from './helpers/errors.js'

const BAD_INTEGERS: unknown[] = [0, -1, 1.5, NaN, Infinity, '10', null, {}, 2e9]

const KINDS = [
  ['BucketLimiter', BucketLimiter, 'limit'],
  ['WindowLimiter', WindowLimiter, 'limit'],
  ['LeakyLimiter', LeakyLimiter, 'limit'],
  ['PointsLimiter', PointsLimiter, 'points'],
] as const

describe.each(STORE_KINDS)('limiter input validation on %s', (kind) => {
  let store: Store
  let prefix: string
  const raw = kind === 'memory' ? null : rawClient(kind)
  beforeAll(async () => {
    prefix = freshPrefix()
    store = await makeStore(kind, { keyPrefix: prefix, clock: new ManualClock(1_800_000_000_000) })
  })
  afterAll(async () => {
    // nothing any test here did may have written a key
    if (raw) expect(await keysUnder(raw, prefix)).toEqual([])
    await store.close()
    raw?.disconnect()
  })

  describe.each(KINDS)('%s', (_, Limiter, limitName) => {
    const make = (o: Record<string, unknown>) => () =>
      new Limiter(store, { name: 'n', [limitName]: 5, interval: 'second', ...o } as never)

    it('rejects bad options with ERR_INVALID_CONFIG, synchronously', () => {
      expect(codeOf(make({}))).toBeUndefined()
      for (const value of [...BAD_INTEGERS, undefined])
        expect(codeOf(make({ [limitName]: value }))).toBe('ERR_INVALID_CONFIG')
      for (const interval of ['week', 0, -5, 1.5, NaN, null, undefined, 4e11]) {
        expect(codeOf(make({ interval }))).toBe('ERR_INVALID_CONFIG')
      }
      // a name is any text (issue-38-names) but empty, a lone surrogate, over 256 UTF-8 bytes or not a string
      for (const name of ['', 'a\uD800', 'ü'.repeat(129), 5, null, undefined, 'x'.repeat(257)]) {
        expect(codeOf(make({ name }))).toBe('ERR_INVALID_CONFIG')
      }
      for (const name of ['a b', 'a{b}', 'ü', 'a:b', 'user@example.com', 'ip-1.2.3.4']) {
        expect(codeOf(make({ name }))).toBeUndefined()
      }
      for (const waitTimeoutMs of [-1, 1.5, NaN, '5'])
        expect(codeOf(make({ waitTimeoutMs }))).toBe('ERR_INVALID_CONFIG')
      for (const ttlMs of [0, -1, 1.5, NaN]) expect(codeOf(make({ ttlMs }))).toBe('ERR_INVALID_CONFIG')
      expect(codeOf(make({ policy: 'ignore' }))).toBe('ERR_INVALID_CONFIG')
      expect(codeOf(make({ limitt: 5 }))).toBe('ERR_INVALID_CONFIG')
      expect(codeOf(() => new Limiter({} as never, { name: 'n', [limitName]: 1, interval: 1 } as never))).toBe(
        'ERR_INVALID_CONFIG',
      )
      expect(codeOf(() => new Limiter(store, null as never))).toBe('ERR_INVALID_CONFIG')
    })

    it('rejects bad weights and options with ERR_INVALID_ARGUMENT, before the store', async () => {
      const l = make({})() as InstanceType<typeof BucketLimiter>
      for (const weight of [-1, 1.5, NaN, Infinity, '1', null, 6]) {
        await expect(l.check(weight as never)).rejects.toMatchObject({ code: 'ERR_INVALID_ARGUMENT' })
      }
      await expect(l.withinLimit('fn' as never)).rejects.toMatchObject({ code: 'ERR_INVALID_ARGUMENT' })
      await expect(l.withinLimit(() => 1, { weight: 6 } as never)).rejects.toMatchObject({
        code: 'ERR_INVALID_ARGUMENT',
      })
      await expect(l.withinLimit(() => 1, { wieght: 1 } as never)).rejects.toMatchObject({
        code: 'ERR_INVALID_ARGUMENT',
      })
      await expect(l.withinLimit(() => 1, { signal: {} } as never)).rejects.toMatchObject({
        code: 'ERR_INVALID_ARGUMENT',
      })
    })
  })

  it('ConcurrentLimiter rejects bad options and arguments before the store', async () => {
    const make = (o: Record<string, unknown>) => () =>
      new ConcurrentLimiter(store, { name: 'c', limit: 2, ...o } as never)
    expect(codeOf(make({}))).toBeUndefined()
    for (const limit of BAD_INTEGERS) expect(codeOf(make({ limit }))).toBe('ERR_INVALID_CONFIG')
    for (const lockTimeoutMs of [0, -1, 1.5, NaN, '1'])
      expect(codeOf(make({ lockTimeoutMs }))).toBe('ERR_INVALID_CONFIG')
    expect(codeOf(make({ interval: 'second' }))).toBe('ERR_INVALID_CONFIG')
    expect(codeOf(make({ ttlMs: 69_999 }))).toBe('ERR_INVALID_CONFIG') // < 2 * (lockTimeoutMs + waitTimeoutMs)
    expect(codeOf(make({ ttlMs: 70_000 }))).toBeUndefined()
    const c = make({})() as ConcurrentLimiter
    await expect(c.acquire({ signal: 'x' } as never)).rejects.toMatchObject({ code: 'ERR_INVALID_ARGUMENT' })
    await expect(c.withinLimit(null as never)).rejects.toMatchObject({ code: 'ERR_INVALID_ARGUMENT' })
    await expect(c.acquire({ signal: AbortSignal.abort() })).rejects.toMatchObject({ code: 'ERR_ABORTED' })
  })

  it('PointsLimiter rejects a bad estimate or a bad report of points used', async () => {
    const p = new PointsLimiter(store, { name: 'p', points: 10, interval: 1000 })
    await expect(p.withinLimit(() => 1, { estimate: 11 })).rejects.toMatchObject({ code: 'ERR_INVALID_ARGUMENT' })
    await expect(p.withinLimit(() => 1, { estimate: -1 })).rejects.toMatchObject({ code: 'ERR_INVALID_ARGUMENT' })
  })
})
