'use strict'

// @fastify/rate-limit's answers to a client that keeps asking while over its limit, on any
// door algorithm: `continueExceeding` (every refused request restarts the window: the key is
// blocked for the window's length from now), `exponentialBackoff` (the nth refused request
// blocks it for windowMs * 2^(n-1) from now; a longer block in place is kept) and `ban` (past
// `ban` refused requests, the refusal is a ban: 403). On a door of one 'window' (the default)
// the three count every request on the door's own key, as the peer's store does
// (`backoff` below, Door._every); on other doors refused requests are counted, when backoff or
// ban needs the count, on a counter of their own (`<counter name>_x`, a window of the door's
// length opened at the first refusal): store calls on refusals only.

const classes = require('../../classes')
const { nameOf } = require('./key')
const { algorithmOf, MAX_LIMIT, MAX_WINDOW_MS } = require('./options')
const { OP } = require('../../kinds/limit')

class Exceeding {
  /** `ban`: -1 (none) or how many refusals before a ban. */
  constructor({ continueExceeding = false, exponentialBackoff = false, ban = -1 }) {
    this.continueExceeding = continueExceeding
    this.exponentialBackoff = exponentialBackoff
    this.ban = ban
    this.counts = ban >= 0 || (exponentialBackoff && !continueExceeding)
    /**
     * `ban` alone: the door counts every request as the peer's store does (Door._every, on a
     * door of one 'window'), so a ban is `ban` refusals within the client's window, as there
     */
    this.countsEvery = ban >= 0 && !continueExceeding && !exponentialBackoff
    /**
     * `continueExceeding` or `exponentialBackoff` (continueExceeding wins, as in the peer's
     * store): on a door of one 'window' every request is counted and, past the limit, the
     * window restarts (or doubles) in the same store call (`backoff`), exactly as the
     * peer's store; elsewhere refusals are counted apart and the key blocked (refused below)
     */
    this.backsOff = exponentialBackoff || continueExceeding
  }

  /** Whether anything is to be done on a refusal. */
  get active() {
    return this.continueExceeding || this.exponentialBackoff || this.ban >= 0
  }

  /**
   * Outcome `o` (a refusal of the key known by `id`, by `limiter`; null: refused without one,
   * nothing to block) after the refusal is counted and the key blocked as asked: its windows
   * report no room until the block ends, `o.exceeded` is the refusals counted, `o.banned`
   * whether it is a ban.
   */
  async refused(door, limiter, id, o) {
    const c = door.config
    // refused for want of Redis (whenDown 'deny'): no count to go by, never a ban (a 503)
    if (door.unavailable(o)) {
      o.exceeded = 0
      o.banned = false
      return o
    }
    const windowMs = Math.max(...o.windows.map((w) => w.windowMs))
    // a refusal counted with every call (Door._every) knows how far over the limit it is
    let n = 1
    if (o.exceeded !== undefined) n = o.exceeded
    else if (this.counts) {
      const counter = new classes.WindowLimiter(c.store, {
        name: `${nameOf(c.counter, id)}_x`, // a second `_`: never a door key's counter
        limit: MAX_LIMIT,
        interval: windowMs,
        waitTimeoutMs: 0,
      })
      const d = await counter.check(1)
      n = MAX_LIMIT - d.remaining
    }
    let blockMs = 0
    if (this.continueExceeding) blockMs = windowMs
    else if (this.exponentialBackoff) blockMs = Math.min(MAX_WINDOW_MS, windowMs * 2 ** Math.min(n - 1, 40))
    if (blockMs > 0 && limiter !== null) {
      await block(c, limiter, blockMs)
      o.retryAfterMs = Math.max(o.retryAfterMs, blockMs)
      for (const w of o.windows) {
        w.remaining = 0
        w.resetMs = Math.max(w.resetMs, blockMs)
      }
    }
    o.exceeded = n
    o.banned = this.ban >= 0 && n > this.ban
    return o
  }
}

/**
 * A request of `door` counted as @fastify/rate-limit's store counts it under
 * `exponentialBackoff` (`continueExceeding`): every request charged on the door's key, and
 * one that takes the count `n` over the limit ends the window windowMs * 2^(n-1) (windowMs)
 * from now, in the same store call (core/window.rs, Op::Backoff). `o.exceeded` is n, read
 * from the wait under backoff (the window's length is windowMs times a power of two, exact in
 * whole ms below the 10-year cap), from the count when a ban needs it under continueExceeding;
 * `o.banned` past `ban` of them.
 */
async function backoff(door, limiter, key, windows, at) {
  const e = door.config.exceeding
  const w = windows[0]
  const d = await limiter._take(1, e.continueExceeding ? OP.continue : OP.backoff, true)
  w.remaining = d.remaining
  w.resetMs = d.allowed ? d.resetAfterMs : d.retryAfterMs
  const refund = door.refundOf(limiter, 1, d, at)
  const o = door.outcome(key, 1, windows, d.allowed, d.degraded, d.retryAfterMs, refund, at)
  if (d.allowed) return o
  // refused for want of Redis (whenDown 'deny'): no count to go by, never a ban (a 503)
  o.exceeded = 0
  o.banned = false
  if (d.degraded) return o
  if (!e.continueExceeding) {
    o.exceeded = Math.max(1, Math.round(Math.log2(d.retryAfterMs / w.windowMs)) + 1)
  } else if (e.ban >= 0) {
    // a restarted window's wait says nothing of the count: read it when a ban needs it
    const r = await limiter._countAt(MAX_LIMIT, OP.peek)
    o.exceeded = r.allowed ? Math.max(1, MAX_LIMIT - r.remaining - w.limit) : 1
  } else {
    return o
  }
  o.banned = e.ban >= 0 && o.exceeded > e.ban
  w.used = w.limit + o.exceeded
  return o
}

/** Blocks a door key's limiter (every window of it) for `ms`. */
function block(config, limiter, ms) {
  if (typeof limiter.block === 'function') return limiter.block(ms)
  const members = algorithmOf(config).members
  return Promise.all((members ? members(limiter) : [limiter]).map((m) => m.block(ms)))
}

module.exports = { Exceeding, backoff }
