'use strict'
// The soak run of RELIABILITY.md (a script, not a test): every limiter kind under mixed load
// against a Redis of its own, restarted (its data lost) every SOAK_RESTART_S seconds, for
// SOAK_MINUTES minutes. Reports RSS and Redis used_memory at start and end, decisions and
// failures by code, calls left unsettled (must be 0) and over-admission outside the restart
// windows (must be 0) for the kinds whose limit can be checked by counting here: fixed buckets
// (per epoch-aligned interval), a sliding window (every window of its length), a semaphore
// (leases held at once).
//   SOAK_MINUTES=30 SOAK_RESTART_S=300 node scripts/soak.js
const { spawn } = require('node:child_process')
const fs = require('node:fs')
const net = require('node:net')
const os = require('node:os')
const path = require('node:path')
const sluice = require('../lib/entries/index.js')

const MINUTES = Number(process.env.SOAK_MINUTES || 30)
const RESTART_S = Number(process.env.SOAK_RESTART_S || 300)
const INTERVAL_MS = 10_000
const LIMIT = 200

const freePort = () =>
  new Promise((resolve) => {
    const s = net.createServer().listen(0, '127.0.0.1', () => {
      const { port } = s.address()
      s.close(() => resolve(port))
    })
  })

function startRedis(port, dir) {
  const child = spawn(
    'redis-server',
    ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir],
    {
      stdio: ['ignore', 'pipe', 'ignore'],
    },
  )
  return new Promise((resolve, reject) => {
    let out = ''
    child.stdout.on('data', (c) => {
      out += c
      if (out.includes('Ready to accept connections')) resolve(child)
    })
    child.once('exit', (code) => reject(new Error(`redis-server exited with ${code}`)))
  })
}

/** Redis' used_memory, through a raw connection (INFO memory). */
function usedMemory(url) {
  const { port } = new URL(url)
  return new Promise((resolve) => {
    const sock = net.connect(Number(port), '127.0.0.1', () => sock.write('INFO memory\r\n'))
    let buf = ''
    sock.on('data', (c) => {
      buf += c
      const m = /used_memory:(\d+)/.exec(buf)
      if (m) {
        sock.destroy()
        resolve(Number(m[1]))
      }
    })
  })
}

