// Errors that say what to do (issue 38, "Errors"): every unknown option of every constructor
// and door names the closest known one, values are shown with their type, store errors name
// the server (host:port, never credentials), and ioredis' `{ host, port }` gets a hint.
import { spawnSync } from 'node:child_process'
import { createServer } from 'node:net'
import { join } from 'node:path'
import { createRequire } from 'node:module'
import { afterAll, describe, expect, it } from 'vitest'
import Fastify from 'fastify'
import {
  Budget,
  BucketLimiter,
  ConcurrentLimiter,
  DistributedPacer,
  FairTenant,
  LeakyLimiter,
  ManualClock,
  MemoryStore,
  PointsLimiter,
  QuotaLimiter,
  RedisStore,
  SluiceError,
  SlidingCounterLimiter,
  SlidingWindowLimiter,
  WindowLimiter,
} from '../lib/entries/index.js'
import { rateLimit } from '../lib/entries/express.js'
import sluiceRateLimit from '../lib/entries/fastify.js'
import { interceptor, pacedFetch } from '../lib/entries/fetch.js'
import { FairQueues, limitProcessor, weightedWorkers } from '../lib/entries/bullmq.js'
import { dashboard } from '../lib/entries/dashboard.js'
import { collectMetrics } from '../lib/entries/metrics.js'
import { redisUrl } from './helpers/stores.js'
import { HostileProxy } from './helpers/hostile-proxy.js'

const { closestName, describeValue } = createRequire(__filename)('../lib/base/errors.js') as {
  closestName: (name: string, known: string[]) => string | null
  describeValue: (v: unknown) => string
}
const { serverOf } = createRequire(__filename)('../lib/store/options.js') as {
  serverOf: (url: string) => string | null
}

const store = new MemoryStore({ clock: new ManualClock(1_800_000_000_000) })
afterAll(() => store.close())

/** The message of the SluiceError `fn` throws or rejects with (its code checked). */
async function messageOf(fn: () => unknown, code = 'ERR_INVALID_CONFIG'): Promise<string> {
  try {
    await fn()
  } catch (err) {
    expect(err).toBeInstanceOf(SluiceError)
    expect((err as SluiceError).code).toBe(code)
    return (err as Error).message
  }
  throw new Error('expected an error')
}

/**
 * The ways a name is mistyped: another case (`windowMS`), snake_case (`max_burst`), a letter
 * doubled (`intervall`), two neighbours swapped (`limti`), a letter dropped (`widowMs`).
 */
