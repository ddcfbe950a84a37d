// Batching across event-loop turns (lib/store/batcher.js) and the direct lane (lib/store/direct.js):
// calls made one per turn while a round trip is under way leave together, keep their order
// and their decisions; a call made when nothing is under way leaves in its own tick; a batch
// that fails fails every call in it, and the next calls recover. Round trips are held in
// flight by CLIENT PAUSE on servers this file starts itself (a pause must not disturb the
// suite's shared servers), so nothing here depends on timing.
import Redis from 'ioredis'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import {
  BucketLimiter,
  ConcurrentLimiter,
  DistributedPacer,
  ManualClock,
  MemoryStore,
  QuotaLimiter,
  RedisStore,
  SlidingWindowLimiter,
  SluiceError,
  WindowLimiter,
} from '../lib/entries/index.js'
import { frame, parseUrl } from '../lib/store/direct.js'
import { HAS_CLUSTER, clusterNodes, freshPrefix } from './helpers/stores.js'
import { eventually, freePort, startRedis, stop } from './helpers/servers.js'

const turn = () => new Promise<void>((resolve) => setImmediate(resolve))
const nextTick = () => new Promise<void>((resolve) => process.nextTick(resolve))

/** Settles every promise; the outcome of each, in order. */
const settle = <T>(ps: Promise<T>[]) =>
  Promise.all(
    ps.map((p) =>
      p.then(
        (value) => ({ value, error: null }),
        (error) => ({ value: null, error }),
      ),
    ),
  )

