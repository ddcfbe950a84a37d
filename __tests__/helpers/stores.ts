// The store matrix: every behaviour scenario runs on the memory store, a standalone Redis
// and a 3-node Redis Cluster (started by scripts/test.sh on free loopback ports).
import { randomUUID } from 'node:crypto'
import { afterAll, beforeAll, expect } from 'vitest'
import Redis, { Cluster } from 'ioredis'
import { ManualClock, MemoryStore, RedisStore, type Store } from '../../lib/entries/index.js'

export type StoreKind = 'memory' | 'redis' | 'cluster'
/**
 * Whether the suite has its Redis Cluster (SLUICE_REDIS_CLUSTER). Not when it runs against a
 * server it was given (SLUICE_TEST_REDIS_URL: scripts/test.sh unsets SLUICE_REDIS_CLUSTER):
 * then the tests on the cluster are skipped inside their files, and their standalone tests run:
 * a cluster-only test by `describe.skipIf(!HAS_CLUSTER)` / `it.skipIf(!HAS_CLUSTER)` (vitest
 * counts it as skipped), the cluster case of a matrix by REDIS_KINDS / STORE_KINDS (not made).
 * Without a given server the cluster is expected: a missing SLUICE_REDIS_CLUSTER fails
 * (clusterNodes()) rather than skipping.
 */
export const HAS_CLUSTER = !process.env.SLUICE_TEST_REDIS_URL || Boolean(process.env.SLUICE_REDIS_CLUSTER)
/** The Redis topologies a test runs on: the standalone server, and the cluster when there is one. */
export const REDIS_KINDS: readonly ('redis' | 'cluster')[] = HAS_CLUSTER ? ['redis', 'cluster'] : ['redis']
/** The stores every scenario runs on: the memory store and REDIS_KINDS. */
export const STORE_KINDS: readonly StoreKind[] = ['memory', ...REDIS_KINDS]

export function redisUrl(): string {
  const url = process.env.SLUICE_REDIS_URL
  if (!url) throw new Error('SLUICE_REDIS_URL is not set: run the suite with `npm test`')
  return url
}

export function clusterNodes(): string[] {
  const nodes = process.env.SLUICE_REDIS_CLUSTER
  if (!nodes) throw new Error('SLUICE_REDIS_CLUSTER is not set: run the suite with `npm test`')
  return nodes.split(',')
}

export const freshPrefix = () => `t${randomUUID().slice(0, 12)}`

export async function makeStore(
  kind: StoreKind,
  options: { clock?: ManualClock; keyPrefix?: string; commandTimeoutMs?: number } = {},
): Promise<Store> {
  const keyPrefix = options.keyPrefix ?? freshPrefix()
  if (kind === 'memory') return new MemoryStore({ keyPrefix, clock: options.clock })
  const common = { keyPrefix, clock: options.clock, commandTimeoutMs: options.commandTimeoutMs }
  return kind === 'redis'
    ? RedisStore.connect({ ...common, url: redisUrl() })
    : RedisStore.connect({ ...common, cluster: clusterNodes() })
}

/**
 * `n` stores on one fresh key prefix standing for `n` processes (the memory store: one store
 * shared, as processes share Redis), all on `clock`.
 */
export async function makeStores(kind: StoreKind, n: number, clock: ManualClock): Promise<Store[]> {
  const keyPrefix = freshPrefix()
  if (kind === 'memory') {
    const one = new MemoryStore({ keyPrefix, clock })
    return Array.from({ length: n }, () => one)
  }
  const o = kind === 'redis' ? { url: redisUrl() } : { cluster: clusterNodes() }
  return Promise.all(Array.from({ length: n }, () => RedisStore.connect({ ...o, keyPrefix, clock })))
}

/** A plain client to look at what the store wrote (never used to decide anything). */
export function rawClient(kind: 'redis' | 'cluster'): Redis | Cluster {
  if (kind === 'redis') return new Redis(redisUrl(), { lazyConnect: false })
  return new Cluster(
    clusterNodes().map((u) => {
      const { hostname, port } = new URL(u)
      return { host: hostname, port: Number(port) }
    }),
  )
}

/** All keys under a prefix, on every node. */
export async function keysUnder(client: Redis | Cluster, prefix: string): Promise<string[]> {
  const nodes = client instanceof Cluster ? client.nodes('master') : [client]
  const all = await Promise.all(nodes.map((n) => n.keys(`${prefix}:*`)))
  return all.flat()
}

/**
 * A store for the enclosing `describe`, made before its tests and closed after them, with a
 * fresh key prefix and (on Redis) a plain client to look at what was written. Afterwards,
 * `after: 'ttl'` (default) checks that every key left under the prefix has a TTL, `'empty'`
 * that none was left at all.
 */
export function useStore(kind: StoreKind, options: { clock?: ManualClock; after?: 'ttl' | 'empty' } = {}) {
  const ctx = {
    store: undefined as unknown as Store,
    prefix: freshPrefix(),
    raw: kind === 'memory' ? null : rawClient(kind),
  }
  beforeAll(async () => {
    ctx.store = await makeStore(kind, { clock: options.clock, keyPrefix: ctx.prefix })
  })
  afterAll(async () => {
    const raw = ctx.raw
    if (raw) {
      const keys = await keysUnder(raw, ctx.prefix)
      if (options.after === 'empty') expect(keys).toEqual([])
      else for (const key of keys) expect(`${key} ${await raw.pttl(key)}`).not.toMatch(/ -\d+$/)
    }
    await ctx.store.close()
    raw?.disconnect()
  })
  return ctx
}
