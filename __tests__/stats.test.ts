// Statistics of every limiter kind: counted per process, written in the background on a
// RedisStore (and on close), read over every process; store.limiters(); turned off per store;
// exact under 4 processes; nothing lost when Redis blinks.
import { fork } from 'node:child_process'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import {
  BucketLimiter,
  ConcurrentLimiter,
  DistributedPacer,
  FairTenant,
  LeakyLimiter,
  ManualClock,
  MemoryStore,
  PacerComposite,
  PointsLimiter,
  QuotaLimiter,
  RedisStore,
  SlidingWindowLimiter,
  WindowLimiter,
} from '../lib/entries/index.js'
import {
  REDIS_KINDS,
  STORE_KINDS,
  clusterNodes,
  freshPrefix,
  keysUnder,
  makeStore,
  rawClient,
  redisUrl,
  useStore,
} from './helpers/stores.js'
import { freePort, startRedis, stop } from './helpers/servers.js'

const T0 = 1_800_000_000_000
const ZERO = {
  admitted: 0,
  refused: 0,
  admittedWeight: 0,
  refusedWeight: 0,
  nearLimit: 0,
  waited: 0,
  waitTimeMs: 0,
  degraded: 0,
  rescheduled: 0,
}

describe.each(STORE_KINDS)('statistics on %s', (kind) => {
  const clock = new ManualClock(T0)
  const s = useStore(kind, { clock })
  let n = 0
  const name = () => `s${n++}`

  it('rate limiters: admitted, refused, weights, near-limit admissions, waits', async () => {
    clock.set(T0)
    const b = new BucketLimiter(s.store, { name: name(), limit: 10, interval: 'hour' })
    await b.check(4) // 6 left
    await b.check(4) // 2 left: near the limit (at most 20 %)
    await b.check(3) // refused
    await b.peek() // not a decision
    expect(await b.stats()).toEqual({
      ...ZERO,
      // the rate limiters honour store.rules: what shadow mode admitted, what a rule denied
      shadowRefused: 0,
      denied: 0,
      // and lease (DESIGN §11): lease calls made, tokens given back
      leaseCalls: 0,
      returned: 0,
      admitted: 2,
      refused: 1,
      admittedWeight: 8,
      refusedWeight: 3,
      nearLimit: 1,
    })
    // a leaky withinLimit that waits for its slot counts the wait
    const l = new LeakyLimiter(s.store, { name: name(), limit: 1, interval: 1000, waitTimeoutMs: 5000 })
    await l.check()
    const waiting = l.withinLimit(() => 'ran')
    await new Promise((r) => setTimeout(r, 20))
    clock.advance(1000)
    expect(await waiting).toBe('ran')
    expect(await l.stats()).toMatchObject({ admitted: 2, refused: 0, waited: 1, waitTimeMs: 1000 })
    // every rate-limiter kind counts
    for (const limiter of [
      new WindowLimiter(s.store, { name: name(), limit: 1, interval: 1000 }),
      new PointsLimiter(s.store, { name: name(), points: 1, interval: 1000 }),
    ]) {
      await limiter.check()
      await limiter.check()
      expect(await limiter.stats()).toMatchObject({ admitted: 1, refused: 1 })
    }
  })

  it('pacers (single and composite), sliding windows, quotas, concurrent and fair tenants', async () => {
    clock.set(T0)
    const p = new DistributedPacer(s.store, { key: name(), qps: 10, maxBurst: 1 })
    await p.rateLimit() // admitted (the burst)
    await p.rateLimit() // admitted (the first overflowing call is free)
    expect((await p.rateLimit()).delayMs).toBeGreaterThan(0) // refused
    const paced = await p.pace() // admitted after a wait
    expect(paced.delayMs).toBeGreaterThan(0)
    await p.rateLimit(0) // a probe: not a decision
    expect(await p.stats()).toMatchObject({ admitted: 3, refused: 1, waited: 1, waitTimeMs: paced.delayMs })
    const a = new DistributedPacer(s.store, { key: name(), qps: 1, maxBurst: 5 })
    const z = new DistributedPacer(s.store, { key: name(), qps: 1, maxBurst: 0 })
    const both = new PacerComposite([a, z])
    await both.rateLimit() // admitted (z's first overflowing call is free)
    await both.rateLimit() // refused by z: all or nothing, so refused for a too
    expect(await a.stats()).toMatchObject({ admitted: 1, refused: 1 })
    expect(await z.stats()).toMatchObject({ admitted: 1, refused: 1 })

    const w = new SlidingWindowLimiter(s.store, { name: name(), windows: [{ limit: 2, intervalMs: 1000 }] })
    await w.check()
    await w.check()
    await w.check()
    expect(await w.stats()).toMatchObject({ admitted: 2, refused: 1, nearLimit: 1 })

    const q = new QuotaLimiter(s.store)
    const quotas = [{ windowSeconds: 60, granularitySeconds: 10, limit: 4 }]
    const prefix = name()
    await q.checkAndUseQuotas([{ prefix, requested: 3, quotas }])
    await q.checkAndUseQuotas([{ prefix, requested: 3, quotas }]) // 1 of 3 granted: refused
    expect(await q.stats(prefix)).toMatchObject({ admitted: 1, refused: 1, admittedWeight: 3, refusedWeight: 2 })

    const c = new ConcurrentLimiter(s.store, { name: name(), limit: 1 })
    const lease = await c.tryAcquire()
    expect(await c.tryAcquire()).toBeNull()
    await lease!.release()
    expect(await c.stats()).toMatchObject({ admitted: 1, refused: 1, held: 1, immediate: 1 })

    const f = new FairTenant(s.store, { name: name(), rules: [{ queue: 'slow', threshold: 1 }] })
    await f.assign('t', 'a', 'fast')
    await f.assign('t', 'b', 'fast')
    expect(await f.stats()).toMatchObject({ admitted: 1, refused: 1 })

    const listed = await s.store.limiters()
    const kinds = new Set<string>(listed.map((l) => l.kind))
    for (const k of ['pacer', 'bucket', 'leaky', 'window', 'points', 'sliding', 'quota', 'concurrent', 'fair']) {
      expect(kinds.has(k), k).toBe(true)
    }
    const mine = listed.find((l) => l.kind === 'sliding' && l.name === w.name)!
    expect(mine.options).toEqual({ windows: [{ limit: 2, intervalMs: 1000 }] })
    expect(mine.lastUse).toBe(T0)
    // newest first
    for (let i = 1; i < listed.length; i++) expect(listed[i - 1].lastUse).toBeGreaterThanOrEqual(listed[i].lastUse)
  })
})