for (const direct of [true, false]) {
  describe(`batching on a standalone server (${direct ? 'direct lane' : 'pool'})`, () => {
    let port = 0
    let server: Awaited<ReturnType<typeof startRedis>>
    let raw: Redis
    beforeAll(async () => {
      port = await freePort()
      server = await startRedis(port)
      raw = new Redis(`redis://127.0.0.1:${port}`)
    })
    afterAll(async () => {
      raw.disconnect()
      await stop(server)
    })
    const connect = (o: { clock?: ManualClock; commandTimeoutMs?: number } = {}) =>
      RedisStore.connect({ url: `redis://127.0.0.1:${port}`, keyPrefix: freshPrefix(), directConnection: direct, ...o })

    it('uses the direct connection only when asked', async () => {
      const store = await connect()
      try {
        await new BucketLimiter(store, { name: 'b', limit: 5, interval: 'second' }).check()
        expect(store.batching.direct > 0).toBe(direct)
      } finally {
        await store.close()
      }
    })

    it('a call made when nothing is under way leaves in its own tick, for every kind', async () => {
      const store = await connect()
      try {
        const calls: (() => Promise<unknown>)[] = [
          () => new BucketLimiter(store, { name: 'b', limit: 5, interval: 'second' }).check(),
          () => new DistributedPacer(store, { key: 'p', qps: 10 }).rateLimit(),
          () => new SlidingWindowLimiter(store, { name: 's', windows: [{ limit: 5, intervalMs: 1000 }] }).check(),
          () =>
            new QuotaLimiter(store).checkAndUseQuotas([
              { prefix: 'q', requested: 1, quotas: [{ windowSeconds: 10, granularitySeconds: 1, limit: 5 }] },
            ]),
          () => new ConcurrentLimiter(store, { name: 'c', limit: 1 }).tryAcquire(),
        ]
        for (const call of calls) {
          const before = store.batching.batches
          const pending = call()
          await nextTick() // the flush was queued first, so it has run: no timer was involved
          expect(store.batching.batches).toBe(before + 1)
          await pending
        }
      } finally {
        await store.close()
      }
    })

    it('calls made one per turn while a batch is under way leave together, in order, with one-by-one decisions', async () => {
      const clock = new ManualClock(1_800_000_000_000)
      const store = await connect({ clock })
      const model = new MemoryStore({ clock })
      try {
        const keys = ['a', 'b', 'c']
        const limiter = (s: RedisStore | MemoryStore, i: number) =>
          new BucketLimiter(s, { name: keys[i % 3], limit: 7, interval: 'minute' })
        const expected = []
        for (let i = 0; i < 60; i++) expected.push(await limiter(model, i).check())
        const before = store.batching
        await raw.client('PAUSE', 500, 'ALL') // the first round trips stay under way
        const pending = [limiter(store, 0).check()]
        for (let i = 1; i < 60; i++) {
          await turn()
          pending.push(limiter(store, i).check())
        }
        const actual = await Promise.all(pending)
        expect(actual).toEqual(expected)
        // two batches left at once (the bound), the 58 calls that came meanwhile left as one
        expect(store.batching.batches - before.batches).toBe(3)
        expect(store.batching.calls - before.calls).toBe(60)
      } finally {
        await store.close()
      }
    })

    it('a batch that fails rejects every call in it with a store code, and the next calls recover', async () => {
      const ownPort = await freePort()
      let own = await startRedis(ownPort)
      const store = await RedisStore.connect({
        url: `redis://127.0.0.1:${ownPort}`,
        keyPrefix: freshPrefix(),
        directConnection: direct,
        commandTimeoutMs: 5000,
      })
      try {
        const limiter = (i: number) => new BucketLimiter(store, { name: `k${i % 4}`, limit: 100, interval: 'minute' })
        expect((await limiter(0).check()).allowed).toBe(true)
        const ownRaw = new Redis(`redis://127.0.0.1:${ownPort}`)
        await ownRaw.client('PAUSE', 5000, 'ALL')
        ownRaw.disconnect()
        const pending = []
        for (let i = 0; i < 20; i++) {
          pending.push(limiter(i).check())
          await turn()
        }
        const settled = settle(pending)
        await stop(own) // killed with batches under way and calls queued behind them
        for (const { error } of await settled) {
          expect(error).toBeInstanceOf(SluiceError)
          expect(['ERR_STORE_UNAVAILABLE', 'ERR_TIMEOUT']).toContain((error as SluiceError).code)
        }
        own = await startRedis(ownPort)
        await eventually(() => limiter(1).check(), 10_000)
        const after = await Promise.all([0, 1, 2, 3].map((i) => limiter(i).check()))
        expect(after.every((d) => d.allowed)).toBe(true)
        if (direct) await eventually(async () => expect(store.batching.direct).toBeGreaterThan(1), 10_000)
      } finally {
        await store.close()
        await stop(own)
      }
    })

    it('a call past commandTimeoutMs rejects with ERR_TIMEOUT, and later calls are answered', async () => {
      const store = await connect({ commandTimeoutMs: 200 })
      try {
        // a window that opens at the first call: no calendar boundary can reset it mid-test
        const limiter = new WindowLimiter(store, { name: 't', limit: 100, interval: 'minute' })
        await limiter.check()
        await raw.client('PAUSE', 600, 'ALL')
        const [{ error }] = await settle([limiter.check()])
        expect((error as SluiceError).code).toBe('ERR_TIMEOUT')
        // the late reply of the timed-out call is skipped, not given to the next call
        await eventually(() => limiter.check(), 5000)
        const d = await limiter.peek()
        expect(d.remaining).toBeLessThanOrEqual(98)
      } finally {
        await store.close()
      }
    })
  })
}

describe.skipIf(!HAS_CLUSTER)('batching on a Redis Cluster', () => {
  it('calls made one per turn while a batch is under way leave together, with one-by-one decisions', async () => {
    const clock = new ManualClock(1_800_000_000_000)
    // a generous deadline: the shared cluster is busy with the other files' multi-process runs,
    // and this test is about batching, not timeouts
    const store = await RedisStore.connect({
      cluster: clusterNodes(),
      keyPrefix: freshPrefix(),
      clock,
      commandTimeoutMs: 10_000,
    })
    const model = new MemoryStore({ clock })
    try {
      expect(store.isCluster).toBe(true)
      const limiter = (s: RedisStore | MemoryStore, i: number) =>
        new SlidingWindowLimiter(s, { name: `k${i % 5}`, windows: [{ limit: 6, intervalMs: 60_000 }] })
      const expected = []
      for (let i = 0; i < 100; i++) expected.push(await limiter(model, i).check())
      const pending = []
      for (let i = 0; i < 100; i++) {
        pending.push(limiter(store, i).check())
        await turn()
      }
      expect(await Promise.all(pending)).toEqual(expected)
      expect(store.batching.direct).toBe(0)
    } finally {
      await store.close()
    }
  })
})

