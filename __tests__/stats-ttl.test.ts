// Issue 24, item 7: statistics outlived their limits by 7 days. 40,000 user names against a
// 1 s window left 40,002 statistics hashes with 168 h TTLs after every limit had expired. A
// statistics hash now lives as long as its limit's state and at least two flush periods (at
// most statsTtlMs), refreshed with every write; the registry's cap deletes the hashes of the
// limiters it drops.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { DistributedPacer, RedisStore, WindowLimiter, ConcurrentLimiter } from '../lib/entries/index.js'
import { clusterNodes, freshPrefix, keysUnder, rawClient, redisUrl, REDIS_KINDS } from './helpers/stores.js'
import type { Cluster, Redis } from 'ioredis'

/** The store's internals these tests look at. */
interface Internals {
  _flushStats(): Promise<void>
  _statsKey(kind: string, name: string): string
  _registryKeys(): string[]
}
const internal = (store: RedisStore) => store as unknown as Internals

/** A store with `statsFlushMs` and a plain client to look at what it wrote, per describe. */
function onServer(kind: 'redis' | 'cluster') {
  const ctx = {
    raw: undefined as unknown as Redis | Cluster,
    connect: (keyPrefix: string, statsFlushMs = 600_000) =>
      RedisStore.connect({
        keyPrefix,
        statsFlushMs,
        ...(kind === 'redis' ? { url: redisUrl() } : { cluster: clusterNodes() }),
      }),
  }
  beforeAll(() => {
    ctx.raw = rawClient(kind)
  })
  afterAll(() => ctx.raw.disconnect())
  return ctx
}

describe.each(REDIS_KINDS)('issue-24-stats-ttl on %s', (kind) => {
  const server = onServer(kind)
  const { connect } = server

  it('per-user limiters: each statistics hash expires with its limit, not 7 days later', async () => {
    const prefix = freshPrefix()
    const store = await connect(prefix, 200)
    try {
      const users = Array.from({ length: 500 }, (_, i) => `user-${i}`)
      await Promise.all(users.map((u) => new WindowLimiter(store, { name: u, limit: 5, interval: 'second' }).check()))
      const hour = new WindowLimiter(store, { name: 'hourly', limit: 5, interval: 'hour' })
      await hour.check()
      const lease = await new ConcurrentLimiter(store, { name: 'c', limit: 2, lockTimeoutMs: 30_000 }).acquire()
      await lease.release()
      await internal(store)._flushStats()
      const statsKeys = (await keysUnder(server.raw, prefix)).filter((k) => k.startsWith(`${prefix}:stats:`))
      expect(statsKeys.length).toBe(502)
      for (const k of statsKeys) {
        const ttl = await server.raw.pttl(k)
        if (k.includes('hourly')) {
          expect(ttl).toBeGreaterThan(3_500_000)
          expect(ttl).toBeLessThanOrEqual(3_600_000)
        } else if (k.includes('{concurrent:')) {
          expect(ttl).toBeGreaterThan(25_000)
          expect(ttl).toBeLessThanOrEqual(30_000)
        } else {
          // a 1 s window: its own second, at least two flush periods (400 ms)
          expect(ttl, k).toBeGreaterThan(0)
          expect(ttl, k).toBeLessThanOrEqual(1_000)
        }
      }
      // per-name stats() works while the limit lives
      expect((await hour.stats()).admitted).toBe(1)
    } finally {
      await store.close()
    }
  })

  it('a limiter in use keeps its hash: the TTL is refreshed with every flush that writes it', async () => {
    const prefix = freshPrefix()
    const store = await connect(prefix, 100)
    try {
      const l = new WindowLimiter(store, { name: 'busy', limit: 1000, interval: 'second' })
      const key = internal(store)._statsKey('window', 'busy')
      for (let i = 0; i < 4; i++) {
        await l.check()
        await internal(store)._flushStats()
        const ttl = await server.raw.pttl(key)
        expect(ttl).toBeGreaterThan(500)
        await new Promise((r) => setTimeout(r, 300)) // past a third of its TTL
      }
      expect((await l.stats()).admitted).toBe(4)
    } finally {
      await store.close()
    }
  })

  it('the registry cap (10,000) deletes the statistics of the limiters it drops', async () => {
    const prefix = freshPrefix()
    const store = await connect(prefix, 600_000)
    try {
      const first = new DistributedPacer(store, { key: 'the-oldest', qps: 1000 })
      await first.rateLimit()
      await internal(store)._flushStats()
      expect(await server.raw.exists(internal(store)._statsKey('pacer', 'the-oldest'))).toBe(1)
      for (let from = 0; from < 10_000; from += 1000) {
        await Promise.all(
          Array.from({ length: 1000 }, (_, i) =>
            new DistributedPacer(store, { key: `p${from + i}`, qps: 1000, maxBurst: 1 }).rateLimit(),
          ),
        )
        await internal(store)._flushStats() // (the process's own book forgets its oldest tenth when full)
      }
      const [zset] = internal(store)._registryKeys()
      expect(await server.raw.zcard(zset)).toBe(10_000)
      expect(await server.raw.zscore(zset, 'pacer:the-oldest')).toBeNull()
      expect(await server.raw.exists(internal(store)._statsKey('pacer', 'the-oldest'))).toBe(0)
      expect(await server.raw.exists(internal(store)._statsKey('pacer', 'p9999'))).toBe(1)
    } finally {
      await store.close()
    }
  }, 60_000)
})

// Issue 24, item 6 (statistics): a key of another type under our names fails only its own
// operation; a flush never re-sends counts it wrote (one decision used to be counted 8 times).
describe.each(REDIS_KINDS)('issue-24-stats-wrongtype on %s', (kind) => {
  const server = onServer(kind)
  const { connect } = server

  it('a wrong-typed statistics hash or registry: the others are written once, the bad counts dropped', async () => {
    const prefix = freshPrefix()
    const store = await connect(prefix)
    try {
      await server.raw.set(internal(store)._statsKey('pacer', 'bad'), 'not a hash', 'PX', 60_000)
      const [zset] = internal(store)._registryKeys()
      await server.raw.set(zset, 'not a sorted set', 'PX', 60_000)
      const good = new DistributedPacer(store, { key: 'good', qps: 1000, maxBurst: 10 })
      const bad = new DistributedPacer(store, { key: 'bad', qps: 1000, maxBurst: 10 })
      await good.rateLimit()
      await bad.rateLimit()
      await bad.rateLimit()
      for (let i = 0; i < 3; i++) await internal(store)._flushStats()
      expect(await server.raw.hget(internal(store)._statsKey('pacer', 'good'), 'admitted')).toBe('1')
      expect(await server.raw.get(internal(store)._statsKey('pacer', 'bad'))).toBe('not a hash')
      expect(store.statsDropped).toBe(2)
      expect((await good.stats()).admitted).toBe(1)
      await expect(bad.stats()).rejects.toMatchObject({ code: 'ERR_SCRIPT' })
      await expect(store.limiters()).rejects.toMatchObject({ code: 'ERR_SCRIPT' })
    } finally {
      await server.raw.del(internal(store)._statsKey('pacer', 'bad'))
      await server.raw.del(internal(store)._registryKeys()[0])
      await store.close()
    }
  })
})
