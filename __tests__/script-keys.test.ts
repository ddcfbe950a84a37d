// Issue 28, item 3: every script declares every key it touches, and the keys of one script call
// share one hash slot (Dragonfly and ElastiCache Serverless refuse a script that touches an
// undeclared key). Every operation of every kind runs on a private standalone server and on a
// private 3-master cluster while MONITOR records each server: a script call (EVALSHA / EVAL)
// is followed there by the commands it ran (`[0 lua]`), whose keys (from COMMAND INFO's key
// positions) must all be among the call's KEYS. Every script under lua/ must have been seen.
// Then a server that forgets its scripts after every call (NOSCRIPT each time) and refuses
// SCRIPT: each call is answered through the EVAL fallback, on the pool and the direct lane.
import { execFileSync } from 'node:child_process'
import { createHash } from 'node:crypto'
import { readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import {
  Budget,
  BucketLimiter,
  ConcurrentLimiter,
  DistributedPacer,
  FairTenant,
  LeakyLimiter,
  PacerComposite,
  PointsLimiter,
  QuotaLimiter,
  RedisStore,
  SlidingCounterLimiter,
  SlidingWindowLimiter,
  WindowLimiter,
} from '../lib/entries/index.js'
import { pacedFetch } from '../lib/entries/fetch.js'
import { createRequire } from 'node:module'
import { freePort, startCluster, startRedis, stop } from './helpers/servers.js'
import { freshPrefix } from './helpers/stores.js'
import { args, monitor } from './helpers/monitor.js'

const LUA = join(__dirname, '..', 'lua')
const load = createRequire(__filename)
const { Door } = load('../lib/doors/http/door.js')
const { doorConfig } = load('../lib/doors/http/options.js')
/**
 * A script as the store sends it: each line `-- @include <name>` replaced by
 * `lua/includes/<name>.lua`, itself expanded (build.rs does this at build time; this test
 * expands on its own, so a script build.rs expanded otherwise is never recognised).
 */
const assembled = (file: string): string =>
  readFileSync(file, 'utf8').replace(/^-- @include (\S+)\n/gm, (_, name) =>
    assembled(join(LUA, 'includes', `${name}.lua`)),
  )
/** SHA1 of each script as sent (with the Redis 7 shebang) -> its file name. */
const SCRIPTS = new Map(
  readdirSync(LUA)
    .filter((f) => f.endsWith('.lua'))
    .map((f) => [
      createHash('sha1')
        .update(`#!lua\n${assembled(join(LUA, f))}`)
        .digest('hex'),
      f,
    ]),
)

/** `[first, last, step]` key positions of `command` (COMMAND INFO), cached. */
const positions = new Map<string, [number, number, number]>()
function keysOf(port: number, argv: string[]): string[] {
  const name = argv[0].toLowerCase()
  if (!positions.has(name)) {
    const info = JSON.parse(
      execFileSync('redis-cli', ['-p', String(port), '--json', 'COMMAND', 'INFO', name], { encoding: 'utf8' }),
    )
    const [, , , first, last, step] = info[0]
    positions.set(name, [first, last, step])
  }
  const [first, last, step] = positions.get(name)!
  if (first === 0) return []
  const end = last < 0 ? argv.length + last : last
  const keys = []
  for (let i = first; i <= end; i += step) keys.push(argv[i])
  return keys
}

function crc16(s: Buffer): number {
  let crc = 0
  for (const b of s) {
    crc ^= b << 8
    for (let i = 0; i < 8; i++) crc = crc & 0x8000 ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff
  }
  return crc
}

/** The Redis Cluster hash slot of `key`. */
function slot(key: string): number {
  const open = key.indexOf('{')
  if (open >= 0) {
    const close = key.indexOf('}', open + 1)
    if (close > open + 1) key = key.slice(open + 1, close)
  }
  return crc16(Buffer.from(key, 'latin1')) % 16384
}

/**
 * Checks the recorded lines of one server: returns the scripts seen, and every breach (a key a
 * script touched and did not declare; on a cluster, a call whose keys span slots: a standalone
 * store batches calls of any slots into one script call, which a single server allows).
 */
function check(port: number, lines: string[], cluster: boolean) {
  const seen = new Set<string>()
  const breaches: string[] = []
  let declared: Set<string> | null = null
  let script = ''
  for (const line of lines) {
    const m = /^\+[\d.]+ \[\d+ ([^\]]+)\] (.*)$/.exec(line)
    if (!m) continue
    const argv = args(m[2])
    if (m[1] !== 'lua') {
      const cmd = argv[0].toUpperCase()
      if (cmd === 'EVALSHA' || cmd === 'EVAL') {
        const sha =
          cmd === 'EVALSHA' ? argv[1] : createHash('sha1').update(Buffer.from(argv[1], 'latin1')).digest('hex')
        script = SCRIPTS.get(sha) ?? `unknown script ${sha.slice(0, 8)}`
        seen.add(script)
        const n = Number(argv[2])
        const keys = argv.slice(3, 3 + n)
        declared = new Set(keys)
        if (cluster && new Set(keys.map(slot)).size > 1)
          breaches.push(`${script}: keys in several slots: ${keys.join(' ')}`)
      } else declared = null
      continue
    }
    for (const key of keysOf(port, argv)) {
      if (declared === null || !declared.has(key)) breaches.push(`${script}: ${argv[0]} ${key} not in KEYS`)
    }
  }
  return { seen, breaches }
}

