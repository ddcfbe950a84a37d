// @ts-check
'use strict'
// Lease mode of the rate limiters (DESIGN §11): a process takes a run of tokens in one store call
// (a take of that weight: charged in the store at once, like any take), admits from them in the
// process with no round trip, and gives back what is left when the lease ends (`maxAgeMs`, the
// window it was charged in ending, `close()`, a rule, a reset or a block). So leasing never
// admits more than the limit; what it costs is refusals in one process while another holds
// unused tokens, at most the tokens outstanding (`stats().leasedOutstanding`).
//
// The size is adaptive: what this process asked in the last `maxAgeMs` (the weight asked per ms,
// measured between lease calls), at least the shortfall of the callers waiting, at most
// `maxTokens` (default a quarter of the limit). A lease is refilled before it runs out: when what
// is held falls under two round trips' worth of asks, the next lease call goes while callers
// still take from this one. A refused lease call is answered once more at the weight the store
// has left (or exactly, at the shortfall of the first caller waiting), so a refusal is the
// store's own; the processes' later calls of at least that shortfall are refused from it with no
// round trip until its retry time or `maxAgeMs`, whichever comes first (a bucket's or window's
// retry is its window's end, the same for every weight; a leaky bucket's only for that weight).

const { invalidConfig, knownOptions, ownProps } = require('../base/errors')
const { longTimeout } = require('../base/timers')

/** A lease's default lifetime, ms (DESIGN §11). */
const DEFAULT_MAX_AGE_MS = 50
/** The longest lease, ms: tokens held longer would keep other processes waiting for nothing. */
const MAX_AGE_MS = 60_000
/** A refund lands only in a window that ends more than this after it is sent (base.js's margin). */
const WINDOW_MARGIN_MS = 250

/**
 * The `lease` option of a limiter of `limit` (ERR_INVALID_CONFIG): null (off), or
 * `{ maxTokens (null: adaptive), maxAgeMs }`.
 */
function leaseOption(lease, limit) {
  if (lease === undefined || lease === false) return null
  if (lease === true) return { maxTokens: null, maxAgeMs: DEFAULT_MAX_AGE_MS }
  if (lease === null || typeof lease !== 'object' || Array.isArray(lease)) {
    throw invalidConfig('lease must be true, false or { maxTokens?, maxAgeMs? }')
  }
  knownOptions(lease, ['maxTokens', 'maxAgeMs'], 'lease')
  const o = ownProps(lease)
  const { maxTokens = null, maxAgeMs = DEFAULT_MAX_AGE_MS } = o
  const int = (v, min, max) => typeof v === 'number' && Number.isInteger(v) && v >= min && v <= max
  if (maxTokens !== null && !int(maxTokens, 1, limit)) {
    throw invalidConfig(`lease.maxTokens must be an integer in [1, ${limit}] (the limit)`)
  }
  if (!int(maxAgeMs, 1, MAX_AGE_MS)) throw invalidConfig(`lease.maxAgeMs must be an integer in [1, ${MAX_AGE_MS}]`)
  return { maxTokens, maxAgeMs }
}

/**
 * The lease of one limiter in one process. `owner` (a RateLimiter) gives: `_store`, `_limit`,
 * `_leaseCall(weight)` (a take, uncounted, straight to the store), `_count(d, weight)`,
 * `_leaseEvent(field, n)` (statistics), `_returnTokens(n)` (an adjust of -n), `_counter` (its
 * tokens belong to a window that ends: bucket, window) and `_dripMs` (a leaky bucket's refill
 * of one unit, ms).
 */
class Lease {
  constructor(owner, option, clockMs) {
    this.owner = owner
    this.store = owner._store
    this.maxAgeMs = option.maxAgeMs
    this.cap = option.maxTokens ?? Math.max(1, Math.floor(owner._limit / 4))
    this.adaptive = option.maxTokens === null
    /** `clockMs()`: elapsed ms on the store's clock (see base.js elapsedMs) */
    this.now = clockMs
    /** runs of tokens held, oldest first: `{ tokens, endMs, windowEndMs }` */
    this.runs = []
    this.held = 0
    /** the lease call in flight, or null */
    this.pending = null
    /** callers waiting for it: `{ weight, count, resolve, reject }`, in order */
    this.queue = []
    /** weight asked per ms, and what was asked since `since` */
    this.rate = 0
    this.asked = 0
    this.since = clockMs()
    /** a lease call's round trip, ms (smoothed) */
    this.rttMs = 1
    /** the store's remaining after the last lease call charged, and when its window resets */
    this.remaining = owner._limit
    this.resetAtMs = 0
    /** a refusal reused with no round trip: `{ untilMs, shortfall, retryAtMs, remaining }` or null */
    this.deny = null
    this.cancelTimer = null
    this.timerAt = Infinity
    /** tokens given back, lease calls made (this process; statistics count them fleet-wide) */
    this.returned = 0
    this.calls = 0
    /** the gauge member this process last wrote for this limiter ('' none; see StatsWriter) */
    this.member = ''
  }

