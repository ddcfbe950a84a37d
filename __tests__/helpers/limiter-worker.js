'use strict'
// One process of the limiter multi-process tests. Config comes as JSON in argv[2]; results go
// back over IPC. It counts and records; the test judges.
const {
  RedisStore,
  ConcurrentLimiter,
  BucketLimiter,
  WindowLimiter,
  LeakyLimiter,
  SlidingWindowLimiter,
  QuotaLimiter,
} = require('../../lib/entries/index.js')

const sleep = (ms) => new Promise((r) => setTimeout(r, ms))
const LIMITERS = { bucket: BucketLimiter, window: WindowLimiter, leaky: LeakyLimiter }

async function main() {
  const cfg = JSON.parse(process.argv[2])
  const store = await RedisStore.connect(
    cfg.cluster ? { cluster: cfg.cluster, keyPrefix: cfg.prefix } : { url: cfg.url, keyPrefix: cfg.prefix },
  )
  if (cfg.mode === 'hold') {
    // holds a lease on request, releases on request (reporting when), or just sits on it
    const limiter = new ConcurrentLimiter(store, { name: cfg.name, limit: 1, lockTimeoutMs: cfg.lockTimeoutMs })
    let lease = null
    process.on('message', async (m) => {
      if (m === 'acquire') {
        lease = await limiter.acquire()
        process.send({ held: lease.token })
      } else if (m === 'release') {
        const at = Date.now()
        await lease.release()
        process.send({ releasedAt: at })
      } else if (m === 'exit') {
        await store.close()
        process.exit(0)
      }
    })
    process.send({ ready: true })
    return
  }
  await sleep(Math.max(0, cfg.startAt - Date.now()))
  const firstSend = Date.now()
  let lastReceive = firstSend
  const result = { admitted: 0, refused: 0, holds: [], errors: 0 }
  if (cfg.mode === 'concurrent') {
    const limiter = new ConcurrentLimiter(store, { name: cfg.name, limit: cfg.limit, waitTimeoutMs: 10_000 })
    const loop = async () => {
      while (Date.now() < cfg.startAt + cfg.durationMs) {
        await limiter.withinLimit(async (lease) => {
          const start = Date.now()
          await sleep(cfg.holdMs)
          result.holds.push([lease.token, start, Date.now()])
        })
      }
    }
    await Promise.all(Array.from({ length: cfg.inflight }, loop))
  } else if (cfg.mode === 'sliding') {
    // weights 1..3; the admitted weight is counted
    const limiter = new SlidingWindowLimiter(store, { name: cfg.name, windows: cfg.windows })
    let i = 0
    const loop = async () => {
      while (Date.now() < cfg.startAt + cfg.durationMs) {
        const weight = 1 + (i++ % 3)
        const d = await limiter.check(weight)
        if (d.allowed) result.admitted += weight
        else result.refused++
      }
    }
    await Promise.all(Array.from({ length: cfg.inflight }, loop))
  } else if (cfg.mode === 'quota') {
    // requests of 1..3 for one of cfg.orgs organisations under a per-org and a global quota,
    // all at one timestamp; the grants are summed per organisation
    const limiter = new QuotaLimiter(store)
    result.grants = {}
    let i = 0
    const loop = async () => {
      while (Date.now() < cfg.startAt + cfg.durationMs) {
        const org = `org${i % cfg.orgs}`
        const requested = 1 + (i++ % 3)
        const [g] = await limiter.checkAndUseQuotas(
          [{ prefix: org, requested, quotas: [cfg.org, cfg.global] }],
          cfg.timestamp,
        )
        result.grants[org] = (result.grants[org] || 0) + g.granted
        if (g.granted > 0) result.admitted += g.granted
        else result.refused++
      }
    }
    await Promise.all(Array.from({ length: cfg.inflight }, loop))
  } else {
    const limiter = new LIMITERS[cfg.mode](store, { name: cfg.name, limit: cfg.limit, interval: cfg.intervalMs })
    const loop = async () => {
      while (Date.now() < cfg.startAt + cfg.durationMs) {
        const d = await limiter.check()
        lastReceive = Date.now()
        if (d.allowed) result.admitted++
        else result.refused++
      }
    }
    await Promise.all(Array.from({ length: cfg.inflight }, loop))
  }
  await store.close()
  process.send({ ...result, firstSend, lastReceive })
}

main().catch((err) => {
  process.send({ error: `${err.code}: ${err.message}` })
  process.exitCode = 1
})
