// @ts-check
'use strict'

// What an HTTP door answers for a request and how it counts it: the outcome of a decision (its
// windows' remaining and reset, the window the single-window headers describe), `req.rateLimit`,
// and the door's statistics. A door is one limiter in the registry and in statistics, kind
// `door` named by its counter identifier (lib/kinds/door.js): it counts each request it decides,
// over all its clients, once; its clients' counters are kept out of statistics (each one's
// `_uncounted()`), so no number of distinct client keys can crowd the registry.

/**
 * An outcome: `{ allowed, degraded, key, weight, windows, main, retryAfterMs, refund, at }`
 * (`main`: the window with fewest remaining, the one single-window headers describe).
 */
function outcome(key, weight, windows, allowed, degraded, retryAfterMs, refund, at) {
  let main = 0
  for (let i = 1; i < windows.length; i++) {
    const w = windows[i]
    const m = windows[main]
    if (w.remaining < m.remaining || (w.remaining === m.remaining && w.resetMs > m.resetMs)) main = i
  }
  return { allowed, degraded, key, weight, windows, main, retryAfterMs, refund, at }
}

/**
 * `req.rateLimit`: `{ limit, used, remaining, resetTime, degraded, key }`, and `current`, the
 * deprecated name of `used` in express-rate-limit, on the prototype: there, but not
 * enumerable (not in JSON), as the peer sets it, at no cost per request.
 */
class RateLimitInfo {
  constructor(main, o) {
    this.limit = main.limit
    // counted with every request (Door._every): the count itself, past the limit after refusals
    this.used = main.used !== undefined ? main.used : Math.max(0, main.limit - main.remaining)
    this.remaining = main.remaining
    this.resetTime = new Date(o.at + main.resetMs)
    this.degraded = o.degraded
    this.key = o.key
  }

  get current() {
    return this.used
  }
}

/**
 * The statistics owner of a door of `config` (as a limiter is one: `_statsKind`, `_statsName`,
 * `_statsOptions()`), or null for a door of `limiter(req)` (its limiters are the caller's and
 * count as themselves).
 */
function doorOwner(config) {
  if (config.windows === null) return null
  const options = {
    algorithm: config.algorithm,
    windows: config.windows.map((w) => ({ limit: w.limit, windowMs: w.windowMs })),
  }
  return { _statsKind: 'door', _statsName: config.counter, _statsOptions: () => options }
}

/** Keeps the limiters a door made for a client (`made`: the leaves) out of statistics. */
function uncounted(made) {
  for (const l of made) l._uncounted()
}

/**
 * Counts outcome `o` of a request the door of `owner` charged: admitted or refused, its weight,
 * whether its main window kept at most 20 % of its limit, whether it was answered without Redis.
 */
function countOutcome(store, owner, o) {
  const book = store._stats
  if (book === null || owner === null) return
  const main = o.windows[o.main]
  book.decision(owner, o.allowed, o.weight, main.remaining <= main.limit * 0.2, o.degraded)
}

module.exports = { outcome, RateLimitInfo, doorOwner, uncounted, countOutcome }