  /** A take of `weight` (counted in statistics when `count`): resolves with a Decision. */
  take(weight, count) {
    const now = this.now()
    this.asked += weight
    if (this.runs.length > 0 && this.runs[0].endMs <= now) this.expire(now)
    if (this.queue.length === 0) {
      if (this.held >= weight) return Promise.resolve(this.admit(weight, count, now))
      const refused = this.refusal(weight, count, now)
      if (refused !== null) return Promise.resolve(refused)
    }
    return new Promise((resolve, reject) => {
      this.queue.push({ weight, count, resolve, reject })
      this.fill(now)
    })
  }

  /** Admits `weight` from the runs held (oldest first). */
  admit(weight, count, now) {
    let w = weight
    while (w > 0) {
      const run = this.runs[0]
      const k = Math.min(run.tokens, w)
      run.tokens -= k
      w -= k
      if (run.tokens === 0) this.runs.shift()
    }
    this.held -= weight
    if (this.held === 0) this.settled()
    const d = {
      allowed: true,
      limit: this.owner._limit,
      remaining: this.remaining + this.held,
      retryAfterMs: 0,
      resetAfterMs: Math.max(0, Math.ceil(this.resetAtMs - now)),
      degraded: false,
    }
    if (count) this.owner._count(d, weight)
    // refilled ahead: two round trips' worth of asks left
    if (
      this.pending === null &&
      this.adaptive &&
      this.held < this.rate * (2 * this.rttMs + 1) &&
      this.rate * this.maxAgeMs >= 2 &&
      (this.deny === null || this.deny.untilMs <= now) &&
      // not when the window ends before another lease could be used in it (its tokens spent)
      !(this.owner._counter && this.resetAtMs - now <= 2 * this.rttMs + 1)
    )
      this.fill(now)
    return d
  }

  /** The refusal of `weight` from the last one the store gave, or null (the store is asked). */
  refusal(weight, count, now) {
    const deny = this.deny
    if (deny === null || deny.untilMs <= now) return null
    const shortfall = weight - this.held
    if (shortfall < deny.shortfall || (!this.owner._counter && shortfall !== deny.shortfall)) return null
    const d = {
      allowed: false,
      limit: this.owner._limit,
      remaining: deny.remaining + this.held,
      retryAfterMs: Math.max(0, Math.ceil(deny.retryAtMs - now)),
      resetAfterMs: Math.max(0, Math.ceil(this.resetAtMs - now)),
      degraded: false,
    }
    if (count) this.owner._count(d, weight)
    return d
  }

  /**
   * The next lease's size: the asks of `maxAgeMs` at the measured rate, or what the callers
   * waiting need, at most `cap`; at least `shortfall` (the first waiter's).
   */
  size(now, shortfall, waiting) {
    // the rate is measured over a millisecond or more: a limiter made for one call (a
    // per-request limiter) leases what its callers wait for, and nothing more
    const span = now - this.since
    if (span >= 1) {
      // smoothed over about maxAgeMs: a span that long replaces the rate (a burst that ended
      // leaves no large lease behind)
      const r = this.asked / span
      const a = this.rate === 0 ? 1 : Math.min(1, span / this.maxAgeMs)
      this.rate = (1 - a) * this.rate + a * r
      this.asked = 0
      this.since = now
    }
    // a lease that would not serve two calls in its lifetime is not worth its give-back
    const use = this.rate * this.maxAgeMs
    const want = !this.adaptive ? this.cap : use >= 2 ? Math.ceil(use) : 0
    return Math.max(shortfall, Math.min(this.cap, Math.max(want, waiting)))
  }

  /** Starts a lease call unless one is in flight; `size`: its weight (default: see `size`). */
  fill(now, size) {
    if (this.pending !== null) return
    let waiting = 0
    for (const q of this.queue) waiting += q.weight
    const shortfall = Math.max(0, (this.queue.length > 0 ? this.queue[0].weight : 0) - this.held)
    let n = size ?? this.size(now, shortfall, waiting - this.held)
    // after a refusal (the store had too little), first ask exactly what the caller lacks: a
    // larger ask would be refused again and asked once more
    if (size === undefined && this.deny !== null && shortfall > 0) n = shortfall
    if (n <= 0) return
    this.calls++
    this.owner._leaseEvent('leaseCalls', 1)
    this.pending = this.owner._leaseCall(n).then(
      (d) => this.answered(d, n, shortfall, now),
      (err) => this.failed(err),
    )
  }