describe('the direct lane on a server with a password and a database number', () => {
  let port = 0
  let server: Awaited<ReturnType<typeof startRedis>>
  beforeAll(async () => {
    port = await freePort()
    server = await startRedis(port, ['--requirepass', 'sec ret'])
  })
  afterAll(() => stop(server))

  for (const auth of [':sec%20ret@', 'default:sec%20ret@']) {
    it(`authenticates (${auth}) and selects the database`, async () => {
      const prefix = freshPrefix()
      const store = await RedisStore.connect({ url: `redis://${auth}127.0.0.1:${port}/3`, keyPrefix: prefix })
      const raw = new Redis({ port, password: 'sec ret', db: 3 })
      try {
        expect((await new BucketLimiter(store, { name: 'x', limit: 5, interval: 'minute' }).check()).allowed).toBe(true)
        expect(store.batching.direct).toBe(1)
        expect(await raw.keys(`${prefix}:*`)).toHaveLength(1)
      } finally {
        raw.disconnect()
        await store.close()
      }
    })
  }
})

describe('the direct lane: reply framing and URLs', () => {
  const b = (s: string) => Buffer.from(s)

  it('frames whole replies and waits for cut ones', () => {
    const reply = '*3\r\n:1\r\n$2\r\nab\r\n$-1\r\n'
    expect(frame(b(reply), 0, 1)).toBe(reply.length)
    for (let cut = 0; cut < reply.length; cut++) expect(frame(b(reply.slice(0, cut)), 0, 1)).toBe(-1)
    expect(frame(b(`${reply}-ERR x\r\n:5\r\n`), 0, 3)).toBe(reply.length + 12)
    expect(frame(b('*-1\r\n*0\r\n'), 0, 2)).toBe(9)
    // bulk data is skipped by its length, whatever it holds
    expect(frame(b('$4\r\n\r\n\r\n\r\n:1\r\n'), 0, 2)).toBe(14)
  })

  it('refuses what is not a reply of ours: deep nesting, unknown types, bad lengths, huge sizes', () => {
    const ok = '*1\r\n'.repeat(4) + ':1\r\n'
    expect(frame(b(ok), 0, 1)).toBe(ok.length)
    expect(frame(b('*1\r\n'.repeat(5) + ':1\r\n'), 0, 1)).toBe(-2)
    expect(frame(b('*1\r\n'.repeat(100_000) + ':1\r\n'), 0, 1)).toBe(-2)
    for (const bad of ['?x\r\n', '\x00\r\n', '$x\r\n', '$-2\r\n', '$3\r\nabcd\r\n', '*1a\r\n', '+ok\rx']) {
      expect(frame(b(bad), 0, 1), JSON.stringify(bad)).toBe(-2)
    }
    expect(frame(b('$99999999999\r\n'), 0, 1)).toBe(-2) // a bulk over 64 MB is never ours
    expect(frame(b('*99999999\r\n'), 0, 1)).toBe(-2)
    expect(frame(b('$1000000\r\nabc'), 0, 1)).toBe(-1) // waits for bytes, allocates nothing ahead
    expect(frame(Buffer.alloc(70_000, 120), 0, 1)).toBe(-2) // a line without end
  })

  it('takes plain redis:// URLs only', () => {
    expect(parseUrl('redis://127.0.0.1:7000')).toEqual({ host: '127.0.0.1', port: 7000, user: '', password: '', db: 0 })
    expect(parseUrl('redis://u:p%40ss@h/2')).toEqual({ host: 'h', port: 6379, user: 'u', password: 'p@ss', db: 2 })
    expect(parseUrl('rediss://h:1')).toBeNull()
    expect(parseUrl('redis://h:1/?x=1')).toBeNull()
    expect(parseUrl('redis://h:1/x')).toBeNull()
    expect(parseUrl('not a url')).toBeNull()
  })
})