/** Every operation of every kind, on `store`. */
async function everything(store: RedisStore) {
  const pacer = new DistributedPacer(store, { key: 'p', qps: 1, maxBurst: 1 })
  await pacer.pace()
  await pacer.rateLimit().catch(() => {})
  await pacer.block(100)
  // a slot given back (pacer_give)
  await (await pacer.pace()).cancel()
  const other = new DistributedPacer(store, { key: 'q', qps: 100 })
  // rate-limit mode refused by one member: the others' charges are taken back (pacer_undo on a cluster)
  await new PacerComposite([other, pacer]).rateLimit().catch(() => {})
  await new PacerComposite([other, pacer]).pace()
  for (const L of [BucketLimiter, WindowLimiter, LeakyLimiter]) {
    const l = new L(store, { name: `l${L.name}`, limit: 2, interval: 60_000 })
    await l.check()
    await l.withinLimit(() => 1)
    await l.reset()
  }
  const points = new PointsLimiter(store, { name: 'pts', points: 10, interval: 60_000 })
  await points.withinLimit((h) => h.pointsUsed(3), { estimate: 5 })
  const concurrent = new ConcurrentLimiter(store, { name: 'c', limit: 1, lockTimeoutMs: 10_000 })
  const lease = await concurrent.acquire()
  expect(await concurrent.tryAcquire()).toBeNull()
  await lease.extend(5_000)
  await lease.release()
  await concurrent.withinLimit(() => 1)
  await concurrent.stats()
  const windows = [{ limit: 5, intervalMs: 60_000 }]
  const sliding = new SlidingWindowLimiter(store, { name: 'sw', windows })
  await sliding.check()
  await sliding.ensure(() => 1)
  const counter = new SlidingCounterLimiter(store, { name: 'sc', windows })
  await counter.check()
  await counter.withinLimit(() => 1)
  await counter.reset()
  const quota = { windowSeconds: 3600, granularitySeconds: 60, limit: 60 }
  const quotas = new QuotaLimiter(store)
  const requests = [{ prefix: 'org:1', requested: 2, quotas: [quota] }]
  const { timestamp, grants } = await quotas.checkWithinQuotas(requests)
  await quotas.useQuotas(requests, grants, timestamp)
  await quotas.checkAndUseQuotas(requests)
  const fair = new FairTenant(store, { name: 'f', rules: [{ queue: 'slow', threshold: 1, perMs: 60_000 }] })
  await fair.assign('acme', 'j1', 'fast')
  await fair.route('acme', 'j2', 'fast')
  const budget = new Budget(store, {
    name: 'b',
    dimensions: { requests: { limit: 10, intervalMs: 60_000 }, tokens: { limit: 1000, intervalMs: 60_000 } },
  })
  const r = await budget.reserve({ requests: 1, tokens: 100 })
  await r.settle({ tokens: 40 })
  await (await budget.reserve({ requests: 1 })).cancel()
  // through a tenant: its field in :t and its entry in :a (the active set)
  const tenant = budget.tenant('t\n}{1', { share: 0.5 })
  await (await tenant.reserve({ requests: 1, tokens: 10 })).settle({ tokens: 5 })
  await budget.stats()
  // sluice/fetch's adaptive kind: a pace, a 429 with Retry-After (a throttled report with a
  // block), an answer stating a limit (a learned rate), each key on its own record; answers
  // made here (the script is what is checked, not HTTP)
  const answers = [
    new Response('', { status: 429, headers: { 'Retry-After': '1' } }),
    new Response('', {
      headers: { 'X-RateLimit-Limit': '100', 'X-RateLimit-Remaining': '50', 'X-RateLimit-Reset': '10' },
    }),
  ]
  const paced = pacedFetch({
    store,
    key: (url) => url.pathname,
    adaptive: { maxQps: 1000 },
    retry: false,
    fetch: async () => answers.shift() ?? new Response('ok'),
  })
  expect((await paced('http://upstream.invalid/a')).status).toBe(429)
  expect((await paced('http://upstream.invalid/b')).status).toBe(200)
  expect((await paced.stats('/a'))[0]).toMatchObject({ throttled: 1, blocks: 1, decreases: 1 })
  await store.limiters()
  await pacer.stats()
  // the store's rules (lua/rules.lua): a set, a list (a read of the changes), the history, a delete
  await store.rules.set({ kind: 'bucket', name: 'lBucketLimiter' }, { limit: 3 }, { ttlMs: 60_000 })
  await store.rules.list()
  await store.rules.history()
  await store.rules.delete({ kind: 'bucket', name: 'lBucketLimiter' })
  // a door's ban: refusals tallied in the decision's call (limit.lua -9), the ban written and lifted (rules.lua)
  const door = new Door(
    doorConfig({
      store,
      identifier: 'ban',
      limit: 1,
      windowMs: 60_000,
      keyGenerator: () => 'k',
      ban: { after: 2, withinMs: 60_000, forMs: 60_000 },
    }),
  )
  for (let i = 0; i < 3; i++) await door.decide({}, {})
  expect(await store.rules.unban({ door: 'ban', key: 'k' })).toBe(true)
}

