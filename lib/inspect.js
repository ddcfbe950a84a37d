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

// --- showing names to people --------------------------------------------------------------

/**
 * Characters a terminal (or a page) must not be handed raw in a name: C0 controls (ESC starts
 * screen clearing, cursor moves and OSC 52 clipboard writes; CR and LF make fake rows), DEL,
 * C1 controls (U+009B is a one-character CSI on terminals that read C1), the bidirectional
 * overrides, embeddings, isolates and marks (they reorder what follows on the line), the line
 * and paragraph separators, lone surrogates, and the backslash itself (so that an escaped name
 * reads back one way only).
 */
const UNSAFE =
  /[\\\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g
const SHORT = { '\\': '\\\\', '\n': '\\n', '\r': '\\r', '\t': '\\t' }

/** One unsafe character as an escape: `\n`, `\x1b`, `\x9b`, `\u202e`, `\\`. */
function escapeChar(c) {
  if (SHORT[c] !== undefined) return SHORT[c]
  const n = c.charCodeAt(0)
  return n < 0x100 ? `\\x${n.toString(16).padStart(2, '0')}` : `\\u${n.toString(16).padStart(4, '0')}`
}

/**
 * `s` safe to print on a terminal: every control character (C0, DEL, C1), bidi control, line
 * separator and lone surrogate shown as an escape, and `\` as `\\`. Any other text is kept.
 */
function termText(s) {
  return String(s).replace(UNSAFE, escapeChar)
}

/** `s` in double quotes, escaped for a terminal (`"` inside as `\"`). */
function quoted(s) {
  return `"${termText(s).replaceAll('"', '\\"')}"`
}

/**
 * JSON text made safe for a terminal without changing what it parses to: JSON.stringify
 * already escapes C0 controls and lone surrogates; this escapes DEL, C1 controls, bidi
 * controls and line separators as `\uXXXX` too.
 */
function jsonText(value, indent) {
  return JSON.stringify(value, null, indent).replace(
    /[\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g,
    (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`,
  )
}

/**
 * A Redis URL with its whole userinfo masked: `redis://***@host:6379/0`. The userinfo is taken
 * to end at the LAST `@` after `//` (a password may hold `@`, `/`, `?` or `#`): a URL with an
 * `@` in its path or query is masked up to there too, never less. No `@`: the URL as given.
 */
function maskUrl(url) {
  const s = String(url)
  const slashes = s.indexOf('//')
  const start = slashes < 0 ? 0 : slashes + 2
  const at = s.lastIndexOf('@')
  if (at < start) return s
  return `${s.slice(0, start)}***${s.slice(at)}`
}

/**
 * `text` with the secrets of `url` (its whole userinfo, as maskUrl takes it, and the part
 * after its first `:`) replaced by `***`, also as they appear inside a quoted string: for
 * messages of dependencies that may quote the URL as given.
 */
function redactIn(text, url) {
  const s = String(url)
  const slashes = s.indexOf('//')
  const start = slashes < 0 ? 0 : slashes + 2
  const at = s.lastIndexOf('@')
  if (at < start) return String(text)
  const userinfo = s.slice(start, at)
  const colon = userinfo.indexOf(':')
  const secrets = [userinfo, colon < 0 ? '' : userinfo.slice(colon + 1)].filter((x) => x.length > 0)
  let out = String(text)
  for (const secret of secrets) {
    for (const form of new Set([secret, JSON.stringify(secret).slice(1, -1)])) out = out.split(form).join('***')
  }
  return out
}

module.exports = {
  KINDS,
  RESETTABLE,
  limiterOf,
  statsOf,
  stateOf,
  limitText,
  termText,
  quoted,
  jsonText,
  maskUrl,
  redactIn,
}
