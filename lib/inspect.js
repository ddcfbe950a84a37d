'use strict'

// Looking at the limiters a store has seen, for operators (the CLI and sluice/dashboard): a
// limiter object made from a registry entry, its statistics and its live state, read without
// charging anything.

const { BucketLimiter, WindowLimiter, LeakyLimiter, PointsLimiter } = require('./limiters')
const { SlidingWindowLimiter, QuotaLimiter } = require('./windows')
const { DistributedPacer } = require('./pacer')
const { ConcurrentLimiter } = require('./concurrent')
const { FairTenant } = require('./fair')
const { KINDS } = require('./stats')

/** The kinds whose counts `reset()` forgets. */
const RESETTABLE = ['bucket', 'window', 'leaky', 'points', 'sliding']

/** A limiter object for a registry entry `{ kind, name, options }` (null for a quota prefix). */
function limiterOf(store, info) {
  const { kind, name, options: o } = info
  switch (kind) {
    case 'bucket':
      return new BucketLimiter(store, { name, limit: o.limit, interval: o.intervalMs })
    case 'window':
      return new WindowLimiter(store, { name, limit: o.limit, interval: o.intervalMs })
    case 'leaky':
      return new LeakyLimiter(store, { name, limit: o.limit, interval: o.intervalMs })
    case 'points':
      return new PointsLimiter(store, { name, points: o.points, interval: o.intervalMs })
    case 'sliding':
      return new SlidingWindowLimiter(store, { name, windows: o.windows })
    case 'pacer':
      return new DistributedPacer(store, { key: name, qps: o.qps, maxBurst: o.maxBurst })
    case 'concurrent':
      return new ConcurrentLimiter(store, { name, limit: o.limit, lockTimeoutMs: o.lockTimeoutMs })
    case 'fair':
      return new FairTenant(store, {
        name,
        mode: o.mode,
        rules: o.rules.map((r) => ({ queue: r.queue, threshold: r.threshold, perMs: r.perMs })),
        maxWindowMs: Math.max(...o.rules.map((r) => r.perMs)),
      })
    default:
      return null
  }
}

/** The statistics of a registry entry, over every process. */
async function statsOf(store, info) {
  if (info.kind === 'quota') return new QuotaLimiter(store).stats(info.name)
  return limiterOf(store, info).stats()
}

/**
 * What the limiter holds now, read without charging: remaining per limit, leases held and
 * waiters, the pacer's backlog. `fill` is how full it is, 0..1 (null when a kind has no
 * single fill: quotas, fair tenants).
 */
async function stateOf(store, info) {
  const limiter = limiterOf(store, info)
  switch (info.kind) {
    case 'bucket':
    case 'window':
    case 'leaky':
    case 'points': {
      const d = await limiter.peek()
      return {
        remaining: d.remaining,
        limit: d.limit,
        retryAfterMs: d.retryAfterMs,
        resetAfterMs: d.resetAfterMs,
        fill: d.limit > 0 ? 1 - d.remaining / d.limit : 1,
      }
    }
    case 'sliding': {
      const d = await limiter.peek(0)
      const windows = d.windows.map((w) => ({ limit: w.limit, intervalMs: w.intervalMs, remaining: w.remaining }))
      return { windows, fill: Math.max(0, ...windows.map((w) => (w.limit > 0 ? 1 - w.remaining / w.limit : 1))) }
    }
    case 'pacer': {
      const o = await limiter.rateLimit(0) // a probe: charges nothing, counts nothing
      const maxBurst = info.options.maxBurst
      return {
        backlogMs: o.delayMs,
        watermark: o.watermark,
        fill: o.delayMs > 0 ? 1 : maxBurst > 0 ? Math.min(1, Math.max(0, o.watermark / maxBurst)) : 0,
      }
    }
    case 'concurrent': {
      const s = await limiter.stats()
      const limit = info.options.limit
      return { held: s.current, waiting: s.waiting, limit, fill: limit > 0 ? Math.min(1, s.current / limit) : 1 }
    }
    default:
      return { fill: null }
  }
}

/** A short text of a limiter's limit, from its registry options. */
function limitText(info) {
  const o = info.options || {}
  const per = (ms) => (ms % 3_600_000 === 0 ? `${ms / 3_600_000}h` : ms % 1000 === 0 ? `${ms / 1000}s` : `${ms}ms`)
  switch (info.kind) {
    case 'bucket':
    case 'window':
    case 'leaky':
      return `${o.limit} / ${per(o.intervalMs)}`
    case 'points':
      return `${o.points} points / ${per(o.intervalMs)}`
    case 'sliding':
      return (o.windows || []).map((w) => `${w.limit} / ${per(w.intervalMs)}`).join(', ')
    case 'pacer':
      return `${o.qps}/s, burst ${o.maxBurst}`
    case 'concurrent':
      return `${o.limit} at once`
    case 'quota':
      return `${(o.quotas || []).length} quota${(o.quotas || []).length === 1 ? '' : 's'}`
    case 'fair':
      return (o.rules || []).map((r) => `>${r.threshold}/${per(r.perMs)} → ${r.queue}`).join(', ')
    default:
      return ''
  }
}

module.exports = { KINDS, RESETTABLE, limiterOf, statsOf, stateOf, limitText }
