'use strict'
// A process that uses sluice through the hostile proxy (hostile.test.ts): it must live through
// whatever the proxy sends. argv[2] = JSON { url, phase: 'connect' | 'call', lane: 'direct' |
// 'pool' }. 'call': connects, says 'ready', waits for 'go' (the proxy is armed), makes one
// decision, then retries until one succeeds. 'connect': the proxy is armed before it starts;
// connect() itself meets the hostile reply, then is retried. Sends a report and exits 0.
const { RedisStore, BucketLimiter } = require('../../lib/entries/index.js')

const cfg = JSON.parse(process.argv[2])
const options = {
  url: cfg.url,
  keyPrefix: `hostile${process.pid}`,
  commandTimeoutMs: 500,
  connectTimeoutMs: 1000,
  directConnection: cfg.lane === 'direct',
  statsFlushMs: 600_000,
}
const outcome = async (promise) => {
  const t0 = performance.now()
  try {
    await promise
    return { ok: true, ms: performance.now() - t0 }
  } catch (err) {
    return { ok: false, code: err.code || null, message: String(err.message), ms: performance.now() - t0 }
  }
}

/** Tries `fn` every 100 ms until it succeeds (at most 15 s): ms until it did, or null. */
async function until(fn) {
  const t0 = performance.now()
  while (performance.now() - t0 < 15_000) {
    try {
      await fn()
      return performance.now() - t0
    } catch {
      await new Promise((r) => setTimeout(r, 100))
    }
  }
  return null
}

async function main() {
  const report = { pid: process.pid }
  let store
  if (cfg.phase === 'connect') {
    const first = await outcome(RedisStore.connect(options).then((s) => (store = s)))
    report.first = first
    if (!first.ok) report.recoveredMs = await until(async () => (store = await RedisStore.connect(options)))
  } else {
    store = await RedisStore.connect(options)
    process.send('ready')
    await new Promise((r) => process.once('message', r))
    const limiter = new BucketLimiter(store, { name: 'hostile', limit: 1000, interval: 60_000 })
    report.first = await outcome(limiter.check())
    report.recoveredMs = await until(async () => {
      const d = await limiter.check()
      if (!d.allowed) throw new Error('refused')
    })
  }
  if (store) {
    const limiter = new BucketLimiter(store, { name: 'after', limit: 10, interval: 60_000 })
    report.after = await outcome(limiter.check())
    await store.close()
  }
  report.rssMb = process.memoryUsage().rss / 1e6
  process.send(report)
}

main().catch((err) => {
  process.send({ crashed: String(err && err.stack) })
})