describe('statistics across stores and processes', () => {
  it('a RedisStore writes its counts on close; another store reads them, with its own unwritten ones', async () => {
    const keyPrefix = freshPrefix()
    const a = await RedisStore.connect({ url: redisUrl(), keyPrefix, statsFlushMs: 600_000 })
    const b = await RedisStore.connect({ url: redisUrl(), keyPrefix, statsFlushMs: 600_000 })
    const la = new BucketLimiter(a, { name: 'shared', limit: 3, interval: 'hour' })
    const lb = new BucketLimiter(b, { name: 'shared', limit: 3, interval: 'hour' })
    for (let i = 0; i < 4; i++) await la.check()
    await lb.check()
    // nothing flushed yet: b sees only its own
    expect(await lb.stats()).toMatchObject({ admitted: 0, refused: 1 })
    await a.close()
    expect(await lb.stats()).toMatchObject({ admitted: 3, refused: 2 })
    expect((await b.limiters()).map((l) => [l.kind, l.name])).toEqual([['bucket', 'shared']])
    await b.close()
    // every key written has a TTL
    const raw = rawClient('redis')
    const keys = await keysUnder(raw, keyPrefix)
    expect(keys.length).toBeGreaterThan(0)
    for (const key of keys) expect(await raw.pttl(key)).toBeGreaterThan(0)
    raw.disconnect()
  })

  it('stats: false turns statistics off (nothing counted, nothing written)', async () => {
    const keyPrefix = freshPrefix()
    const stores = [
      new MemoryStore({ stats: false }),
      await RedisStore.connect({ url: redisUrl(), keyPrefix, stats: false, statsFlushMs: 10 }),
    ]
    for (const store of stores) {
      const l = new BucketLimiter(store, { name: 'x', limit: 1, interval: 'hour' })
      await l.check()
      await expect(l.stats()).rejects.toMatchObject({ code: 'ERR_INVALID_CONFIG' })
      await expect(store.limiters()).rejects.toMatchObject({ code: 'ERR_INVALID_CONFIG' })
      await store.close()
    }
    const raw = rawClient('redis')
    expect((await keysUnder(raw, keyPrefix)).filter((k) => k.includes(':stats:') || k.includes(':limiters:'))).toEqual(
      [],
    )
    raw.disconnect()
    for (const bad of [{ stats: 'yes' }, { statsFlushMs: 5 }, { statsFlushMs: 1.5 }, { statsTtlMs: 1000 }]) {
      await expect(RedisStore.connect({ url: redisUrl(), ...bad } as any)).rejects.toMatchObject({
        code: 'ERR_INVALID_CONFIG',
      })
    }
    expect(() => new MemoryStore({ stats: 1 } as any)).toThrow(expect.objectContaining({ code: 'ERR_INVALID_CONFIG' }))
  })

  it.each(REDIS_KINDS)('counted exactly under 4 processes on %s: admitted + refused = calls made', async (target) => {
    const prefix = freshPrefix()
    const cfg = {
      prefix,
      name: 'fleet',
      limit: 1000,
      count: 600,
      ...(target === 'redis' ? { url: redisUrl() } : { cluster: clusterNodes() }),
    }
    const worker = join(__dirname, 'helpers', 'stats-worker.js')
    const results = await Promise.all(
      Array.from(
        { length: 4 },
        () =>
          new Promise<{ admitted: number; refused: number; dropped: number }>((resolve, reject) => {
            const child = fork(worker, [JSON.stringify(cfg)])
            child.once('message', resolve)
            child.once('exit', (code) => code !== 0 && reject(new Error(`worker exited with ${code}`)))
          }),
      ),
    )
    const admitted = results.reduce((a, r) => a + r.admitted, 0)
    const refused = results.reduce((a, r) => a + r.refused, 0)
    expect(admitted).toBe(1000)
    expect(admitted + refused).toBe(2400)
    for (const r of results) expect(r.dropped).toBe(0)
    const store = await makeStore(target, { keyPrefix: prefix })
    const stats = await new BucketLimiter(store, { name: 'fleet', limit: 1000, interval: 'hour' }).stats()
    expect(stats).toMatchObject({ admitted: 1000, refused: 1400, admittedWeight: 1000, refusedWeight: 1400 })
    await store.close()
  })

  it('Redis blinks: counts made meanwhile are written once it is back; a store closed while down counts them as dropped', async () => {
    const port = await freePort()
    let server = await startRedis(port)
    const url = `redis://127.0.0.1:${port}`
    const store = await RedisStore.connect({
      url,
      keyPrefix: 'blink',
      statsFlushMs: 50,
      probeIntervalMs: 50,
      commandTimeoutMs: 300,
      whenDown: 'allow',
    })
    const l = new BucketLimiter(store, { name: 'b', limit: 100, interval: 'hour' })
    try {
      for (let i = 0; i < 5; i++) await l.check()
      await new Promise((r) => setTimeout(r, 150)) // flushed
      await stop(server)
      for (let i = 0; i < 7; i++) await l.check() // answered by 'allow', degraded
      await new Promise((r) => setTimeout(r, 200)) // flushes fail and give the counts back
      server = await startRedis(port)
      const deadline = Date.now() + 10_000
      while (store.status !== 'up' && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20))
      await new Promise((r) => setTimeout(r, 200))
      // the 5 before and the 7 during the outage: none lost (a fresh Redis kept none of the first 5)
      expect((await l.stats()).admitted).toBe(7)
      expect((await l.stats()).degraded).toBe(7)
      expect(store.statsDropped).toBe(0)
      await stop(server)
      for (let i = 0; i < 3; i++) await l.check()
      await store.close()
      expect(store.statsDropped).toBe(3)
    } finally {
      await store.close()
      await stop(server)
    }
  })
})
