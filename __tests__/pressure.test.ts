// Issue 15: Redis under pressure answers with codes, never silence. A server of this file's own
// (maxmemory, CLIENT PAUSE, DEBUG SLEEP, a BUSY script, CLIENT KILL): every call settles within
// commandTimeoutMs with a code, nothing over the limit is admitted, and the store works again
// once the pressure ends.
import type { ChildProcess } from 'node:child_process'
import Redis from 'ioredis'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import {
  BucketLimiter,
  ConcurrentLimiter,
  DistributedPacer,
  QuotaLimiter,
  RedisStore,
  SlidingWindowLimiter,
  type Store,
} from '../lib/entries/index.js'
import { freePort, startRedis, stop, timed } from './helpers/servers.js'

const TIMEOUT_MS = 400

let server: ChildProcess
let raw: Redis
let url: string

beforeAll(async () => {
  const port = await freePort()
  server = await startRedis(port, ['--enable-debug-command', 'yes', '--busy-reply-threshold', '100'])
  url = `redis://127.0.0.1:${port}`
  raw = new Redis(url)
}, 30_000)
afterAll(async () => {
  raw.disconnect()
  await stop(server)
})

/** One call of each kind that writes. */
function calls(store: Store, tag: string): [string, () => Promise<unknown>][] {
  const quotas = [{ windowSeconds: 60, granularitySeconds: 10, limit: 100 }]
  return [
    ['bucket', () => new BucketLimiter(store, { name: `b${tag}`, limit: 100, interval: 60_000 }).check()],
    ['pacer', () => new DistributedPacer(store, { key: `p${tag}`, qps: 100, maxBurst: 100 }).rateLimit()],
    [
      'sliding',
      () => new SlidingWindowLimiter(store, { name: `s${tag}`, windows: [{ limit: 100, intervalMs: 60_000 }] }).check(),
    ],
    ['quota', () => new QuotaLimiter(store).checkAndUseQuotas([{ prefix: `q${tag}`, requested: 1, quotas }])],
    ['concurrent', () => new ConcurrentLimiter(store, { name: `c${tag}`, limit: 2 }).tryAcquire()],
  ]
}

async function store(o: Partial<Parameters<typeof RedisStore.connect>[0] & object> = {}) {
  return RedisStore.connect({ url, commandTimeoutMs: TIMEOUT_MS, connectTimeoutMs: 2000, statsFlushMs: 600_000, ...o })
}

describe('maxmemory with noeviction', () => {
  it('a decision that cannot write fails with ERR_STORE_OOM at once and never admits, under every whenDown', async () => {
    const stores = await Promise.all(
      (['error', 'allow', 'deny', 'local'] as const).map((whenDown) => store({ whenDown })),
    )
    try {
      await raw.config('SET', 'maxmemory', '0')
      const used = Number(/used_memory:(\d+)/.exec(await raw.info('memory'))![1])
      await raw.set('filler', 'x'.repeat(8 << 20))
      await raw.config('SET', 'maxmemory-policy', 'noeviction')
      // 2 MB above what the server used before the filler: over it now, under it without the filler
      await raw.config('SET', 'maxmemory', String(used + (2 << 20)))
      for (const [i, s] of stores.entries()) {
        for (const [kind, call] of calls(s, `oom${i}`)) {
          const r = await timed(call())
          expect((r.error as { code?: string })?.code, `${kind} under ${s.whenDown}`).toBe('ERR_STORE_OOM')
          expect(r.ms).toBeLessThan(TIMEOUT_MS)
        }
        expect(s.status).toBe('up') // Redis answers: not "down", and no policy answer
      }
      // room again (the limit lifted: the filler's 8 MB query buffer is given back only later): every kind works
      await raw.del('filler')
      await raw.config('SET', 'maxmemory', '0')
      for (const [kind, call] of calls(stores[0], 'after')) await expect(call(), kind).resolves.toBeDefined()
    } finally {
      await raw.del('filler')
      await raw.config('SET', 'maxmemory', '0')
      await Promise.all(stores.map((s) => s.close()))
    }
  }, 30_000)
})

