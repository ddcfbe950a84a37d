// Issue 24, item 1: a name is hostile input. The statistics flush joined its operations with
// newlines and left the registry entry `<kind>:<name>` raw, so a pacer key such as
// `x\n1\n\nincr\n1\n<ANY KEY>\n3\n1,,0` was read as an extra operation (Redis ran PEXPIRE on
// another application's key), and a plain newline stopped every later flush, silently. Every
// list that crosses to the native side now goes through one length-prefixed codec
// (lib/base/codec.js, src/codec.rs). Here, on a Redis server of this file's own (so a SCAN of the
// whole server can be compared with the keys expected), and on the shared cluster (a SCAN of
// every node under this test's prefix).
import type { ChildProcess } from 'node:child_process'
import { Cluster, Redis } from 'ioredis'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import {
  BucketLimiter,
  ConcurrentLimiter,
  DistributedPacer,
  FairTenant,
  LeakyLimiter,
  PointsLimiter,
  QuotaLimiter,
  RedisStore,
  SlidingWindowLimiter,
  WindowLimiter,
} from '../lib/entries/index.js'
import { decodeParts, encodeParts } from '../lib/base/codec.js'
import { freePort, startRedis, stop } from './helpers/servers.js'
import { HAS_CLUSTER, clusterNodes, freshPrefix, redisUrl } from './helpers/stores.js'

/** The store's internals these tests look at. */
interface Internals {
  _flushStats(): Promise<void>
  _statsKey(kind: string, name: string): string
  _registryKeys(): string[]
}
const internal = (store: RedisStore) => store as unknown as Internals

const REPORTED = (victim: string) => `x\n1\n\nincr\n1\n${victim}\n3\n1,,0`

/** A fixed-seed generator of hostile names: every control byte, every separator the code ever used. */
function names(seed: number, count: number): string[] {
  let x = seed
  const next = (n: number) => {
    x = (x * 1103515245 + 12345) % 2 ** 31
    return x % n
  }
  const atoms = [
    ...Array.from({ length: 32 }, (_, i) => String.fromCharCode(i)),
    '\x7f',
    '\u0085',
    '\u2028',
    '\u202e',
    '\n',
    '\r\n',
    ',',
    ':',
    '|',
    '%',
    '{',
    '}',
    ' ',
    '0',
    '1:',
    '3:',
    '12:',
    'incr',
    'registry',
    'del',
    'since',
    'hgetall',
    'victim',
    '李雷',
    'Ольга',
    '😀',
    'a',
  ]
  const out = new Set<string>()
  while (out.size < count) {
    let s = ''
    const len = 1 + next(12)
    for (let i = 0; i < len; i++) s += atoms[next(atoms.length)]
    out.add(s)
  }
  return [...out]
}

/** Every key of a server (or of every master of a cluster). */
async function allKeys(client: Redis | Cluster, match = '*'): Promise<string[]> {
  const nodes = client instanceof Cluster ? client.nodes('master') : [client]
  const keys: string[] = []
  for (const node of nodes) {
    let cursor = '0'
    do {
      const [next, batch] = await node.scan(cursor, 'MATCH', match, 'COUNT', 1000)
      keys.push(...batch)
      cursor = next
    } while (cursor !== '0')
  }
  return keys.sort()
}

describe('the codec', () => {
  it('round-trips every list, whatever its parts hold', () => {
    for (const list of [[], [''], ['a', ''], names(7, 50), [REPORTED('v')]]) {
      expect(decodeParts(encodeParts(list))).toEqual(list)
    }
    expect(encodeParts(['😀', 'ab'])).toBe('2:😀2:ab')
    expect(() => decodeParts('3:ab')).toThrow()
    expect(() => decodeParts('a')).toThrow()
  })
})

