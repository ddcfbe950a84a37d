// Issue 36 item 8: request-chosen names no longer own the registry. The registry (a process's
// statistics book, a MemoryStore's, the one on Redis) admits by frequency: a name seen in one
// flush period cannot evict one seen in two or more, whoever makes the flood (per-user
// limiters, an HTTP door's clients); a door is one limiter over all its clients, its counts
// exact; one client of a door is still reset by its key (the CLI); memory stays bounded.
import { spawnSync } from 'node:child_process'
import { createRequire } from 'node:module'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { BucketLimiter, LeakyLimiter, ManualClock, MemoryStore, RedisStore, type Store } from '../lib/entries/index.js'
import {
  STORE_KINDS,
  freshPrefix,
  keysUnder,
  makeStore,
  rawClient,
  redisUrl,
  type StoreKind,
} from './helpers/stores.js'

const internal = createRequire(__filename)
const { Door } = internal('../lib/doors/http/door.js') as { Door: any }
const { doorConfig } = internal('../lib/doors/http/options.js') as { doorConfig: (options: object) => any }
const { MAX_LIMITERS, MAX_PROTECTED, MAX_BOOK_BYTES, StatsBook } = internal('../lib/store/stats.js') as {
  MAX_LIMITERS: number
  MAX_PROTECTED: number
  MAX_BOOK_BYTES: number
  StatsBook: any
}
const { createApi } = internal('../lib/doors/dashboard/api.js') as {
  createApi: (store: Store, groupOf: unknown) => any
}
const BIN = join(__dirname, '..', 'bin', 'sluice.js')

const T0 = 1_800_000_000_000
/** A flush period (RedisStore's default statsFlushMs; a MemoryStore's book counts in the same). */
const PERIOD = 5000
/** Names a flood sends between two flushes of a RedisStore (as its timer would write them). */
const PER_FLUSH = 2000

const door = (store: Store, options: object) =>
  new Door(doorConfig({ store, keyGenerator: (req: any) => req.key, ...options }))

/** A flush on a RedisStore (its timer's work, done now); nothing on a MemoryStore. */
const flush = (store: Store) => (store as any)._flushStats?.() ?? Promise.resolve()

/** `n` one-shot names from `source`, flushed every PER_FLUSH names. */
async function flood(store: Store, source: 'per-user' | 'door', n: number, tag: string) {
  const d = source === 'door' ? door(store, { identifier: `login-${tag}`, limit: 5, windowMs: 60_000 }) : null
  for (let from = 0; from < n; from += PER_FLUSH) {
    const calls = []
    for (let i = from; i < Math.min(n, from + PER_FLUSH); i++) {
      if (d !== null) calls.push(d.decide({ key: `api-key-${tag}-${i}` }, {}))
      else calls.push(new LeakyLimiter(store, { name: `user-${tag}-${i}`, limit: 20, interval: 'minute' }).check())
    }
    await Promise.all(calls)
    await flush(store)
  }
  return d
}

describe.each(STORE_KINDS)('the registry on %s', (kind: StoreKind) => {
  it.each([1_000, 11_000, 40_000])(
    'issue-36-registry-flood: a limiter used in two flush periods survives %i one-shot per-user names and door clients',
    async (n) => {
      for (const source of ['per-user', 'door'] as const) {
        const clock = new ManualClock(T0)
        const store = await makeStore(kind, { clock })
        try {
          const payments = new BucketLimiter(store, { name: 'payments', limit: 100, interval: 'hour' })
          await payments.check()
          await flush(store)
          clock.advance(PERIOD)
          await payments.check()
          await flush(store)
          clock.advance(1000) // the flood a second later
          const d = await flood(store, source, n, source)
          const listed = await store.limiters()
          expect(
            listed.some((l) => l.kind === 'bucket' && l.name === 'payments'),
            `${source} ${n}`,
          ).toBe(true)
          // a MemoryStore's registry; on Redis the store's and this process's book (each bounded)
          const bound = kind === 'memory' ? MAX_LIMITERS : 2 * MAX_LIMITERS
          expect(listed.length, `${source} ${n}`).toBeLessThanOrEqual(bound)
          expect(await payments.stats(), `${source} ${n}`).toMatchObject({ admitted: 2, refused: 0 })
          if (d !== null) {
            // the door is one limiter: no client of it is listed
            expect(listed.filter((l) => l.name.startsWith('login-')).map((l) => l.kind)).toEqual(['door'])
            expect(await (store as any)._statsOf('door', `login-${source}`)).toMatchObject({ admitted: n, refused: 0 })
          }
          if (kind !== 'memory') {
            const raw = rawClient(kind)
            try {
              const [zset] = (store as any)._registryKeys()
              expect(await raw.zcard(zset)).toBeLessThanOrEqual(MAX_LIMITERS)
              // the statistics hash of payments is still there
              expect(await raw.exists(`${store.keyPrefix}:stats:{bucket:payments}`)).toBe(1)
            } finally {
              raw.disconnect()
            }
          }
        } finally {
          await store.close()
        }
      }
    },
    120_000,
  )

  it('issue-36-registry-door-exact: a door of 1, 100 and 3,000 clients counts every request once, as one limiter', async () => {
    for (const clients of [1, 100, 3000]) {
      const clock = new ManualClock(T0)
      const store = await makeStore(kind, { clock })
      try {
        for (const algorithm of ['fixed', 'window', 'leaky'] as const) {
          const identifier = `door-${algorithm}`
          const limits = algorithm === 'window' ? { limit: 2, windowMs: 60_000 } : { limit: 2, windowMs: 60_000 }
          const d = door(store, { identifier, algorithm, ...limits })
          const several = door(store, {
            identifier: `${identifier}-2w`,
            algorithm,
            limits: [
              { limit: 2, windowMs: 60_000 },
              { limit: 10, windowMs: 3_600_000 },
            ],
          })
          for (const x of [d, several]) {
            const calls = []
            for (let round = 0; round < 3; round++) {
              for (let c = 0; c < clients; c++) calls.push(x.decide({ key: `c${c}` }, {}))
              await Promise.all(calls.splice(0))
            }
          }
          await flush(store)
          for (const name of [identifier, `${identifier}-2w`]) {
            expect(await (store as any)._statsOf('door', name), `${clients} ${name}`).toMatchObject({
              admitted: 2 * clients,
              refused: clients,
              admittedWeight: 2 * clients,
              refusedWeight: clients,
            })
          }
        }
        const listed = await store.limiters()
        expect(listed.map((l) => `${l.kind}:${l.name}`).sort()).toEqual(
          ['fixed', 'leaky', 'window'].flatMap((a) => [`door:door-${a}`, `door:door-${a}-2w`]).sort(),
        )
        const fixed = listed.find((l) => l.name === 'door-fixed')!
        expect(fixed.options).toEqual({ algorithm: 'fixed', windows: [{ limit: 2, windowMs: 60_000 }] })
      } finally {
        await store.close()
      }
    }
  }, 120_000)
})

