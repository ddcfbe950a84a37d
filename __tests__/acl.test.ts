// Issue 15: auth for real. The documented ACL SETUSER line, read from docs/deployment.md itself, is
// enough for every limiter kind on a standalone server and on the cluster; a user missing one
// command gets a coded error at once, not a hang; a user without channel rights changes
// nothing when a concurrent limiter operation is refused (a release never half-happens).
import type { ChildProcess } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import Redis, { Cluster } from 'ioredis'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import {
  BucketLimiter,
  ConcurrentLimiter,
  DistributedPacer,
  FairTenant,
  LeakyLimiter,
  PacerComposite,
  PointsLimiter,
  QuotaLimiter,
  RedisStore,
  SlidingWindowLimiter,
  WindowLimiter,
  type Store,
} from '../lib/entries/index.js'
import { HAS_CLUSTER, clusterNodes } from './helpers/stores.js'
import { freePort, startRedis, stop, timed } from './helpers/servers.js'

const PASSWORD = 'acl-test-pw'
const DOCS = readFileSync(join(__dirname, '..', 'docs', 'deployment.md'), 'utf8')
/** The documented line, as ACL SETUSER arguments (the user name and rules after it). */
const RULES = /^ACL SETUSER (.+)$/m.exec(DOCS)![1].replace('>PASSWORD', `>${PASSWORD}`).split(' ')
const CLUSTER_RULES = /^On a cluster add `([^`]+)`/m.exec(DOCS)![1].split(' ')

/** Every limiter kind, each call made and checked; resolves with the number of calls made. */
async function everyKind(store: Store, tag: string) {
  const made: string[] = []
  const ok = async (what: string, p: Promise<unknown>) => {
    await p
    made.push(what)
  }
  await ok('bucket', new BucketLimiter(store, { name: `b${tag}`, limit: 5, interval: 60_000 }).check())
  await ok('window', new WindowLimiter(store, { name: `w${tag}`, limit: 5, interval: 60_000 }).check())
  await ok('leaky', new LeakyLimiter(store, { name: `l${tag}`, limit: 5, interval: 60_000 }).check())
  await ok('points', new PointsLimiter(store, { name: `pt${tag}`, points: 5, interval: 60_000 }).check())
  const pacer = new DistributedPacer(store, { key: `p${tag}`, qps: 100, maxBurst: 5 })
  await ok('pace', pacer.pace())
  await ok('block', pacer.block(10))
  await ok('composite', new PacerComposite([pacer]).rateLimit())
  const sliding = new SlidingWindowLimiter(store, { name: `s${tag}`, windows: [{ limit: 5, intervalMs: 60_000 }] })
  await ok('sliding', sliding.check())
  await ok('sliding reset', sliding.reset())
  const quotas = [{ windowSeconds: 10, granularitySeconds: 1, limit: 5 }]
  await ok('quota', new QuotaLimiter(store).checkAndUseQuotas([{ prefix: `q${tag}`, requested: 1, quotas }]))
  // a semaphore hand-over: a waiter woken by a release (PUBLISH on the limiter's channel)
  const mutex = new ConcurrentLimiter(store, { name: `c${tag}`, limit: 1, waitTimeoutMs: 5000 })
  const first = await mutex.acquire()
  const waiting = mutex.acquire()
  await new Promise((r) => setTimeout(r, 100))
  const t0 = performance.now()
  await first.release()
  const second = await waiting
  expect(performance.now() - t0, 'the waiter was woken, not timed out').toBeLessThan(2000)
  await ok('extend', second.extend())
  await ok('release', second.release())
  await ok('concurrent stats', mutex.stats())
  const rules = [{ queue: 'slow', threshold: 1, perMs: 60_000 }]
  await ok('fair', new FairTenant(store, { name: `f${tag}`, rules }).assign('t', 'j1', 'fast'))
  await ok(
    'fair approximate',
    new FairTenant(store, { name: `fa${tag}`, mode: 'approximate', rules }).assign('t', 'j', 'x'),
  )
  // statistics: written, read back, the registry listed
  await (store as unknown as { _flushStats: () => Promise<void> })._flushStats()
  expect((await new BucketLimiter(store, { name: `b${tag}`, limit: 5, interval: 60_000 }).stats()).admitted).toBe(1)
  expect((await store.limiters()).length).toBeGreaterThan(5)
  expect((store as RedisStore).statsDropped).toBe(0)
  return made.length
}

describe('an ACL user with exactly the documented line (docs/deployment.md)', () => {
  let server: ChildProcess
  let admin: Redis
  let url: string
  let port: number

  beforeAll(async () => {
    port = await freePort()
    server = await startRedis(port)
    admin = new Redis(`redis://127.0.0.1:${port}`)
    await admin.call('ACL', 'SETUSER', ...RULES)
    url = `redis://sluice:${PASSWORD}@127.0.0.1:${port}`
  }, 30_000)
  afterAll(async () => {
    admin.disconnect()
    await stop(server)
  })

  it('runs every limiter kind, on the direct lane and on the pool', async () => {
    for (const directConnection of [true, false]) {
      const store = await RedisStore.connect({ url, directConnection, commandTimeoutMs: 2000 })
      expect(await everyKind(store, directConnection ? 'direct' : 'pool')).toBe(15)
      await store.close()
    }
    expect(await admin.call('ACL', 'LOG')).toEqual([]) // nothing was denied on the way
  }, 60_000)

  it('a user missing one command gets ERR_SCRIPT (NOPERM) at once, never a hang', async () => {
    for (const missing of ['zrangebyscore', 'zadd', 'set', 'evalsha']) {
      const rules = RULES.filter((r) => r !== `+${missing}`).map((r) => (r === 'sluice' ? `less-${missing}` : r))
      await admin.call('ACL', 'SETUSER', ...rules)
      const store = await RedisStore.connect({
        url: `redis://less-${missing}:${PASSWORD}@127.0.0.1:${port}`,
        commandTimeoutMs: 2000,
      })
      const failures: { code: string; message: string }[] = []
      const calls: (() => Promise<unknown>)[] = [
        // two windows: the shorter one's first call is read with ZRANGEBYSCORE (the longest's
        // comes with the block, in one ZRANGE)
        () =>
          new SlidingWindowLimiter(store, {
            name: 'm',
            windows: [
              { limit: 5, intervalMs: 60_000 },
              { limit: 10, intervalMs: 3_600_000 },
            ],
          }).check(),
        () => new BucketLimiter(store, { name: 'm', limit: 5, interval: 60_000 }).check(),
        () => new ConcurrentLimiter(store, { name: 'm', limit: 1 }).tryAcquire(),
      ]
      for (const call of calls) {
        const r = await timed(call())
        expect(r.ms, missing).toBeLessThan(500)
        if (r.error) failures.push(r.error as { code: string; message: string })
      }
      expect(failures.length, `without ${missing}, some kind must fail`).toBeGreaterThan(0)
      for (const f of failures) {
        expect(f.code).toBe('ERR_SCRIPT')
        expect(f.message).toMatch(/NOPERM|no permissions|can't run this command|can't access/)
      }
      await store.close()
    }
    // a key prefix outside the user's keys: refused with a code too
    const other = await RedisStore.connect({ url, keyPrefix: 'elsewhere', commandTimeoutMs: 2000 })
    const r = await timed(new BucketLimiter(other, { name: 'x', limit: 1, interval: 60_000 }).check())
    expect((r.error as { code: string }).code).toBe('ERR_SCRIPT')
    expect(r.ms).toBeLessThan(500)
    await other.close()
  }, 60_000)

  it('without channel rights a release is refused whole: the waiter is woken by the next real release', async () => {
    const noChannel = RULES.map((r) => (r === 'sluice' ? 'nochannel' : r === '&sluice:*' ? '' : r)).filter(Boolean)
    await admin.call('ACL', 'SETUSER', ...noChannel)
    const full = await RedisStore.connect({ url, commandTimeoutMs: 2000 })
    const limited = await RedisStore.connect({
      url: `redis://nochannel:${PASSWORD}@127.0.0.1:${port}`,
      commandTimeoutMs: 2000,
    })
    const mutex = new ConcurrentLimiter(full, { name: 'handover', limit: 1, waitTimeoutMs: 10_000 })
    const held = await mutex.acquire()
    const waiting = mutex.acquire()
    await new Promise((r) => setTimeout(r, 100))
    // the same lease released through the user without channel rights: refused, nothing written
    const theirs = new ConcurrentLimiter(limited, { name: 'handover', limit: 1, waitTimeoutMs: 10_000 })
    const RELEASE = 2
    const refused = await (theirs as unknown as { _op: (op: number, id: string, w: number) => Promise<unknown> })
      ._op(RELEASE, (held as unknown as { _id: string })._id, 0)
      .catch((e: { code: string; message: string }) => e)
    expect(refused).toMatchObject({ code: 'ERR_SCRIPT' })
    expect((refused as { message: string }).message).toMatch(/NOPERM/)
    expect(await mutex.stats()).toMatchObject({ current: 1, waiting: 1 })
    // the holder's own release hands the slot over at once
    const t0 = performance.now()
    expect(await held.release()).toBe(true)
    const next = await waiting
    expect(performance.now() - t0).toBeLessThan(2000)
    await next.release()
    await limited.close()
    await full.close()
  }, 60_000)
})

