'use strict'
// One sliding-window benchmark run in a fresh process: argv[2] = JSON { impl, keys, inflight,
// count, url, prefix }. A decision is one multi-window check (sluice-sliding vs the two-window
// sliding log in Lua) or one checkAndUseQuotas() with a per-org and a global quota
// (sluice-quota vs Sentry's RedisSlidingWindowRateLimiter re-implemented on ioredis). Limits
// nobody reaches: every decision is admitted and writes. Sends back { decisions, seconds,
// p50Us, p99Us, nodeCpuUs } over IPC.
const fs = require('node:fs')
const path = require('node:path')
const { measure } = require('./harness')

const cfg = JSON.parse(process.argv[2])
const BIG = 1e9
// two windows for the multi-window check: 5 s and 1 min
const WINDOWS = [
  { limit: BIG, intervalMs: 5_000 },
  { limit: BIG, intervalMs: 60_000 },
]
// Sentry's production shape: a per-org quota and a global quota, 1 h in 60 s granules
const ORG = { windowSeconds: 3600, granularitySeconds: 60, limit: BIG }
const GLOBAL = { windowSeconds: 3600, granularitySeconds: 60, limit: BIG, prefixOverride: 'global' }
const QUOTAS = [ORG, GLOBAL]

// every decision must be admitted, or the run measures the wrong path
function admitted(ok, what) {
  if (!ok) throw new Error(`${cfg.impl}: a decision was refused (${JSON.stringify(what)})`)
}

async function makeDecide() {
  if (cfg.impl.startsWith('sluice-')) {
    const sluice = require('../lib/entries/index.js')
    const store = await sluice.RedisStore.connect({ url: cfg.url, keyPrefix: cfg.prefix })
    const close = () => store.close()
    const batching = () => store.batching
    if (cfg.impl === 'sluice-sliding') {
      // a limiter object per decision, as a request handler would create it
      return {
        decide: async (key) => {
          const r = await new sluice.SlidingWindowLimiter(store, { name: key, windows: WINDOWS }).check()
          admitted(r.allowed, r)
        },
        close,
        batching,
      }
    }
    if (cfg.impl === 'sluice-quota') {
      const limiter = new sluice.QuotaLimiter(store)
      return {
        decide: async (key) => {
          const [g] = await limiter.checkAndUseQuotas([{ prefix: key, requested: 1, quotas: QUOTAS }])
          admitted(g.granted === 1, g)
        },
        close,
        batching,
      }
    }
    throw new Error(`unknown impl ${cfg.impl}`)
  }
  const Redis = require('ioredis')
  const redis = new Redis(cfg.url)
  const close = () => redis.quit()
  if (cfg.impl === 'sliding-log-lua') {
    redis.defineCommand('twoWindowSlidingLog', {
      numberOfKeys: 2,
      lua: fs.readFileSync(path.join(__dirname, 'peers', 'two-window-sliding-log.lua'), 'utf8'),
    })
    // now in microseconds, strictly increasing within this process: the original passes the
    // bare timestamp (also the sorted-set member), which collapses calls in the same tick
    let last = 0
    const now = () => (last = Math.max(Date.now() * 1000, last + 1))
    const args = (key) => [`${cfg.prefix}:${key}:5`, `${cfg.prefix}:${key}:60`, now(), BIG, 5e6, BIG, 60e6]
    return {
      decide: async (key) => {
        const r = await redis.twoWindowSlidingLog(...args(key))
        admitted(r[0] > 0 && r[1] > 0, r)
      },
      close,
    }
  }
  if (cfg.impl === 'sentry-quota') {
    const limiter = new SentryQuotaLimiter(redis, `${cfg.prefix}:`)
    return {
      decide: async (key) => {
        const [g] = await limiter.checkAndUseQuotas([{ prefix: key, requested: 1, quotas: QUOTAS }])
        admitted(g.granted === 1, g)
      },
      close,
    }
  }
  throw new Error(`unknown impl ${cfg.impl}`)
}

/**
 * Sentry's RedisSlidingWindowRateLimiter.check_and_use_quotas (sentry-redis-tools 0.5.0) on
 * ioredis: a counter per granule; the check reads every granule of every quota (one MULTI of
 * GETs), the use adds the grant to the newest granule (one pipeline of INCRBY + EXPIRE).
 */
class SentryQuotaLimiter {
  constructor(redis, keyPrefix = '') {
    this.redis = redis
    this.keyPrefix = keyPrefix
  }

  key(request, quota, granule) {
    const prefix = quota.prefixOverride ?? request.prefix
    return `${this.keyPrefix}sliding-window-rate-limit:${prefix}:${quota.windowSeconds}:${quota.granularitySeconds}:${granule}`
  }

  // newest first: floor(t / granularity) - 1, then one less, window / granularity granules
  *granules(quota, timestamp) {
    let value = Math.floor(timestamp / quota.granularitySeconds)
    for (let i = 0; i < quota.windowSeconds / quota.granularitySeconds; i++) yield --value
  }

  async checkWithinQuotas(requests, timestamp = Math.floor(Date.now() / 1000)) {
    // the granule keys of every quota of every request, fetched once each
    const keysOf = requests.map((request) =>
      request.quotas.map((quota) => Array.from(this.granules(quota, timestamp), (g) => this.key(request, quota, g))),
    )
    const fetched = [...new Set(keysOf.flat(2))]
    const replies = await this.redis.multi(fetched.map((k) => ['get', k])).exec()
    const counts = new Map()
    fetched.forEach((k, i) => {
      if (replies[i][0]) throw replies[i][0]
      counts.set(k, Number(replies[i][1] ?? 0))
    })
    // what this call already granted against each override (shared) quota
    const grantedInCall = new Map()
    const grants = []
    requests.forEach((request, r) => {
      let granted = request.requested
      const reachedQuotas = []
      request.quotas.forEach((quota, q) => {
        let used = 0
        for (const key of keysOf[r][q]) used += counts.get(key)
        if (quota.prefixOverride != null) used += grantedInCall.get(quota) ?? 0
        const remaining = Math.max(0, quota.limit - used)
        if (remaining < granted) {
          granted = remaining
          reachedQuotas.push(quota)
        }
      })
      for (const quota of request.quotas)
        if (quota.prefixOverride != null) grantedInCall.set(quota, (grantedInCall.get(quota) ?? 0) + granted)
      grants.push({ prefix: request.prefix, granted, reachedQuotas })
    })
    return [timestamp, grants]
  }

  async useQuotas(requests, grants, timestamp) {
    const incr = new Map() // key -> [amount, ttl]
    requests.forEach((request, i) => {
      for (const quota of request.quotas) {
        const key = this.key(request, quota, this.granules(quota, timestamp).next().value)
        const prev = incr.get(key)
        incr.set(key, [(prev ? prev[0] : 0) + grants[i].granted, quota.windowSeconds])
      }
    })
    const pipeline = this.redis.pipeline()
    for (const [key, [n, ttl]] of incr) pipeline.incrby(key, n).expire(key, ttl)
    for (const [err] of await pipeline.exec()) if (err) throw err
  }

  async checkAndUseQuotas(requests, timestamp) {
    const [t, grants] = await this.checkWithinQuotas(requests, timestamp)
    await this.useQuotas(requests, grants, t)
    return grants
  }
}

makeDecide()
  .then((impl) => measure(cfg, impl))
  .catch((err) => {
    console.error(err)
    process.exit(1)
  })