describe('issue-24-injection: on a server of its own', () => {
  let server: ChildProcess
  let admin: Redis
  let url: string

  beforeAll(async () => {
    const port = await freePort()
    server = await startRedis(port)
    url = `redis://127.0.0.1:${port}`
    admin = new Redis(url)
  }, 30_000)
  afterAll(async () => {
    admin.disconnect()
    await stop(server)
  })

  for (const directConnection of [true, false]) {
    it(`the reported pacer key runs no command on another key (${directConnection ? 'direct lane' : 'pool'})`, async () => {
      const victim = `session:${freshPrefix()}`
      const queue = `bull:${freshPrefix()}:delayed`
      await admin.set(victim, 'alice')
      await admin.zadd(queue, 1, 'job-1')
      const store = await RedisStore.connect({ url, keyPrefix: freshPrefix(), directConnection, statsFlushMs: 600_000 })
      try {
        for (const v of [victim, queue]) {
          const pacer = new DistributedPacer(store, { key: REPORTED(v), qps: 1000, maxBurst: 10 })
          for (let i = 0; i < 3; i++) expect((await pacer.rateLimit()).delayMs).toBe(0)
        }
        const plain = new DistributedPacer(store, { key: 'line\nbreak', qps: 1000, maxBurst: 10 })
        await plain.rateLimit()
        await internal(store)._flushStats()
        // a second flush works too (a newline used to stop every later flush)
        await plain.rateLimit()
        await internal(store)._flushStats()
        expect(await admin.pttl(victim)).toBe(-1)
        expect(await admin.get(victim)).toBe('alice')
        expect(await admin.pttl(queue)).toBe(-1)
        expect(await admin.zrange(queue, '0', '-1')).toEqual(['job-1'])
        expect((await new DistributedPacer(store, { key: REPORTED(victim), qps: 1000 }).stats()).admitted).toBe(3)
        expect((await plain.stats()).admitted).toBe(2)
        const listed = (await store.limiters()).filter((l) => l.kind === 'pacer').map((l) => l.name)
        expect(listed.sort()).toEqual([REPORTED(victim), REPORTED(queue), 'line\nbreak'].sort())
        expect(store.statsDropped).toBe(0)
      } finally {
        await store.close()
        await admin.del(victim, queue)
      }
    })
  }

  it('fuzz: 300 hostile names through decisions and a whole flush; the server holds exactly the keys expected', async () => {
    const canary = 'canary:outside-the-prefix'
    await admin.set(canary, 'untouched')
    const before = new Set(await allKeys(admin))
    const prefix = freshPrefix()
    const store = await RedisStore.connect({ url, keyPrefix: prefix, statsFlushMs: 600_000 })
    const expected = new Set<string>(before)
    const stats = new Map<string, { kind: string; name: string; admitted: number }>()
    try {
      const quota = new QuotaLimiter(store)
      const list = names(24, 300)
      let i = 0
      for (const name of list) {
        if (i++ % 3 === 0 && !/[{}\n]/.test(name)) {
          const q = { windowSeconds: 60, granularitySeconds: 10, limit: 100 }
          const got = await quota.checkAndUseQuotas([{ prefix: name, requested: 1, quotas: [q] }])
          expect(got[0].granted).toBe(1)
          expected.add(`${prefix}:quota:{${name}}:60:10`)
          stats.set(`quota\0${name}`, { kind: 'quota', name, admitted: 1 })
        } else {
          const pacer = new DistributedPacer(store, { key: name, qps: 1000, maxBurst: 5 })
          expect((await pacer.rateLimit()).delayMs).toBe(0)
          expected.add((pacer as unknown as { _storeKey: string })._storeKey)
          stats.set(`pacer\0${name}`, { kind: 'pacer', name, admitted: 1 })
        }
      }
      await internal(store)._flushStats()
      for (const s of stats.values()) expected.add(internal(store)._statsKey(s.kind, s.name))
      for (const k of internal(store)._registryKeys()) expected.add(k)
      const after = await allKeys(admin)
      // nothing outside the expected set (pacer state may already have expired: a subset)
      for (const k of after) expect(expected.has(k), JSON.stringify(k)).toBe(true)
      // every statistics hash is there, with its count, under its own name
      for (const s of stats.values()) {
        expect(await admin.hget(internal(store)._statsKey(s.kind, s.name), 'admitted'), JSON.stringify(s.name)).toBe(
          '1',
        )
      }
      const listed = new Set((await store.limiters()).map((l) => `${l.kind}\0${l.name}`))
      for (const k of stats.keys()) expect(listed.has(k), JSON.stringify(k)).toBe(true)
      expect(await admin.get(canary)).toBe('untouched')
      expect(await admin.pttl(canary)).toBe(-1)
      expect(store.statsDropped).toBe(0)
    } finally {
      await store.close()
    }
  }, 60_000)
})