describe('the registry in a process (a statistics book)', () => {
  /** A book on a clock: `use(name)` counts a decision of a limiter named `name`. */
  function book(exact: boolean) {
    let now = T0
    const b = new StatsBook(() => now, exact)
    const owners = new Map<string, object>()
    const use = (name: string, options: object = { limit: 1, intervalMs: 1000 }) => {
      let o = owners.get(name)
      if (o === undefined) {
        o = { _statsKind: 'bucket', _statsName: name, _statsOptions: () => options }
        if (owners.size < 1000) owners.set(name, o)
      }
      b.decision(o, true, 1, false, false)
    }
    return { b, use, advance: (ms: number) => (now += ms) }
  }

  it.each([false, true])(
    'issue-36-registry-protected: names seen in two periods survive floods of 1k to 40k names seen once (exact time: %s)',
    (exact) => {
      for (const n of [1_000, 11_000, 40_000]) {
        const { b, use, advance } = book(exact)
        const kept = Array.from({ length: 500 }, (_, i) => `kept-${i}`)
        for (const k of kept) use(k)
        if (!exact) b.take()
        advance(PERIOD)
        for (const k of kept) use(k)
        if (!exact) b.take()
        advance(1000)
        for (let i = 0; i < n; i++) {
          use(`flood-${i}`)
          if (!exact && i % PER_FLUSH === PER_FLUSH - 1) b.take()
        }
        const names = new Set(b.seen().map((l: any) => l.name))
        expect(
          kept.every((k) => names.has(k)),
          `${n}`,
        ).toBe(true)
        expect(b.seen().length).toBeLessThanOrEqual(MAX_LIMITERS)
      }
    },
  )

  it('issue-36-registry-memory-bounded: 40,000 names of 256 characters with large options stay within the entry and byte bounds', () => {
    const { b, use } = book(true)
    const big = {
      limit: 1,
      intervalMs: 1000,
      tenants: Object.fromEntries(Array.from({ length: 2000 }, (_, i) => [`t${i}`, { share: 0.01 }])),
    }
    let most = 0
    for (let i = 0; i < 40_000; i++) {
      use(`${String(i).padStart(6, '0')}${'x'.repeat(250)}`, i % 1000 === 0 ? big : { limit: 1, intervalMs: 1000 })
      most = Math.max(most, b.sizes.bytes)
    }
    expect(b.sizes.entries).toBeLessThanOrEqual(MAX_LIMITERS)
    expect(most).toBeLessThanOrEqual(MAX_BOOK_BYTES)
  })

  it('protected names beyond MAX_PROTECTED: the least recently used go back to probation, the rest stay', () => {
    const { b, use, advance } = book(true)
    const n = MAX_PROTECTED + 1
    for (let i = 0; i < n; i++) use(`p${i}`)
    advance(PERIOD)
    for (let i = 0; i < n; i++) use(`p${i}`)
    expect(b.sizes.protected).toBeLessThanOrEqual(MAX_PROTECTED)
    advance(1000)
    for (let i = 0; i < 20_000; i++) use(`flood-${i}`)
    const names = new Set(b.seen().map((l: any) => l.name))
    // the most recently used protected names are all there
    for (let i = n - MAX_PROTECTED + Math.ceil(MAX_PROTECTED / 10); i < n; i++) expect(names.has(`p${i}`)).toBe(true)
  })
})