describe('the MONITOR line reader', () => {
  it("reads Redis' escapes and Valkey's unescaped quote inside an argument", () => {
    expect(args('"SET" "k" "a\\"b\\x00" "PX" "1"')).toEqual(['SET', 'k', 'a"b\x00', 'PX', '1'])
    // Valkey 8.1: a state of raw bytes holding a double quote, as CI met it
    expect(args('"SET" "t:pacer:{q}" "\\x06"\\x99C" "PX" "121000"')).toEqual([
      'SET',
      't:pacer:{q}',
      '\x06"\x99C',
      'PX',
      '121000',
    ])
  })
})

describe('every script declares every key it touches, all in one slot', () => {
  let port: number
  let server: Awaited<ReturnType<typeof startRedis>>
  let cluster: Awaited<ReturnType<typeof startCluster>>
  beforeAll(async () => {
    port = await freePort()
    server = await startRedis(port)
    cluster = await startCluster()
  }, 60_000)
  afterAll(async () => {
    if (server) await stop(server)
    await cluster?.stopAll()
  })

  it('standalone (direct lane and pool) and cluster: every script seen, no undeclared key', async () => {
    const seen = new Set<string>()
    const breaches: string[] = []
    const ports = [port, ...cluster.urls.map((u) => Number(u.split(':')[2]))]
    const monitors = await Promise.all(ports.map(monitor))
    for (const options of [
      { url: `redis://127.0.0.1:${port}` },
      { url: `redis://127.0.0.1:${port}`, directConnection: false },
      { cluster: cluster.urls },
    ]) {
      const store = await RedisStore.connect({ ...options, keyPrefix: freshPrefix(), statsFlushMs: 10 })
      await everything(store)
      await store.close()
    }
    const recorded = await Promise.all(monitors.map((m) => m.stop()))
    recorded.forEach((lines, i) => {
      const r = check(ports[i], lines, i > 0)
      r.seen.forEach((s) => seen.add(s))
      breaches.push(...r.breaches)
    })
    console.log(`scripts seen: ${[...seen].sort().join(', ')}; breaches: ${breaches.length}`)
    expect([...new Set(breaches)]).toEqual([])
    expect([...seen].sort()).toEqual([...SCRIPTS.values()].sort())
  }, 60_000)
})

describe('a server that forgets its scripts and refuses SCRIPT (as some serverless caches do)', () => {
  let port: number
  let server: Awaited<ReturnType<typeof startRedis>>
  const SCRIPT = 'sluice-script-renamed'
  const cli = (...a: string[]) => execFileSync('redis-cli', ['-p', String(port), ...a], { encoding: 'utf8' }).trim()
  beforeAll(async () => {
    port = await freePort()
    server = await startRedis(port, ['--rename-command', 'SCRIPT', SCRIPT])
  })
  afterAll(async () => {
    if (server) await stop(server)
  })

  it('the check itself finds an undeclared key and a cross-slot call', () => {
    const lines = [
      '+1.5 [0 127.0.0.1:9] "EVALSHA" "00" "2" "a{x}" "b{y}"',
      '+1.5 [0 lua] "GET" "c"',
      '+1.5 [0 lua] "GET" "a{x}"',
    ]
    expect(check(port, lines, true).breaches).toHaveLength(2)
  })

  it.each([true, false])(
    'directConnection %s: NOSCRIPT on every call is answered by EVAL; decisions exact',
    async (direct) => {
      expect(cli('SCRIPT', 'LOAD', 'return 1')).toMatch(/unknown command/)
      const before = Number(/cmdstat_eval:calls=(\d+)/.exec(cli('INFO', 'commandstats'))?.[1] ?? 0)
      const store = await RedisStore.connect({
        url: `redis://127.0.0.1:${port}`,
        directConnection: direct,
        keyPrefix: freshPrefix(),
      })
      try {
        const l = new WindowLimiter(store, { name: 'w', limit: 3, interval: 60_000 })
        const answers = []
        for (let i = 0; i < 5; i++) {
          expect(cli(SCRIPT, 'FLUSH')).toBe('OK')
          answers.push((await l.check()).allowed)
        }
        expect(answers).toEqual([true, true, true, false, false])
        const evals = Number(/cmdstat_eval:calls=(\d+)/.exec(cli('INFO', 'commandstats'))?.[1] ?? 0) - before
        expect(evals).toBeGreaterThanOrEqual(5)
        expect(store.batching.direct > 0).toBe(direct)
      } finally {
        await store.close()
      }
    },
  )
})