async function main() {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sluice-soak-'))
  const port = await freePort()
  const url = `redis://127.0.0.1:${port}`
  let redis = await startRedis(port, dir)
  const store = await sluice.RedisStore.connect({ url, commandTimeoutMs: 1000, connectTimeoutMs: 2000 })
  const started = Date.now()
  const endAt = started + MINUTES * 60_000
  const restarts = [] // [from, to] ms: decisions in these windows may over-admit (the data is gone)
  const codes = {}
  let decisions = 0
  let pending = 0
  let slowest = 0
  const bucketAdmits = new Map() // `${name}|${interval}` -> admitted
  const slidingAdmits = [] // times of admitted sliding checks
  let held = 0
  let maxHeld = 0

  const call = async (fn) => {
    pending++
    const t0 = performance.now()
    try {
      return await fn()
    } catch (err) {
      codes[err.code || 'uncoded'] = (codes[err.code || 'uncoded'] || 0) + 1
      await new Promise((r) => setTimeout(r, 5)) // a failing caller backs off a little
      return null
    } finally {
      pending--
      decisions++
      slowest = Math.max(slowest, performance.now() - t0)
    }
  }

  const quotas = [{ windowSeconds: 10, granularitySeconds: 1, limit: LIMIT }]
  const pacers = [0, 1].map((i) => new sluice.DistributedPacer(store, { key: `soak-p${i}`, qps: 500, maxBurst: 50 }))
  const composite = new sluice.PacerComposite(pacers)
  const mutex = new sluice.ConcurrentLimiter(store, {
    name: 'soak-c',
    limit: 5,
    lockTimeoutMs: 5000,
    waitTimeoutMs: 200,
  })
  const sliding = new sluice.SlidingWindowLimiter(store, {
    name: 'soak-s',
    windows: [{ limit: LIMIT, intervalMs: INTERVAL_MS }],
  })
  const fair = new sluice.FairTenant(store, {
    name: 'soak-f',
    rules: [{ queue: 'slow', threshold: 100, perMs: 60_000 }],
  })
  let job = 0

  const semaphore = async () => {
    const lease = await call(() => mutex.tryAcquire())
    if (lease) {
      held++
      maxHeld = Math.max(maxHeld, held)
      await new Promise((r) => setTimeout(r, 5))
      held--
      await call(() => lease.release())
    }
  }
  const loops = [
    ...Array.from({ length: 8 }, () => semaphore),
    async () => {
      const name = `soak-b${Math.floor(Math.random() * 5)}`
      const d = await call(() => new sluice.BucketLimiter(store, { name, limit: LIMIT, interval: INTERVAL_MS }).check())
      if (d && d.allowed) {
        const k = `${name}|${Math.floor(Date.now() / INTERVAL_MS)}`
        bucketAdmits.set(k, (bucketAdmits.get(k) || 0) + 1)
      }
    },
    async () => {
      const at = Date.now() // the call's time: Redis decides within a few ms of it
      const d = await call(() => sliding.check())
      if (d && d.allowed) slidingAdmits.push(at)
    },
    () => call(() => new sluice.WindowLimiter(store, { name: 'soak-w', limit: LIMIT, interval: INTERVAL_MS }).check()),
    () => call(() => new sluice.LeakyLimiter(store, { name: 'soak-l', limit: LIMIT, interval: INTERVAL_MS }).check()),
    () =>
      call(() => new sluice.PointsLimiter(store, { name: 'soak-pt', points: LIMIT, interval: INTERVAL_MS }).check(2)),
    () => call(() => pacers[0].rateLimit()),
    () => call(() => composite.rateLimit()),
    () => call(() => new sluice.QuotaLimiter(store).checkAndUseQuotas([{ prefix: 'soak-q', requested: 1, quotas }])),
    () => call(() => fair.assign(`t${job % 7}`, `job${job++}`, 'fast')),
  ]

  const sample = async () => ({ rssMb: process.memoryUsage().rss / 1e6, usedMemory: await usedMemory(url) })
  const atStart = await sample()
  let nextRestart = started + RESTART_S * 1000
  const run = async (loop) => {
    while (Date.now() < endAt) {
      await loop()
      await new Promise((r) => setImmediate(r))
    }
  }
  const restarter = (async () => {
    while (Date.now() < endAt) {
      await new Promise((r) => setTimeout(r, 250))
      if (Date.now() >= nextRestart && Date.now() < endAt - 10_000) {
        const from = Date.now()
        redis.kill('SIGTERM')
        await new Promise((r) => redis.once('exit', r))
        redis = await startRedis(port, dir)
        restarts.push([from, Date.now()])
        process.stderr.write(`restarted Redis at ${Math.round((from - started) / 1000)} s\n`)
        nextRestart += RESTART_S * 1000
      }
    }
  })()
  const progress = setInterval(() => {
    process.stderr.write(
      `${Math.round((Date.now() - started) / 1000)} s: ${decisions} decisions, ${pending} pending, codes ${JSON.stringify(codes)}\n`,
    )
  }, 60_000)
  await Promise.all([...loops.map(run), restarter])
  clearInterval(progress)
  // the last calls settle; none may be left
  for (let i = 0; i < 50 && pending > 0; i++) await new Promise((r) => setTimeout(r, 100))
  const unsettled = pending
  const atEnd = await sample()

  // over-admission outside the restart windows (an interval touching one is left out)
  const touches = (from, to) => restarts.some(([a, b]) => from <= b + 1000 && to >= a - 1000)
  let bucketOver = 0
  let bucketChecked = 0
  for (const [k, n] of bucketAdmits) {
    const interval = Number(k.split('|')[1])
    if (touches(interval * INTERVAL_MS, (interval + 1) * INTERVAL_MS)) continue
    bucketChecked++
    bucketOver += Math.max(0, n - LIMIT)
  }
  let slidingOver = 0
  for (let i = 0, j = 0; i < slidingAdmits.length; i++) {
    // a window 50 ms shorter than the limiter's: call times are not Redis' decision times
    while (slidingAdmits[i] - slidingAdmits[j] >= INTERVAL_MS - 50) j++
    const inWindow = i - j + 1
    if (inWindow > LIMIT && !touches(slidingAdmits[i] - INTERVAL_MS, slidingAdmits[i]))
      slidingOver = Math.max(slidingOver, inWindow - LIMIT)
  }
  await store.close()
  redis.kill('SIGTERM')
  fs.rmSync(dir, { recursive: true, force: true })
  const report = {
    minutes: MINUTES,
    restarts: restarts.length,
    decisions,
    codes,
    slowestMs: Math.round(slowest),
    unsettled,
    rssMb: [atStart.rssMb.toFixed(1), atEnd.rssMb.toFixed(1)],
    redisUsedMemoryMb: [(atStart.usedMemory / 1e6).toFixed(2), (atEnd.usedMemory / 1e6).toFixed(2)],
    overAdmission: {
      bucket: bucketOver,
      bucketIntervalsChecked: bucketChecked,
      sliding: slidingOver,
      semaphoreMaxHeld: maxHeld,
      semaphoreLimit: 5,
    },
  }
  console.log(JSON.stringify(report, null, 2))
  process.exitCode = unsettled === 0 && bucketOver === 0 && slidingOver === 0 && maxHeld <= 5 ? 0 : 1
}

main().catch((err) => {
  console.error(err)
  process.exit(1)
})
