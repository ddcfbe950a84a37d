#!/usr/bin/env node
'use strict'
// A smoke test of one built addon, run by `npm run pack` on each target (natively, under
// qemu-user, under a musl Node) and by the install test: every limiter kind on the memory
// store, each decision counted against what it must be, then a round trip to Redis when
// SLUICE_REDIS_URL is set. Prints one JSON line; exits 1 on the first wrong answer.
//
// Usage: node scripts/smoke.js [path/to/sluice]  (a folder with lib/; default: this checkout)
const path = require('node:path')

const root = path.resolve(process.argv[2] || path.join(__dirname, '..'))
// the package entry: lib/entries/ (lib/index.js in a tree from before lib/ had layers)
const entry = path.join(root, 'lib', 'entries', 'index.js')
const sluice = require(require('node:fs').existsSync(entry) ? entry : path.join(root, 'lib', 'index.js'))
const {
  MemoryStore,
  RedisStore,
  ManualClock,
  DistributedPacer,
  PacerComposite,
  BucketLimiter,
  WindowLimiter,
  LeakyLimiter,
  PointsLimiter,
  ConcurrentLimiter,
  SlidingWindowLimiter,
  QuotaLimiter,
  FairTenant,
} = sluice

const checks = []
function expectEqual(what, actual, expected) {
  const ok = JSON.stringify(actual) === JSON.stringify(expected)
  checks.push(what)
  if (!ok) throw new Error(`${what}: got ${JSON.stringify(actual)}, expected ${JSON.stringify(expected)}`)
}

async function admitted(limiter, n) {
  let count = 0
  for (let i = 0; i < n; i++) if ((await limiter.check()).allowed) count++
  return count
}

/** Every kind on one store; `tag` keeps names apart between stores and runs. */
async function everyKind(store, tag) {
  const name = (kind) => `smoke-${tag}-${kind}`
  expectEqual(
    `${tag} bucket`,
    await admitted(new BucketLimiter(store, { name: name('b'), limit: 5, interval: 'hour' }), 8),
    5,
  )
  expectEqual(
    `${tag} window`,
    await admitted(new WindowLimiter(store, { name: name('w'), limit: 4, interval: 'hour' }), 8),
    4,
  )
  expectEqual(
    `${tag} leaky`,
    await admitted(new LeakyLimiter(store, { name: name('l'), limit: 3, interval: 'hour' }), 8),
    3,
  )
  expectEqual(
    `${tag} points`,
    await admitted(new PointsLimiter(store, { name: name('p'), points: 6, interval: 'hour' }), 9),
    6,
  )

  const sliding = new SlidingWindowLimiter(store, {
    name: name('s'),
    windows: [
      { limit: 2, intervalMs: 60_000 },
      { limit: 10, intervalMs: 3_600_000 },
    ],
  })
  expectEqual(`${tag} sliding`, await admitted(sliding, 5), 2)

  const semaphore = new ConcurrentLimiter(store, { name: name('c'), limit: 2, waitTimeoutMs: 0 })
  const a = await semaphore.acquire()
  const b = await semaphore.acquire()
  let refused = false
  try {
    await semaphore.acquire()
  } catch (err) {
    refused = err.code === 'ERR_OVER_LIMIT'
  }
  expectEqual(`${tag} concurrent refuses the third`, refused, true)
  await a.release()
  const c = await semaphore.acquire()
  await Promise.all([b.release(), c.release()])

  const quotas = new QuotaLimiter(store)
  const quota = { windowSeconds: 60, granularitySeconds: 10, limit: 5 }
  const grants = await quotas.checkAndUseQuotas([{ prefix: name('q'), requested: 4, quotas: [quota] }])
  const again = await quotas.checkAndUseQuotas([{ prefix: name('q'), requested: 4, quotas: [quota] }])
  expectEqual(`${tag} quota`, [grants[0].granted, again[0].granted], [4, 1])

  const pacer = new DistributedPacer(store, { key: name('pacer'), qps: 10, maxBurst: 3 })
  const pacer2 = new DistributedPacer(store, { key: name('pacer2'), qps: 100, maxBurst: 100 })
  const limited = []
  for (let i = 0; i < 5; i++) limited.push((await pacer.rateLimit()).delayMs === 0)
  // maxBurst 3 on a stopped clock: a call is admitted while the level before it is under maxBurst
  expectEqual(`${tag} pacer rateLimit`, limited, [true, true, true, true, false])
  const composite = new PacerComposite([
    pacer2,
    new DistributedPacer(store, { key: name('pacer3'), qps: 1, maxBurst: 1 }),
  ])
  const composed = []
  for (let i = 0; i < 3; i++) composed.push((await composite.rateLimit()).delayMs === 0)
  expectEqual(`${tag} composite`, composed, [true, true, false])
  const { delayMs } = await new DistributedPacer(store, { key: name('pacer4'), qps: 1, maxBurst: 1 }).pace()
  expectEqual(`${tag} pace`, delayMs, 0)

  const fair = new FairTenant(store, { name: name('f'), rules: [{ queue: 'slow', threshold: 2, perMs: 60_000 }] })
  const queues = []
  for (let i = 0; i < 4; i++) queues.push(await fair.assign('t1', `job-${i}`, 'default'))
  expectEqual(`${tag} fair`, queues, ['default', 'default', 'slow', 'slow'])
}

async function main() {
  const started = process.hrtime.bigint()
  const memory = new MemoryStore({ clock: new ManualClock(1_700_000_000_000) })
  await everyKind(memory, `m${process.pid}`)
  await memory.close()
  let redis = 'skipped (no SLUICE_REDIS_URL)'
  const url = process.env.SLUICE_REDIS_URL
  if (url) {
    const store = await RedisStore.connect({ url, keyPrefix: `smoke${process.pid}` })
    await everyKind(store, `r${process.pid}`)
    await store.close()
    redis = url.replace(/\/\/[^@]*@/, '//***@')
  }
  console.log(
    JSON.stringify({
      ok: true,
      node: process.version,
      arch: process.arch,
      glibc: process.report.getReport().header.glibcVersionRuntime || null,
      checks: checks.length,
      redis,
      ms: Number(process.hrtime.bigint() - started) / 1e6,
    }),
  )
}

main().catch((err) => {
  console.error(`smoke test failed: ${err && err.stack}`)
  process.exit(1)
})
