// Store failures: every call has a deadline, errors carry their codes, and the store
// recovers by itself. These tests start and stop their own redis-server processes.
import { execFileSync } from 'node:child_process'
import { join } from 'node:path'
import Redis from 'ioredis'
import { describe, expect, it } from 'vitest'
import {
  BucketLimiter,
  ConcurrentLimiter,
  DistributedPacer,
  ManualClock,
  QuotaLimiter,
  RedisStore,
  SlidingWindowLimiter,
  SluiceError,
} from '../lib/entries/index.js'
import { freshPrefix, makeStore, redisUrl } from './helpers/stores.js'
import { eventually, freePort, startCluster, startRedis, stop, timed } from './helpers/servers.js'

describe('store failures', () => {
  it('a dead port fails to connect with ERR_STORE_UNAVAILABLE within connectTimeoutMs', async () => {
    const port = await freePort()
    const { ms, error } = await timed(RedisStore.connect({ url: `redis://127.0.0.1:${port}`, connectTimeoutMs: 500 }))
    expect(error).toBeInstanceOf(SluiceError)
    expect((error as SluiceError).code).toBe('ERR_STORE_UNAVAILABLE')
    expect(ms).toBeLessThan(2000)
  })

  it('a cluster seed on a dead port fails with ERR_STORE_UNAVAILABLE', async () => {
    const port = await freePort()
    const { error } = await timed(RedisStore.connect({ cluster: [`redis://127.0.0.1:${port}`], connectTimeoutMs: 500 }))
    expect((error as SluiceError).code).toBe('ERR_STORE_UNAVAILABLE')
  })

  it('Redis killed mid-run: calls fail within commandTimeoutMs, then the store recovers', async () => {
    const port = await freePort()
    let server = await startRedis(port)
    const store = await RedisStore.connect({ url: `redis://127.0.0.1:${port}`, commandTimeoutMs: 300 })
    try {
      const pacer = new DistributedPacer(store, { key: 'k', qps: 1000 })
      expect((await pacer.pace()).delayMs).toBe(0)
      await stop(server)
      for (let i = 0; i < 5; i++) {
        const { ms, error } = await timed(pacer.pace())
        expect(error).toBeInstanceOf(SluiceError)
        expect(['ERR_STORE_UNAVAILABLE', 'ERR_TIMEOUT']).toContain((error as SluiceError).code)
        expect(ms).toBeLessThan(300 + 250)
      }
      server = await startRedis(port)
      const recoveredIn = await eventually(() => pacer.pace(), 10_000)
      expect(recoveredIn).toBeLessThan(10_000)
    } finally {
      await store.close()
      await stop(server)
    }
  })

  it('limiters fail with a store code while Redis is down (a waiter too), then recover', async () => {
    const port = await freePort()
    let server = await startRedis(port)
    const store = await RedisStore.connect({ url: `redis://127.0.0.1:${port}`, commandTimeoutMs: 300 })
    try {
      const bucket = new BucketLimiter(store, { name: 'b', limit: 100, interval: 'second' })
      const mutex = new ConcurrentLimiter(store, { name: 'm', limit: 1, waitTimeoutMs: 2000 })
      const sliding = new SlidingWindowLimiter(store, { name: 's', windows: [{ limit: 100, intervalMs: 1000 }] })
      const quotas = new QuotaLimiter(store)
      const request = [
        { prefix: 'org', requested: 1, quotas: [{ windowSeconds: 60, granularitySeconds: 10, limit: 9 }] },
      ]
      expect((await sliding.check()).allowed).toBe(true)
      expect((await quotas.checkAndUseQuotas(request))[0].granted).toBe(1)
      expect((await bucket.check()).allowed).toBe(true)
      const held = await mutex.acquire()
      const waiting = timed(mutex.acquire()) // queued, subscribed, then Redis dies
      await new Promise((r) => setTimeout(r, 100))
      await stop(server)
      // every call is timed (and handled) from the moment it is made: they all fail together
      const calls = [
        bucket.check(),
        bucket.withinLimit(() => 1),
        mutex.tryAcquire(),
        held.release(),
        sliding.check(),
        sliding.ensure(() => 1),
        quotas.checkAndUseQuotas(request),
        quotas.checkWithinQuotas(request),
        quotas.useQuotas(request, [{ prefix: 'org', granted: 1, reachedQuotas: [] }], 1_800_000_000),
      ].map((call: Promise<unknown>) => timed(call))
      for (const call of calls) {
        const { ms, error } = await call
        expect(['ERR_STORE_UNAVAILABLE', 'ERR_TIMEOUT']).toContain((error as SluiceError).code)
        expect(ms).toBeLessThan(300 + 250)
      }
      // the waiter's deadline passes with Redis down: it fails with a store code, never hangs
      const { ms, error } = await waiting
      expect(['ERR_STORE_UNAVAILABLE', 'ERR_TIMEOUT']).toContain((error as SluiceError).code)
      expect(ms).toBeLessThan(2000 + 300 + 500)
      server = await startRedis(port)
      await eventually(() => bucket.check(), 10_000)
      expect((await sliding.check()).allowed).toBe(true)
      expect((await quotas.checkAndUseQuotas(request))[0].granted).toBe(1)
      const lease = await mutex.acquire() // a fresh server: the old lease is gone
      expect(await lease.release()).toBe(true)
    } finally {
      await store.close()
      await stop(server)
    }
  })

  it('a hung Redis (SIGSTOP) gives ERR_TIMEOUT within commandTimeoutMs; SIGCONT recovers', async () => {
    const port = await freePort()
    const server = await startRedis(port)
    const store = await RedisStore.connect({ url: `redis://127.0.0.1:${port}`, commandTimeoutMs: 300 })
    try {
      const pacer = new DistributedPacer(store, { key: 'k', qps: 1000 })
      await pacer.pace()
      server.kill('SIGSTOP')
      const results = await Promise.all([timed(pacer.pace()), timed(pacer.rateLimit())])
      for (const { ms, error } of results) {
        expect((error as SluiceError).code).toBe('ERR_TIMEOUT')
        expect(ms).toBeGreaterThanOrEqual(250)
        expect(ms).toBeLessThan(300 + 250)
      }
      server.kill('SIGCONT')
      await eventually(() => pacer.pace(), 10_000)
    } finally {
      server.kill('SIGCONT')
      await store.close()
      await stop(server)
    }
  })

  it('50,000 calls in flight on a hung Redis all settle with store codes in time, memory bounded; SIGCONT recovers', async () => {
    const port = await freePort()
    const server = await startRedis(port)
    const store = await RedisStore.connect({ url: `redis://127.0.0.1:${port}`, commandTimeoutMs: 500 })
    try {
      const bucket = (i: number) => new BucketLimiter(store, { name: `h${i % 1000}`, limit: 1e6, interval: 'hour' })
      await bucket(0).check()
      const rss0 = process.memoryUsage().rss
      server.kill('SIGSTOP')
      const t0 = performance.now()
      const calls = Array.from({ length: 50_000 }, (_, i) =>
        bucket(i)
          .check()
          .then(
            () => 'answered',
            (e: SluiceError) => e.code,
          ),
      )
      const settled = await Promise.all(calls)
      const ms = performance.now() - t0
      const codes = new Map<string, number>()
      for (const c of settled) codes.set(c, (codes.get(c) ?? 0) + 1)
      // the first batches time out; then the store's circuit is open and the rest are answered
      // at once with the store-down error: every call settles, with a store code
      expect([...codes.keys()].sort()).toEqual(['ERR_STORE_UNAVAILABLE', 'ERR_TIMEOUT'].filter((c) => codes.has(c)))
      expect((codes.get('ERR_TIMEOUT') ?? 0) + (codes.get('ERR_STORE_UNAVAILABLE') ?? 0)).toBe(50_000)
      expect(codes.get('ERR_TIMEOUT')).toBeGreaterThan(0)
      expect(ms).toBeLessThan(500 + 1500) // every deadline, with the batches queued behind each other
      expect((process.memoryUsage().rss - rss0) / 1e6).toBeLessThan(300)
      server.kill('SIGCONT')
      await eventually(() => bucket(1).check(), 10_000)
    } finally {
      server.kill('SIGCONT')
      await store.close()
      await stop(server)
    }
  }, 30_000)

  it('rediss:// speaks TLS: against a plain-TCP server it fails instead of connecting in clear', async () => {
    const { error } = await timed(
      RedisStore.connect({ url: redisUrl().replace('redis://', 'rediss://'), connectTimeoutMs: 1000 }),
    )
    expect(error).toBeInstanceOf(SluiceError)
    expect((error as SluiceError).code).toBe('ERR_STORE_UNAVAILABLE')
  })

  it('close() with calls in flight: every call settles, later ones reject with ERR_CLOSED', async () => {
    const store = await makeStore('redis')
    const pacer = new DistributedPacer(store, { key: 'k', qps: 1e6 })
    const settle = (p: Promise<unknown>) =>
      p.then(
        () => 'ok',
        (e: SluiceError) => e.code,
      )
    const inFlight = Array.from({ length: 500 }, () => settle(pacer.pace()))
    await new Promise((r) => setImmediate(r)) // sent
    const closing = store.close()
    const after = Array.from({ length: 10 }, () => settle(pacer.pace()))
    const outcomes = await Promise.all([...inFlight, ...after])
    await closing
    // a call whose reply the closing connection drops settles by its deadline (ERR_TIMEOUT)
    for (const o of outcomes.slice(0, 500)) {
      expect(['ok', 'ERR_CLOSED', 'ERR_STORE_UNAVAILABLE', 'ERR_TIMEOUT']).toContain(o)
    }
    expect(outcomes.slice(500)).toEqual(Array(10).fill('ERR_CLOSED'))
  })

  it('a process that never closes its store still exits, also after waiting on a limiter', () => {
    const program = `const { RedisStore, ConcurrentLimiter } = require('./lib/entries/index.js')
      RedisStore.connect(${JSON.stringify(redisUrl())}).then(async (s) => {
        const m = new ConcurrentLimiter(s, { name: 'exit${Date.now()}', limit: 1 })
        const a = await m.acquire()
        const b = m.acquire()
        setTimeout(() => a.release(), 20)
        console.log('waited', (await b).token)
      })`
    const out = execFileSync(process.execPath, ['-e', program], { cwd: join(__dirname, '..'), timeout: 10_000 })
    expect(String(out).trim()).toBe('waited 2')
  })

  it('a process that never closes its store still exits', () => {
    const program = `const { RedisStore, DistributedPacer } = require('./lib/entries/index.js')
      RedisStore.connect(${JSON.stringify(redisUrl())})
        .then((s) => new DistributedPacer(s, { key: 'exit', qps: 10 }).pace())
        .then((o) => console.log('paced', o.delayMs))`
    const out = execFileSync(process.execPath, ['-e', program], { cwd: join(__dirname, '..'), timeout: 10_000 })
    expect(String(out).trim()).toMatch(/^paced \d+$/)
  })

  it('close() rejects later calls with ERR_CLOSED', async () => {
    const store = await makeStore('redis')
    const pacer = new DistributedPacer(store, { key: 'k', qps: 10 })
    await pacer.pace()
    await store.close()
    await expect(pacer.pace()).rejects.toMatchObject({ code: 'ERR_CLOSED' })
    await store.close() // idempotent
  })
})