describe('the registry on Redis (a mixed fleet of processes)', () => {
  it('issue-36-registry-fleet: a name used in two periods by two processes is protected; a flood from a third evicts only one-shot names', async () => {
    const clock = new ManualClock(T0)
    const keyPrefix = freshPrefix()
    const [a, b, c] = await Promise.all(
      [0, 1, 2].map(() => RedisStore.connect({ url: redisUrl(), keyPrefix, clock }) as Promise<Store>),
    )
    try {
      await new BucketLimiter(a, { name: 'payments', limit: 100, interval: 'hour' }).check()
      await flush(a)
      clock.advance(PERIOD)
      await new BucketLimiter(b, { name: 'payments', limit: 100, interval: 'hour' }).check()
      await flush(b)
      clock.advance(1000)
      await flood(c, 'per-user', 12_000, 'fleet')
      const listed = await c.limiters()
      expect(listed.some((l) => l.name === 'payments')).toBe(true)
      expect(await new BucketLimiter(c, { name: 'payments', limit: 100, interval: 'hour' }).stats()).toMatchObject({
        admitted: 2,
      })
      const raw = rawClient('redis')
      try {
        const keys = (c as any)._registryKeys() as string[]
        expect(await raw.zcard(keys[0])).toBeLessThanOrEqual(MAX_LIMITERS)
        expect(await raw.hlen(keys[1])).toBeLessThanOrEqual(MAX_LIMITERS)
        expect(await raw.hlen(keys[4])).toBeLessThanOrEqual(MAX_LIMITERS)
        // every registry key has a TTL
        for (const k of keys) expect(await raw.pttl(k)).toBeGreaterThan(0)
        // the statistics of evicted one-shot names went with them: at most the registry's worth remain
        const stats = (await keysUnder(raw, keyPrefix)).filter((k) => k.includes(':stats:{leaky:user-fleet-'))
        expect(stats.length).toBeLessThanOrEqual(MAX_LIMITERS)
      } finally {
        raw.disconnect()
      }
    } finally {
      await Promise.all([a, b, c].map((s) => s.close()))
    }
  }, 120_000)

  it('issue-36-registry-reset-key: `sluice reset <door> --key K` forgets one client of a door', async () => {
    const keyPrefix = freshPrefix()
    const store = await RedisStore.connect({ url: redisUrl(), keyPrefix })
    try {
      const d = door(store, { identifier: 'api', limit: 2, windowMs: 3_600_000 })
      for (const key of ['alice', 'bob']) for (let i = 0; i < 3; i++) await d.decide({ key }, {})
      await flush(store)
      const at = ['--redis', redisUrl(), '--prefix', keyPrefix]
      const run = (args: string[]) =>
        spawnSync(process.execPath, [BIN, ...args, ...at], {
          encoding: 'utf8',
          env: { ...process.env, SLUICE_REDIS_URL: '' },
          timeout: 20_000,
        })
      const whole = run(['reset', 'api', '--kind', 'door', '--yes'])
      expect(whole.status).toBe(2)
      expect(whole.stderr).toMatch(/--key/)
      const r = run(['reset', 'api', '--kind', 'door', '--key', 'alice', '--yes', '--json'])
      expect(r.stderr).toBe('')
      expect(r.status).toBe(0)
      expect(JSON.parse(r.stdout)).toEqual({ reset: true, kind: 'door', name: 'api', key: 'alice' })
      expect((await d.decide({ key: 'alice' }, {})).allowed).toBe(true)
      expect((await d.decide({ key: 'bob' }, {})).allowed).toBe(false)
      await flush(store)
      const stats = run(['stats', 'api', '--json'])
      expect(JSON.parse(stats.stdout).stats).toMatchObject({ admitted: 5, refused: 3 })
      // the dashboard's reset API does the same with `key`
      const api = createApi(store, (name: string) => name)
      expect(await api.reset('door', 'api', 'bob')).toEqual({ reset: true, kind: 'door', name: 'api', key: 'bob' })
      expect((await d.decide({ key: 'bob' }, {})).allowed).toBe(true)
      await expect(api.reset('door', 'api')).rejects.toMatchObject({ code: 'ERR_INVALID_ARGUMENT' })
    } finally {
      await store.close()
    }
  }, 60_000)
})

describe('a MemoryStore', () => {
  it('issue-36-registry-memory-store: the per-user pattern of the README cannot push out a named limiter', async () => {
    const clock = new ManualClock(T0)
    const store = new MemoryStore({ clock })
    const payments = new BucketLimiter(store, { name: 'payments', limit: 100, interval: 'hour' })
    await payments.check()
    clock.advance(PERIOD)
    await payments.check()
    clock.advance(1000)
    for (let id = 0; id < 11_000; id++) {
      await new LeakyLimiter(store, { name: `user-${id}`, limit: 20, interval: 'minute' }).check()
    }
    expect((await store.limiters()).some((l) => l.name === 'payments')).toBe(true)
    expect(await payments.stats()).toMatchObject({ admitted: 2 })
  })
})