describe('a paused, sleeping, busy or killing server', () => {
  let s: Store
  beforeAll(async () => {
    s = await store()
  })
  afterAll(() => s.close())

  /** Every kind's call settles within the deadline (+ scheduling slack) with a value or a code. */
  async function allSettle(tag: string, codes: string[]) {
    const results = await Promise.all(calls(s, tag).map(([kind, call]) => timed(call()).then((r) => ({ kind, ...r }))))
    for (const r of results) {
      expect(r.ms, `${r.kind}: settled within commandTimeoutMs`).toBeLessThan(TIMEOUT_MS + 250)
      if (r.error)
        expect(codes, `${r.kind}: ${String((r.error as Error).message)}`).toContain((r.error as { code: string }).code)
    }
    return results
  }

  /** Calls succeed again within a few seconds. */
  async function recovers(tag: string) {
    for (let i = 0; i < 50; i++) {
      const ok = await new BucketLimiter(s, { name: `r${tag}`, limit: 1000, interval: 60_000 }).check().then(
        () => true,
        () => false,
      )
      if (ok) return
      await new Promise((r) => setTimeout(r, 100))
    }
    throw new Error('the store did not recover')
  }

  it('CLIENT PAUSE (writes): ERR_TIMEOUT within the deadline', async () => {
    await raw.call('CLIENT', 'PAUSE', '1500', 'WRITE')
    const results = await allSettle('pause', ['ERR_TIMEOUT'])
    expect(results.some((r) => r.error)).toBe(true)
    await raw.call('CLIENT', 'UNPAUSE')
    await recovers('pause')
  }, 20_000)

  it('DEBUG SLEEP: ERR_TIMEOUT within the deadline', async () => {
    const sleeper = new Redis(url)
    await sleeper.ping() // connected: the sleep starts when sent, not after a connect under load
    const sleeping = sleeper.call('DEBUG', 'SLEEP', '1.5')
    await new Promise((r) => setTimeout(r, 50))
    const results = await allSettle('sleep', ['ERR_TIMEOUT'])
    expect(results.every((r) => r.error)).toBe(true)
    await sleeping
    sleeper.disconnect()
    await recovers('sleep')
  }, 20_000)

  it('a BUSY script: a store code within the deadline, then SCRIPT KILL and back', async () => {
    const busy = new Redis(url)
    await busy.ping() // connected: the script starts when sent, not after a connect under load
    const running = busy.eval('local i = 0 while true do i = i + 1 end', 0).catch(() => undefined)
    await new Promise((r) => setTimeout(r, 150)) // past busy-reply-threshold: Redis answers BUSY
    const results = await allSettle('busy', ['ERR_STORE_UNAVAILABLE', 'ERR_TIMEOUT'])
    expect(results.every((r) => r.error)).toBe(true)
    await raw.call('SCRIPT', 'KILL')
    await running
    busy.disconnect()
    await recovers('busy')
  }, 20_000)

  it('CLIENT KILL of every connection: calls settle with a code, the store reconnects by itself', async () => {
    await new BucketLimiter(s, { name: 'warm', limit: 10, interval: 60_000 }).check()
    const before = await raw.client('ID')
    const inflight = calls(s, 'kill').map(([, call]) => timed(call()))
    await raw.call('CLIENT', 'KILL', 'TYPE', 'normal', 'SKIPME', 'yes')
    await raw.call('CLIENT', 'KILL', 'TYPE', 'pubsub')
    for (const r of await Promise.all(inflight)) {
      expect(r.ms).toBeLessThan(TIMEOUT_MS + 250)
      if (r.error) expect(['ERR_STORE_UNAVAILABLE', 'ERR_TIMEOUT']).toContain((r.error as { code: string }).code)
    }
    await recovers('kill')
    expect(before).toBeGreaterThan(0)
  }, 20_000)
})
