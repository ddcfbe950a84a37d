'use strict'
// One benchmark run in a fresh process: argv[2] = JSON { impl, keys, inflight, count, url }.
// Sends back { decisions, seconds, p50Us, p99Us, nodeCpuUs } over IPC. Redis CPU is read by
// the parent around this process.
const fs = require('node:fs')
const path = require('node:path')
const { measure } = require('./harness')

const cfg = JSON.parse(process.argv[2])
const QPS = 1e6
const BURST = 1000

async function makeDecide() {
  if (cfg.impl === 'sluice-memory-reused') {
    // long-lived pacers (one per key, created up front) instead of one per decision
    const { MemoryStore, DistributedPacer } = require('../lib/entries/index.js')
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
    const { RedisStore, MemoryStore, DistributedPacer } = require('../lib/entries/index.js')
    const store =
      cfg.impl === 'sluice' ? await RedisStore.connect({ url: cfg.url, keyPrefix: cfg.prefix }) : new MemoryStore()
    return {
      decide: (key) => new DistributedPacer(store, { key, qps: QPS, maxBurst: BURST }).pace(),
      close: () => store.close(),
      batching: cfg.impl === 'sluice' ? () => store.batching : undefined,
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

makeDecide()
  .then((impl) => measure(cfg, impl))
  .catch((err) => {
    console.error(err)
    process.exit(1)
  })