  /** A lease call's answer `d` (a take of `n` sent at `at`; `shortfall`: the first waiter's then). */
  answered(d, n, shortfall, at) {
    const now = this.now()
    this.pending = null
    this.rttMs = 0.8 * this.rttMs + 0.2 * Math.max(0, now - at)
    if (d.degraded) {
      // the store is down: no lease (what whenDown 'local' charged for it goes back first)
      if (d.allowed) this.owner._returnTokens(n).catch(() => undefined)
      return this.exactly()
    }
    this.remaining = d.remaining
    this.resetAtMs = at + d.resetAfterMs
    if (d.allowed) {
      this.deny = null
      // runs whose time is up go first; then the callers waiting are served from the new run
      // even if its window ended meanwhile (the store decided within it: an exact call's
      // answer arrives the same way), and what is left of it then ends with the others
      if (this.runs.length > 0 && this.runs[0].endMs <= now) this.expire(now)
      // the run is spent by its window's end (the store's, reached no earlier than at + reset)
      const windowEndMs = this.owner._counter ? at + d.resetAfterMs - 1 : Infinity
      this.runs.push({ tokens: n, endMs: Math.min(at + this.maxAgeMs, windowEndMs), windowEndMs })
      this.held += n
      this.store._leases.add(this)
      this.serve(now, true)
      this.arm()
      return
    } else if (d.remaining >= Math.max(1, shortfall) && d.remaining < n) {
      // too large for what is left: once more at what is left (the store's remaining fits it)
      return this.fill(now, d.remaining)
    } else if (shortfall > 0 && n > shortfall) {
      // less left than the first waiter's shortfall: asked exactly, its answer is the store's
      return this.fill(now, shortfall)
    } else {
      // refused at n (the first waiter's shortfall, or a refill ahead): reused until it may change
      this.deny = {
        untilMs: now + Math.min(this.maxAgeMs, d.retryAfterMs),
        shortfall: n,
        retryAtMs: at + d.retryAfterMs,
        remaining: d.remaining,
      }
      if (shortfall > 0 && n === shortfall) {
        const q = this.queue.shift()
        if (q !== undefined) {
          const r = { ...d, remaining: d.remaining + this.held }
          if (q.count) this.owner._count(r, q.weight)
          q.resolve(r)
        }
      }
    }
    this.serve(now)
  }

  /** Serves the callers waiting, in order, from the runs held and the refusal known; the rest ask again. */
  serve(now, fresh = false) {
    if (!fresh && this.runs.length > 0 && this.runs[0].endMs <= now) this.expire(now)
    while (this.queue.length > 0) {
      const q = this.queue[0]
      let d
      if (this.held >= q.weight) d = this.admit(q.weight, q.count, now)
      else {
        d = this.refusal(q.weight, q.count, now)
        if (d === null) break
      }
      this.queue.shift()
      q.resolve(d)
    }
    if (fresh && this.runs.length > 0 && this.runs[0].endMs <= now) this.expire(now)
    if (this.queue.length > 0) this.fill(now)
  }

  /** The store is down (a degraded answer): the callers waiting are decided one by one as whenDown says. */
  exactly() {
    const queue = this.queue
    this.queue = []
    for (const q of queue) this.owner._exactTake(q.weight, q.count).then(q.resolve, q.reject)
  }

  /** A lease call failed (a store error): every caller waiting gets it. */
  failed(err) {
    this.pending = null
    const queue = this.queue
    this.queue = []
    for (const q of queue) q.reject(err)
  }

  /** Ends the runs whose time is up at `now`: what is left goes back while its window lasts. */
  expire(now) {
    let back = 0
    while (this.runs.length > 0 && this.runs[0].endMs <= now) {
      const run = this.runs.shift()
      this.held -= run.tokens
      if (run.windowEndMs - now > WINDOW_MARGIN_MS) back += run.tokens
    }
    this.settled()
    if (back > 0) this.giveBack(back)
  }

  /** With statistics off no flush writes this lease's gauge: the store forgets it once it holds nothing. */
  settled() {
    if (this.held === 0 && this.store._stats === null) this.store._leases.delete(this)
  }

  /** Gives `n` tokens back to the store (a failure keeps them spent: admits less, never more). */
  giveBack(n) {
    this.returned += n
    this.owner._leaseEvent('returned', n)
    return this.owner._returnTokens(n).catch(() => undefined)
  }

  /** Arms the timer of the oldest run's end (a ManualClock's when the store has one). */
  arm() {
    // runs already ended go now (a ManualClock would fire a timer of 0 ms inside this call)
    const now = this.now()
    if (this.runs.length > 0 && this.runs[0].endMs <= now) this.expire(now)
    const at = this.runs.length > 0 ? this.runs[0].endMs : Infinity
    if (at >= this.timerAt) return
    if (this.cancelTimer !== null) this.cancelTimer()
    this.timerAt = at
    this.cancelTimer = longTimeout(
      () => {
        this.cancelTimer = null
        this.timerAt = Infinity
        this.arm()
      },
      at - now,
      { clock: this.store.clock, unref: true },
    )
  }

  /**
   * Ends the lease now (close(), a rule, a reset, a block): every token held goes back while its
   * window lasts, the refusal known is forgotten. Resolves when the store has them.
   */
  end() {
    const now = this.now()
    for (const run of this.runs) run.endMs = now
    this.deny = null
    let back = 0
    while (this.runs.length > 0) {
      const run = this.runs.shift()
      this.held -= run.tokens
      if (run.windowEndMs - now > WINDOW_MARGIN_MS) back += run.tokens
    }
    if (this.cancelTimer !== null) this.cancelTimer()
    this.cancelTimer = null
    this.timerAt = Infinity
    this.settled()
    return back > 0 ? this.giveBack(back) : Promise.resolve()
  }
}

module.exports = { Lease, leaseOption, DEFAULT_MAX_AGE_MS, MAX_AGE_MS }