describe('issue-24-injection: every control byte and separator in every name field of every kind', () => {
  const BYTES = [...Array.from({ length: 32 }, (_, i) => String.fromCharCode(i)), '\x7f', ',', ':', '|', '%', ' ']
  const code = async (fn: () => unknown) => {
    try {
      await fn()
      return 'ok'
    } catch (err) {
      return (err as { code: string }).code
    }
  }

  it('limiter names are refused at construction; free-text fields are decided under their own name', async () => {
    const prefix = freshPrefix()
    const store = await RedisStore.connect({ url: redisUrl(), keyPrefix: prefix, statsFlushMs: 600_000 })
    const raw = new Redis(redisUrl())
    try {
      const quota = new QuotaLimiter(store)
      const fair = new FairTenant(store, { name: 'f', rules: [{ queue: 'slow', threshold: 100, perMs: 60_000 }] })
      for (const b of BYTES) {
        const name = `a${b}incr${b}1${b}`
        // a limiter's name takes any text as a pacer's key does (issue-38-names): decided under
        // its own name, its key escaped into the hash tag, nothing split or injected
        for (const make of [
          () => new BucketLimiter(store, { name, limit: 1, interval: 'second' }).check(),
          () => new WindowLimiter(store, { name, limit: 1, interval: 'second' }).check(),
          () => new LeakyLimiter(store, { name, limit: 1, interval: 'second' }).check(),
          () => new PointsLimiter(store, { name, points: 1, interval: 'second' }).check(),
          () => new ConcurrentLimiter(store, { name, limit: 1 }).tryAcquire(),
          () => new SlidingWindowLimiter(store, { name, windows: [{ limit: 1, intervalMs: 1000 }] }).check(),
          () => new FairTenant(store, { name, rules: [{ queue: 'q', threshold: 1, perMs: 1000 }] }).stats(),
        ]) {
          expect(await code(make), JSON.stringify(name)).toBe('ok')
        }
        // a pacer key takes any text
        const pacer = new DistributedPacer(store, { key: name, qps: 1000, maxBurst: 5 })
        expect((await pacer.rateLimit()).delayMs).toBe(0)
        // a quota prefix: any text but braces and newlines (refused with a code)
        const q = { windowSeconds: 60, granularitySeconds: 10, limit: 100 }
        const got = await code(() => quota.checkAndUseQuotas([{ prefix: name, requested: 1, quotas: [q] }]))
        expect(got, JSON.stringify(name)).toBe(b === '\n' ? 'ERR_INVALID_CONFIG' : 'ok')
        // a tenant and a job id: any text but newlines (refused with a code)
        const routed = await code(() => fair.route(name, `job${b}1`, 'default'))
        expect(routed, JSON.stringify(name)).toBe(b === '\n' ? 'ERR_INVALID_ARGUMENT' : 'ok')
      }
      await internal(store)._flushStats()
      for (const b of BYTES) {
        const name = `a${b}incr${b}1${b}`
        expect(await raw.hget(internal(store)._statsKey('pacer', name), 'admitted'), JSON.stringify(name)).toBe('1')
        for (const kind of ['bucket', 'window', 'leaky', 'points', 'sliding']) {
          expect(
            await raw.hget(internal(store)._statsKey(kind, name), 'admitted'),
            `${kind} ${JSON.stringify(name)}`,
          ).toBe('1')
        }
        if (b !== '\n') expect(await raw.hget(internal(store)._statsKey('quota', name), 'admitted')).toBe('1')
      }
      // every key written is under the prefix, and each is one this test caused
      for (const k of await allKeys(raw, `${prefix}*`)) {
        expect(k.startsWith(`${prefix}:`), JSON.stringify(k)).toBe(true)
      }
      expect(store.statsDropped).toBe(0)
    } finally {
      raw.disconnect()
      await store.close()
    }
  })
})

describe.skipIf(!HAS_CLUSTER)('issue-24-injection: on the cluster', () => {
  let admin: Cluster
  beforeAll(() => {
    admin = new Cluster(clusterNodes().map((u) => ({ host: new URL(u).hostname, port: Number(new URL(u).port) })))
  })
  afterAll(() => admin.disconnect())

  it('the reported key and 100 fuzzed names: statistics under their own names, the victim untouched', async () => {
    const victim = `{victim}:${freshPrefix()}`
    await admin.set(victim, 'alice')
    const prefix = freshPrefix()
    const store = await RedisStore.connect({ cluster: clusterNodes(), keyPrefix: prefix, statsFlushMs: 600_000 })
    try {
      const list = [REPORTED(victim), ...names(25, 100)]
      for (const name of list) await new DistributedPacer(store, { key: name, qps: 1000, maxBurst: 5 }).rateLimit()
      await internal(store)._flushStats()
      expect(await admin.get(victim)).toBe('alice')
      expect(await admin.pttl(victim)).toBe(-1)
      for (const name of list) {
        expect(await admin.hget(internal(store)._statsKey('pacer', name), 'admitted'), JSON.stringify(name)).toBe('1')
      }
      const keys = await allKeys(admin, `${prefix}:*`)
      const stats = keys.filter((k) => k.startsWith(`${prefix}:stats:`))
      expect(stats.length).toBe(list.length)
      expect(store.statsDropped).toBe(0)
    } finally {
      await store.close()
      await admin.del(victim)
    }
  }, 60_000)
})