describe.skipIf(!HAS_CLUSTER)('the documented line on the cluster', () => {
  const nodes = () => clusterNodes().map((u) => new URL(u))
  let admins: Redis[] = []

  beforeAll(async () => {
    admins = nodes().map((u) => new Redis(Number(u.port), u.hostname))
    for (const a of admins) await a.call('ACL', 'SETUSER', ...RULES, ...CLUSTER_RULES)
  })
  afterAll(async () => {
    for (const a of admins) {
      await a.call('ACL', 'DELUSER', 'sluice')
      a.disconnect()
    }
  })

  it('runs every limiter kind on a cluster', async () => {
    const cluster = nodes().map((u) => `redis://sluice:${PASSWORD}@${u.host}`)
    const store = await RedisStore.connect({ cluster, keyPrefix: 'sluice', commandTimeoutMs: 3000 })
    expect(await everyKind(store, `cluster${Date.now()}`)).toBe(15)
    await store.close()
    // the keys it wrote are gone with a TTL like any others; leave no state for other suites
    const c = new Cluster(nodes().map((u) => ({ host: u.hostname, port: Number(u.port) })))
    const keys = (await Promise.all(c.nodes('master').map((n) => n.keys('sluice:*')))).flat()
    for (const k of keys) expect(await c.pttl(k), k).toBeGreaterThan(0)
    c.disconnect()
  }, 60_000)
})