function misspellings(name: string): string[] {
  const out = new Set<string>()
  out.add(name === name.toLowerCase() ? name[0].toUpperCase() + name.slice(1) : name.toLowerCase())
  if (/[A-Z]/.test(name)) out.add(name.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`))
  out.add(name + name[name.length - 1])
  if (name.length >= 4) {
    const i = Math.floor(name.length / 2)
    out.add(name.slice(0, i - 1) + name[i] + name[i - 1] + name.slice(i + 1))
  }
  if (name.length >= 5) out.add(name.slice(0, 2) + name.slice(3))
  out.delete(name)
  return [...out]
}

/** Each option of `valid` given under each misspelling of its name (the value kept). */
function* mistyped(valid: Record<string, unknown>): Generator<[string, string, Record<string, unknown>]> {
  for (const name of Object.keys(valid)) {
    for (const typo of misspellings(name)) {
      if (typo in valid) continue
      const options: Record<string, unknown> = {}
      for (const [k, v] of Object.entries(valid)) options[k === name ? typo : k] = v
      yield [name, typo, options]
    }
  }
}

const processor = async () => undefined
const queue = { add: async () => undefined, addBulk: async () => undefined }
const fair = new FairTenant(store, { name: 'f', rules: [{ queue: 'q', threshold: 1, perMs: 1000 }] })
const budget = new Budget(store, { name: 'b', dimensions: { calls: { limit: 10, intervalMs: 1000 } } })
const bucket = new BucketLimiter(store, { name: 'bk', limit: 5, interval: 'second' })
const sliding = new SlidingWindowLimiter(store, { name: 's', windows: [{ limit: 5, intervalMs: 1000 }] })
const pacer = new DistributedPacer(store, { key: 'p', qps: 5 })

/**
 * Every constructor and door that checks its options (and the options objects inside them):
 * a valid set of options, and what a call with options `o` throws (the door's error).
 */
const SITES: [string, Record<string, unknown>, (o: Record<string, unknown>) => unknown, string?][] = [
  [
    'BucketLimiter',
    { name: 'a', limit: 5, interval: 'second', waitTimeoutMs: 10, policy: 'skip', ttlMs: 60_000 },
    (o) => new BucketLimiter(store, o as never),
  ],
  ['WindowLimiter', { name: 'a', limit: 5, interval: 1000 }, (o) => new WindowLimiter(store, o as never)],
  ['LeakyLimiter', { name: 'a', limit: 5, interval: 1000 }, (o) => new LeakyLimiter(store, o as never)],
  ['PointsLimiter', { name: 'a', points: 5, interval: 1000 }, (o) => new PointsLimiter(store, o as never)],
  [
    'ConcurrentLimiter',
    { name: 'a', limit: 5, lockTimeoutMs: 1000, maxWaiters: 3 },
    (o) => new ConcurrentLimiter(store, o as never),
  ],
  [
    'SlidingWindowLimiter',
    { name: 'a', windows: [{ limit: 5, intervalMs: 1000 }] },
    (o) => new SlidingWindowLimiter(store, o as never),
  ],
  [
    'SlidingWindowLimiter windows[0]',
    { limit: 5, intervalMs: 1000 },
    (o) => new SlidingWindowLimiter(store, { name: 'a', windows: [o as never] }),
  ],
  [
    'SlidingCounterLimiter',
    { name: 'a', windows: [{ limit: 5, intervalMs: 1000 }], waitTimeoutMs: 10 },
    (o) => new SlidingCounterLimiter(store, o as never),
  ],
  [
    'FairTenant',
    { name: 'a', rules: [{ queue: 'q', threshold: 1, perMs: 1000 }], maxWindowMs: 60_000, mode: 'exact' },
    (o) => new FairTenant(store, o as never),
  ],
  [
    'FairTenant rules[0]',
    { queue: 'q', threshold: 1, perMs: 1000 },
    (o) => new FairTenant(store, { name: 'a', rules: [o as never] }),
  ],
  [
    'DistributedPacer',
    { key: 'k', qps: 5, maxBurst: 2, burstAllowanceFactor: 1 },
    (o) => new DistributedPacer(store, o as never),
  ],
  [
    'Budget',
    { name: 'a', dimensions: { calls: { limit: 10, intervalMs: 1000 } } },
    (o) => new Budget(store, o as never),
  ],
  [
    'Budget dimension',
    { limit: 10, intervalMs: 1000, maxBurst: 2, maxDebt: 1 },
    (o) => new Budget(store, { name: 'a', dimensions: { calls: o as never } }),
  ],
  ['Budget tenant', { share: 0.5, maxShare: 0.8, borrowAheadMs: 10 }, (o) => budget.tenant('t', o as never)],
  [
    'QuotaLimiter Quota',
    { windowSeconds: 60, granularitySeconds: 10, limit: 5, prefixOverride: 'x' },
    (o) => new QuotaLimiter(store).checkWithinQuotas([{ prefix: 'p', quotas: [o as never], requested: 1 }]),
  ],
  ['block', { retryAfter: 5 }, (o) => bucket.block(o as never), 'ERR_INVALID_ARGUMENT'],
  ['ensure', { weight: 1 }, (o) => sliding.ensure(async () => 1, o as never), 'ERR_INVALID_ARGUMENT'],
  ['withinLimit', { weight: 1 }, (o) => bucket.withinLimit(async () => 1, o as never), 'ERR_INVALID_ARGUMENT'],
  [
    'PointsLimiter withinLimit',
    { estimate: 1 },
    (o) => new PointsLimiter(store, { name: 'pt', points: 5, interval: 1000 }).withinLimit(async () => 1, o as never),
    'ERR_INVALID_ARGUMENT',
  ],
  [
    'Budget reserve',
    { maxWaitMs: 1, ttlMs: 1000 },
    (o) => budget.reserve({ calls: 1 }, o as never),
    'ERR_INVALID_ARGUMENT',
  ],
  [
    'ConcurrentLimiter acquire',
    { signal: new AbortController().signal },
    (o) => new ConcurrentLimiter(store, { name: 'c', limit: 1 }).acquire(o as never),
    'ERR_INVALID_ARGUMENT',
  ],
  ['MemoryStore', { keyPrefix: 'p', clock: new ManualClock(0), stats: true }, (o) => new MemoryStore(o as never)],
  [
    'RedisStore.connect',
    { keyPrefix: 'p', whenDown: 'allow', commandTimeoutMs: 100, connectTimeoutMs: 100, probeIntervalMs: 100 },
    (o) => RedisStore.connect(o as never),
  ],
  ['RedisStore.connect localDenyCache', { maxKeys: 10 }, (o) => RedisStore.connect({ localDenyCache: o as never })],
  ['RedisStore.connect tls', { rejectUnauthorized: true }, (o) => RedisStore.connect({ tls: o as never })],
  [
    'RedisStore.connect sentinel',
    { name: 'm', sentinels: ['redis://127.0.0.1:26379'], sentinelPassword: 'x' },
    (o) => RedisStore.connect({ sentinel: o as never }),
  ],
  [
    'pacedFetch',
    { store, qps: 5, maxBurst: 1, maxWaitMs: 100, learn: true, maxBlockMs: 100, fetch: async () => new Response() },
    (o) => pacedFetch(o as never),
  ],
  ['pacedFetch retry', { statuses: [429], methods: ['GET'], maxRetries: 2 }, (o) => pacedFetch({ store, retry: o })],
  [
    'pacedFetch adaptive',
    { minQps: 1, maxQps: 10, startQps: 5, decrease: 0.1, increase: 0.1 },
    (o) => pacedFetch({ store, adaptive: o }),
  ],
  ['interceptor', { store, qps: 5, maxWaitMs: 100 }, (o) => interceptor(o as never)],
  [
    'limitProcessor',
    { limiter: bucket, reschedule: 3, maxWaitMs: 10, prefetch: true },
    (o) => limitProcessor(processor, o as never),
  ],
  ['FairQueues', { queues: { q: queue }, defaultQueue: 'q' }, (o) => new FairQueues(fair, o as never)],
  [
    'weightedWorkers',
    { queues: [], concurrency: 2, processor, connection: {}, prefix: 'x', idlePollMs: 10 },
    (o) => weightedWorkers(o as never),
  ],
  [
    'dashboard',
    { store, allowReset: true, title: 't', basePath: '/x', refreshMs: 1000, allowedHosts: ['a'] },
    (o) => dashboard(o as never),
  ],
  ['collectMetrics', { prefix: 'x_', limiterLabel: () => 'l', buckets: [1] }, (o) => collectMetrics(store, o as never)],
]

describe('unknown options name the closest known one', () => {
  it('issue-38-errors-suggest: the helper finds windowMs, interval, maxBurst and nothing far', () => {
    expect(closestName('windowMS', ['limit', 'windowMs'])).toBe('windowMs')
    expect(closestName('intervall', ['name', 'interval'])).toBe('interval')
    expect(closestName('max_burst', ['qps', 'maxBurst'])).toBe('maxBurst')
    expect(closestName('timeWindowMs', ['limit', 'windowMs'])).toBe(null)
    expect(closestName('host', ['url', 'cluster', 'poolSize'])).toBe(null)
    expect(closestName('ab', ['ms'])).toBe(null)
  })

  it('issue-38-errors-sweep: every option of every constructor and door, misspelled, is named back', async () => {
    let checked = 0
    for (const [site, valid, run, code] of SITES) {
      for (const [name, typo, options] of mistyped(valid)) {
        const message = await messageOf(() => run(options), code)
        expect(message, `${site}: ${typo}`).toContain(`unknown`)
        expect(message, `${site}: ${typo}`).toContain(JSON.stringify(typo))
        expect(message, `${site}: ${typo}`).toContain(`(did you mean ${JSON.stringify(name)}?)`)
        checked++
      }
    }
    expect(checked).toBeGreaterThan(250)
  })

  it('issue-38-errors-sweep-known: a name close to none lists the known ones (short lists)', async () => {
    expect(await messageOf(() => new BucketLimiter(store, { name: 'a', limit: 1, interval: 1, zzz: 1 } as never))).toBe(
      'unknown limiter option "zzz" (known: name, waitTimeoutMs, policy, ttlMs, limit, interval, mode, lease)',
    )
    expect(await messageOf(() => budget.reserve({ cals: 1 } as never), 'ERR_INVALID_ARGUMENT')).toContain(
      'unknown dimension "cals" in amounts (did you mean "calls"?)',
    )
  })

  it('issue-38-errors-express: the Express door logs (never throws) the suggestion, in the peer words', () => {
    const logged: { code: string; message: string }[] = []
    const logger = { warn: () => {}, error: (e: { code: string; message: string }) => logged.push(e) }
    const door = rateLimit({ store, limit: 5, windowMS: 1000, logger } as never)
    expect(typeof door).toBe('function')
    expect(logged).toHaveLength(1)
    expect(logged[0].code).toBe('ERR_ERL_UNKNOWN_OPTION')
    expect(logged[0].message).toMatch(/^Unexpected configuration option: "windowMS" \(did you mean "windowMs"\?\) See /)
    // every option the door takes (its own and the peer's aliases), misspelled
    for (const [name, typo, options] of mistyped({ limit: 5, windowMs: 1000, max: 5, standardHeaders: true })) {
      logged.length = 0
      rateLimit({ store, ...options, logger } as never)
      expect(logged.map((e) => e.message).join('\n'), typo).toContain(`(did you mean ${JSON.stringify(name)}?)`)
    }
  })

  it('issue-38-errors-cli: the CLI names the closest flag and command', () => {
    const cli = (...args: string[]) =>
      spawnSync(process.execPath, [join(__dirname, '..', 'bin', 'sluice.js'), ...args], { encoding: 'utf8' })
    for (const [args, line] of [
      [['--redsi', 'redis://127.0.0.1:1', 'list'], 'sluice: unknown option "--redsi" (did you mean "--redis"?)'],
      [
        ['--allowed-hosts', 'x', 'dashboard'],
        'sluice: unknown option "--allowed-hosts" (did you mean "--allowed-host"?)',
      ],
      [['lsit'], 'sluice: unknown command "lsit" (did you mean "list"?)'],
      [['--zzz', 'list'], 'sluice: unknown option "--zzz"'],
    ] as [string[], string][]) {
      const r = cli(...args)
      expect(r.status, args.join(' ')).toBe(2)
      expect(r.stderr.split('\n')[0]).toBe(line)
    }
  })

  it('issue-38-errors-fastify: the Fastify door warns (and ignores) with the suggestion', async () => {
    const seen: string[] = []
    const onWarning = (w: Error & { code?: string }) => {
      if (w.code === 'SLUICE_UNKNOWN_OPTION') seen.push(w.message)
    }
    process.on('warning', onWarning)
    const app = Fastify()
    try {
      await app.register(sluiceRateLimit, { store, max: 5, timeWindow: 1000, errorResponseBulder: () => ({}) } as never)
      await app.ready()
      await new Promise((resolve) => setImmediate(resolve))
    } finally {
      process.off('warning', onWarning)
      await app.close()
    }
    expect(seen).toEqual([
      'sluice/fastify ignores the unknown rate limit option "errorResponseBulder" (did you mean "errorResponseBuilder"?)',
    ])
  })
})

describe('values are shown with their type', () => {
  it('issue-38-errors-types: the helper says the type', () => {
    expect(describeValue('10')).toBe('the string "10"')
    expect(describeValue(10)).toBe('the number 10')
    expect(describeValue(true)).toBe('the boolean true')
    expect(describeValue(null)).toBe('null')
    expect(describeValue(undefined)).toBe('undefined')
    expect(describeValue([1])).toBe('an array')
    expect(describeValue({})).toBe('an object')
    expect(describeValue(() => 1)).toBe('a function')
  })

  it('issue-38-errors-got-type: a string where a number goes is shown as a string, everywhere', async () => {
    const cases: [() => unknown, string, string?][] = [
      [() => new DistributedPacer(store, { key: 'k', qps: '1' } as never), 'qps'],
      [() => bucket.check('1' as never), 'weight', 'ERR_INVALID_ARGUMENT'],
      [() => pacer.pace('1' as never), 'weight', 'ERR_INVALID_ARGUMENT'],
      [() => sliding.check('1' as never), 'weight', 'ERR_INVALID_ARGUMENT'],
      [() => new BucketLimiter(store, { name: 'a', limit: '1', interval: 1 } as never), 'limit'],
      [() => new BucketLimiter(store, { name: 'a', limit: 1, interval: 1, waitTimeoutMs: '1' } as never), 'wait'],
      [() => new ConcurrentLimiter(store, { name: 'a', limit: 1, maxWaiters: '1' } as never), 'maxWaiters'],
      [
        () => new SlidingWindowLimiter(store, { name: 'a', windows: [{ limit: '1', intervalMs: 1 }] } as never),
        'limit',
      ],
      [() => budget.reserve({ calls: '1' } as never), 'amounts', 'ERR_INVALID_ARGUMENT'],
      [() => bucket.block('1' as never), 'ms', 'ERR_INVALID_ARGUMENT'],
      [() => bucket.block({ retryAfter: '1s' } as never), 'retryAfter', 'ERR_INVALID_ARGUMENT'],
      [() => new ManualClock('1' as never), 'startMs', 'ERR_INVALID_ARGUMENT'],
      [() => rateLimit({ store, limit: '1' } as never), 'limit'],
      [() => rateLimit({ store, windowMs: '1' } as never), 'windowMs'],
      [() => rateLimit({ store, cacheBytes: '1' } as never), 'cacheBytes'],
      [() => pacedFetch({ store, qps: '1' } as never), 'qps'],
      [() => pacedFetch({ store, maxWaitMs: '1' } as never), 'maxWaitMs'],
      [() => pacedFetch({ store, retry: { maxRetries: '1' } } as never), 'maxRetries'],
      [() => pacedFetch({ store, retry: { statuses: ['1'] } } as never), 'statuses'],
      [() => new QuotaLimiter(store).checkWithinQuotas([], '1' as never), 'timestamp', 'ERR_INVALID_ARGUMENT'],
      [() => RedisStore.connect({ probeIntervalMs: '1' } as never), 'probeIntervalMs'],
      [() => RedisStore.connect({ commandTimeoutMs: '1' } as never), 'commandTimeoutMs'],
      [() => RedisStore.connect({ whenDown: '1' } as never), 'whenDown'],
      [() => new MemoryStore({ stats: '1' } as never), 'stats'],
    ]
    for (const [fn, what, code] of cases) {
      const message = await messageOf(fn, code)
      expect(message, what).toContain(what)
      expect(message, what).toMatch(/got the string "1s?"/)
    }
  })

  it('issue-38-errors-enum-values: a value out of a list is shown with its type, and the closest named', async () => {
    const cases: [() => unknown, string][] = [
      [
        () => new BucketLimiter(store, { name: 'a', limit: 1, interval: 'minutes' } as never),
        'got the string "minutes" (did you mean "minute"?)',
      ],
      [
        () => new BucketLimiter(store, { name: 'a', limit: 1, interval: 'Second' } as never),
        'got the string "Second" (did you mean "second"?)',
      ],
      [() => new BucketLimiter(store, { name: 'a', limit: 1, interval: 0 } as never), 'got the number 0'],
      [
        () => new BucketLimiter(store, { name: 'a', limit: 1, interval: 1, policy: 'raize' } as never),
        'got the string "raize" (did you mean "raise"?)',
      ],
      [
        () =>
          new FairTenant(store, { name: 'a', rules: [{ queue: 'q', threshold: 1, perMs: 1 }], mode: 'exakt' } as never),
        'got the string "exakt" (did you mean "exact"?)',
      ],
      [() => RedisStore.connect({ whenDown: 'alow' } as never), 'got the string "alow" (did you mean "allow"?)'],
      [
        () => RedisStore.connect({ evictingServer: 'refuze' } as never),
        'got the string "refuze" (did you mean "refuse"?)',
      ],
      [() => RedisStore.connect({ tls: { rejectUnauthorized: 'no' } } as never), 'got the string "no"'],
      [() => pacedFetch({ store, learn: 1 } as never), 'got the number 1'],
      [() => limitProcessor(processor, { limiter: bucket, prefetch: 'yes' } as never), 'got the string "yes"'],
      [() => limitProcessor('p' as never, { limiter: bucket } as never), 'got the string "p"'],
    ]
    for (const [fn, expected] of cases) expect(await messageOf(fn)).toContain(expected)
  })
})

/** A loopback port nothing listens on (found free, then closed). */
async function freePort(): Promise<number> {
  const server = createServer()
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as { port: number }
  await new Promise((resolve) => server.close(resolve))
  return port
}

describe('store errors name the server, never its credentials', () => {
  it('issue-38-errors-connect-refused: a refused connection names host:port, not the user or password', async () => {
    const port = await freePort()
    const url = `redis://alice:s3cr3t-pw@127.0.0.1:${port}`
    const message = await messageOf(() => RedisStore.connect({ url, connectTimeoutMs: 1000 }), 'ERR_STORE_UNAVAILABLE')
    expect(message).toContain(`(Redis at 127.0.0.1:${port})`)
    expect(message).not.toMatch(/alice|s3cr3t/)
    const cluster = await messageOf(
      () => RedisStore.connect({ cluster: [`redis://:pw9@127.0.0.1:${port}`], connectTimeoutMs: 1000 }),
      'ERR_STORE_UNAVAILABLE',
    )
    expect(cluster).toContain(`(Redis at cluster 127.0.0.1:${port})`)
    expect(cluster).not.toContain('pw9')
    // the whole userinfo goes, up to its last '@', whatever a password holds unescaped
    for (const [url, server] of [
      ['redis://u:12/ss@cache:7000', 'cache:7000'],
      ['redis://default:S3cr@tP4ss@cache', 'cache:6379'],
      ['rediss://u:p?x#y@[::1]:7001/2', '[::1]:7001'],
    ]) {
      expect(serverOf(url), url).toBe(server)
    }
  })

  it('issue-38-errors-store-down: a store started down, and its calls, name the server', async () => {
    const port = await freePort()
    const down = await RedisStore.connect({
      url: `redis://bob:hunter2@127.0.0.1:${port}`,
      whenDown: 'error',
      connectTimeoutMs: 300,
      probeIntervalMs: 60_000,
    }).catch((e: Error) => e)
    // under 'error' the connect itself fails, naming the server
    expect(down).toBeInstanceOf(SluiceError)
    expect((down as Error).message).toContain(`127.0.0.1:${port}`)
    const store2 = await RedisStore.connect({
      url: `redis://bob:hunter2@127.0.0.1:${port}`,
      whenDown: 'deny',
      connectTimeoutMs: 300,
      probeIntervalMs: 60_000,
    })
    try {
      const downError = await new Promise<Error>((resolve) => store2.once('down', resolve))
      expect(downError.message).toContain(`(Redis at 127.0.0.1:${port})`)
      expect(downError.message).not.toMatch(/bob|hunter2/)
      const limiter = new BucketLimiter(store2, { name: 'x', limit: 1, interval: 1000 })
      const stats = await messageOf(() => store2.limiters(), 'ERR_STORE_UNAVAILABLE')
      expect(stats).toContain(`127.0.0.1:${port}`)
      expect(stats).not.toMatch(/bob|hunter2/)
      expect((await limiter.check()).allowed).toBe(false)
    } finally {
      await store2.close()
    }
  })

  it('issue-38-errors-command-failure: a call that Redis does not answer names the server', async () => {
    const u = new URL(redisUrl())
    const proxy = new HostileProxy({ host: u.hostname, port: Number(u.port) })
    const port = await proxy.listen()
    const live = await RedisStore.connect({ url: `redis://127.0.0.1:${port}`, commandTimeoutMs: 200 })
    try {
      const limiter = new BucketLimiter(live, { name: `cmd-${port}`, limit: 5, interval: 1000 })
      expect((await limiter.check()).allowed).toBe(true)
      // the next script reply never comes: the call times out (ERR_TIMEOUT, a store failure)
      proxy.arm({ command: 'EVALSHA', payload: Buffer.alloc(0), then: 'stall' })
      const error = await limiter.check().then(
        () => null,
        (e: SluiceError) => e,
      )
      expect(error).toBeInstanceOf(SluiceError)
      expect(['ERR_TIMEOUT', 'ERR_STORE_UNAVAILABLE']).toContain(error!.code)
      expect(error!.message).toContain(`(Redis at 127.0.0.1:${port})`)
      // while the circuit is open, calls get the store's error, which names it too
      const later = await messageOf(() => limiter.check(), 'ERR_STORE_UNAVAILABLE')
      expect(later).toContain(`127.0.0.1:${port}`)
    } finally {
      await live.close()
      await proxy.close()
    }
  })
})

describe("ioredis' { host, port } gets a hint", () => {
  it('issue-38-errors-host-port: the URL to give instead, from what was given, with no secret', async () => {
    const message = await messageOf(() => RedisStore.connect({ host: 'cache.internal', port: 6380 } as never))
    expect(message).toBe(
      "RedisStore.connect takes { url: 'redis://host:port' } (or the URL as a string), not { host, port }: " +
        "RedisStore.connect({ url: 'redis://cache.internal:6380' })",
    )
    const secret = await messageOf(() =>
      RedisStore.connect({ host: '::1', port: 7000, username: 'alice', password: 'pa55', db: 2 } as never),
    )
    expect(secret).toContain("{ url: 'redis://<user>:<password>@[::1]:7000/2' }")
    expect(secret).not.toMatch(/alice|pa55/)
    const both = await messageOf(() => RedisStore.connect({ url: 'redis://127.0.0.1:6379', port: 6380 } as never))
    expect(both).toContain('the url names the server')
  })
})
