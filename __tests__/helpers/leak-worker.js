'use strict'
// Runs every limiter kind on a MemoryStore for several rounds (argv[2] = JSON { rounds, calls,
// keys, yieldBetween }) and reports the RSS after each round (after a full GC): a native leak
// shows as RSS that grows round after round while the JS heap stays flat. Without
// yieldBetween the whole run never leaves the microtask queue (a batch job's loop: the
// embedded store answers synchronously), so memory that only an event-loop turn frees piles
// up as well. Run with --expose-gc.
const sluice = require('../../lib/entries/index.js')

const cfg = JSON.parse(process.argv[2])
const store = new sluice.MemoryStore()
const pacers = [0, 1].map((i) => new sluice.DistributedPacer(store, { key: `p${i}`, qps: 1e6, maxBurst: 1e6 }))
const composite = new sluice.PacerComposite(pacers)
const quota = new sluice.QuotaLimiter(store)
const quotas = [{ windowSeconds: 10, granularitySeconds: 1, limit: 1e9 }]

/** One call of every kind on key `k`. */
async function callsOn(k) {
  await pacers[0].rateLimit()
  await composite.rateLimit()
  await new sluice.BucketLimiter(store, { name: `b${k}`, limit: 1e6, interval: 60_000 }).check()
  await new sluice.WindowLimiter(store, { name: `w${k}`, limit: 1e6, interval: 60_000 }).check()
  await new sluice.LeakyLimiter(store, { name: `l${k}`, limit: 1e6, interval: 60_000 }).check()
  await new sluice.PointsLimiter(store, { name: `pt${k}`, points: 1e6, interval: 60_000 }).check()
  await new sluice.SlidingWindowLimiter(store, {
    name: `s${k}`,
    windows: [{ limit: 1e6, intervalMs: 1_000 }], // a log of at most a second of calls
  }).check()
  await quota.checkAndUseQuotas([{ prefix: `q${k}`, requested: 1, quotas }])
  const lease = await new sluice.ConcurrentLimiter(store, { name: `c${k}`, limit: 10 }).tryAcquire()
  if (lease) await lease.release()
  await new sluice.FairTenant(store, {
    name: `f${k}`,
    rules: [{ queue: 'slow', threshold: 1e9, perMs: 60_000 }],
  }).assign('tenant', `job${k}`, 'fast')
}

async function main() {
  const rss = []
  const heap = []
  for (let round = 0; round < cfg.rounds; round++) {
    for (let i = 0; i < cfg.calls; i++) await callsOn(i % cfg.keys)
    if (cfg.yieldBetween) {
      // a turn of the event loop (deferred finalizers of native buffers run there)
      await new Promise((r) => setImmediate(r))
      await new Promise((r) => setTimeout(r, 20))
    }
    global.gc()
    rss.push(process.memoryUsage().rss / 1e6)
    heap.push(process.memoryUsage().heapUsed / 1e6)
  }
  await store.close()
  process.send({ rss, heap })
}

main().catch((err) => {
  console.error(err)
  process.exit(1)
})