// On servers of its own: a flush on the shared servers would make the calls of other files
// that are under way at that moment retry (an EVAL after NOSCRIPT), out of their call order.
describe.each(['redis', 'cluster'] as const)('SCRIPT FLUSH on %s', (kind) => {
  it('reloads the script on the node that answered and keeps the state', async () => {
    const clock = new ManualClock(1_800_000_000_000)
    const port = kind === 'redis' ? await freePort() : 0
    const server = kind === 'redis' ? await startRedis(port) : null
    const cluster = kind === 'cluster' ? await startCluster() : null
    const urls = cluster ? cluster.urls : [`redis://127.0.0.1:${port}`]
    const store = await RedisStore.connect(
      cluster ? { cluster: urls, clock, keyPrefix: freshPrefix() } : { url: urls[0], clock, keyPrefix: freshPrefix() },
    )
    const nodes = urls.map((u) => new Redis(u))
    try {
      const pacers = Array.from({ length: 20 }, (_, i) => new DistributedPacer(store, { key: `p${i}`, qps: 1 }))
      for (const p of pacers) expect((await p.rateLimit()).delayMs).toBe(0)
      await Promise.all(nodes.map((n) => n.script('FLUSH')))
      // many calls in flight at once, across slots, right after the flush
      const outcomes = await Promise.all(pacers.flatMap((p) => [p.rateLimit(), p.rateLimit()]))
      expect(outcomes.every((o) => o.delayMs === 1000)).toBe(true)
      clock.advance(1000)
      for (const p of pacers) expect((await p.rateLimit()).delayMs).toBe(0)
    } finally {
      await store.close()
      for (const n of nodes) n.disconnect()
      if (server) await stop(server)
      if (cluster) await cluster.stopAll()
    }
  }, 60_000)
})
