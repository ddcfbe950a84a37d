'use strict'
// One benchmark run in a fresh process: argv[2] = JSON { impl, keys, inflight, count, url }.
// Sends back { decisions, seconds, p50Us, p99Us, nodeCpuUs } over IPC. Redis CPU is read by
// the parent around this process.
const fs = require('node:fs')
const path = require('node:path')

const cfg = JSON.parse(process.argv[2])
const QPS = 1e6
const BURST = 1000

async function makeDecide() {
  if (cfg.impl === 'sluice-memory-reused') {
    // long-lived pacers (one per key, created up front) instead of one per decision
    const { MemoryStore, DistributedPacer } = require('../lib/index.js')
    const store = new MemoryStore()
    const pacers = new Map()
    const pacer = (key) => {
      let p = pacers.get(key)
      if (!p) pacers.set(key, (p = new DistributedPacer(store, { key, qps: QPS, maxBurst: BURST })))
      return p
    }
    return { decide: (key) => pacer(key).pace(), close: () => store.close() }
  }
  if (cfg.impl === 'sluice' || cfg.impl === 'sluice-memory') {
    const { RedisStore, MemoryStore, DistributedPacer } = require('../lib/index.js')
    const store =
      cfg.impl === 'sluice' ? await RedisStore.connect({ url: cfg.url, keyPrefix: cfg.prefix }) : new MemoryStore()
    return {
      decide: (key) => new DistributedPacer(store, { key, qps: QPS, maxBurst: BURST }).pace(),
      close: () => store.close(),
    }
  }
  if (cfg.impl === 'noop') return { decide: async () => ({ delayMs: 0, reason: '' }), close: () => {} }
  const Redis = require('ioredis')
  const redis = new Redis(cfg.url)
  if (cfg.impl === 'reference') {
    redis.defineCommand('pacerPush', {
      numberOfKeys: 1,
      lua: fs.readFileSync(path.join(__dirname, 'peers', 'reference-pacer.lua'), 'utf8'),
    })
    return {
      decide: async (key) => {
        const now = Date.now() / 1000
        const [shot, before] = await redis.pacerPush(`${cfg.prefix}:${key}#1`, now, 1, QPS, BURST, 0.5, 1)
        const delayMs = Math.round(Math.max(0, parseFloat(shot) - now) * 1000)
        return { delayMs, reason: `watermark=${Number(before).toFixed(2)}/${BURST} + weight=1, delayMs=${delayMs}` }
      },
      close: () => redis.quit(),
    }
  }
  if (cfg.impl === 'rate-limiter-flexible') {
    const { RateLimiterRedis } = require('rate-limiter-flexible')
    const limiter = new RateLimiterRedis({ storeClient: redis, points: 1e9, duration: 60, keyPrefix: cfg.prefix })
    return { decide: (key) => limiter.consume(key), close: () => redis.quit() }
  }
  throw new Error(`unknown impl ${cfg.impl}`)
}

/** Context switches of every thread of this process so far (Linux /proc). */
function contextSwitches() {
  let total = 0
  try {
    for (const task of fs.readdirSync('/proc/self/task')) {
      const status = fs.readFileSync(`/proc/self/task/${task}/status`, 'utf8')
      total += Number(/voluntary_ctxt_switches:\s+(\d+)/.exec(status)[1])
      total += Number(/nonvoluntary_ctxt_switches:\s+(\d+)/.exec(status)[1])
    }
  } catch {
    return NaN
  }
  return total
}

async function main() {
  const { decide, close } = await makeDecide()
  const keyOf = cfg.keys === 1 ? () => 'hot' : (i) => `k${(i * 7919) % cfg.keys}`
  // warm-up: scripts loaded, connections up, JIT warm
  for (let i = 0; i < Math.min(2000, cfg.count / 10); i++) await decide(keyOf(i))
  const latencies = new Float64Array(cfg.count)
  let next = 0
  const switches0 = contextSwitches()
  const cpu0 = process.cpuUsage()
  const t0 = performance.now()
  async function loop() {
    for (;;) {
      const i = next++
      if (i >= cfg.count) return
      const start = performance.now()
      await decide(keyOf(i))
      latencies[i] = performance.now() - start
    }
  }
  await Promise.all(Array.from({ length: cfg.inflight }, loop))
  const seconds = (performance.now() - t0) / 1000
  const cpu = process.cpuUsage(cpu0)
  const switches = contextSwitches() - switches0
  latencies.sort()
  await close()
  process.send({
    decisions: cfg.count,
    seconds,
    p50Us: latencies[Math.floor(cfg.count * 0.5)] * 1000,
    p99Us: latencies[Math.floor(cfg.count * 0.99)] * 1000,
    nodeCpuUs: (cpu.user + cpu.system) / cfg.count,
    switchesPerDecision: switches / cfg.count,
  })
}

main().catch((err) => {
  console.error(err)
  process.exit(1)
})
