'use strict'
// SlidingCounterLimiter (the approximate sliding window): its options and results. Its calls are
// the sliding-counter kind's (lib/kinds/sliding-counter.js), the rest `Limiter`'s (base.js).

const { Limiter, limiterOptions, windowsOption, elapsedMs } = require('./base')
const { modeOption, unruled, ruleOf, applyRule, windowsOf, specOf, answeredWindows } = require('./ruled')
const SLIDING_COUNTER = require('../kinds/sliding-counter')
const { allowed: ALLOWED, retry_after_us: RETRY_US, size: HEAD } = SLIDING_COUNTER.RESULT.call
const W = SLIDING_COUNTER.RESULT.window
const { remaining: W_REMAINING, retry_after_us: W_RETRY_US, reset_after_us: W_RESET_US, size: EACH } = W

const OP = SLIDING_COUNTER.OP

/** A time of a result, µs, as whole ms (rounded up: never early). */
const ms = (us) => (us > 0 ? Math.ceil(us / 1000) : 0)

/**
 * An approximate sliding window per window of `windows` (say 100 per minute and 1,000 per
 * hour), decided and charged together, in two counters per window whatever the limit: the
 * weight in the window ending now is estimated as the previous calendar window's weight times
 * the share of it the sliding window still covers, plus the current one's. A call is admitted
 * only if every window's estimate has room for it. Bound: a calendar window never admits more
 * than its limit; over a sliding window it can admit more (or less) when the previous window's
 * calls were bunched. Its Decision describes the most restrictive window, plus `windows[]`.
 */
class SlidingCounterLimiter extends Limiter {
  constructor(store, options) {
    const common = limiterOptions(store, options, ['windows', 'mode'])
    super(store, common, 'sliding-counter')
    this._windows = windowsOption(common.options.windows)
    this._limit = Math.min(...this._windows.map((w) => w.limit))
    this._spec = [this._windows.length]
    for (const w of this._windows) this._spec.push(w.limit, w.intervalMs * 1000)
    /** 'enforce', or 'shadow': decided and counted, a refusal admitted (a rule's mode wins) */
    this._mode = modeOption(common.options.mode)
  }

  /** @internal the options shown by `store.limiters()` */
  _statsOptions() {
    return { windows: this._windows }
  }

  /** The windows, as configured. */
  get windows() {
    return this._windows
  }

  /**
   * @internal one call of this kind on `windows` (the owner's, or a rule's), a take counted in
   * statistics when `count`
   */
  _call(op, weight, count = false, windows = this._windows) {
    const spec = windows === this._windows ? this._spec : specOf(windows)
    const sent = this._store._call(SLIDING_COUNTER, new SLIDING_COUNTER.Call(this, op, weight, windows, spec))
    if (!count) return sent
    return sent.then((d) => {
      this._count(d, weight)
      return d
    })
  }

  /**
   * @internal a take or a peek under the rule of store.rules that applies to this limiter
   * (windows, or a limit and interval; deny, allow, shadow)
   */
  _ruled(op, weight, count) {
    const rule = ruleOf(this)
    const take = op === OP.take
    return applyRule(
      this,
      rule,
      take,
      weight,
      0,
      count,
      (_wait, counted) => this._call(op, weight, counted, windowsOf(this, rule)),
      (allowed, reason) => this._ruledDecision(allowed, reason),
    )
  }

  /** @internal a decision answered by a rule with no round trip (deny, allow) */
  _ruledDecision(allowed, reason) {
    const windows = answeredWindows(this, allowed).map((w) => ({ ...w, resetAfterMs: 0 }))
    const d = { allowed, limit: this._limit, remaining: allowed ? this._limit : 0, retryAfterMs: 0 }
    Object.assign(d, { resetAfterMs: 0, degraded: false, windows })
    if (reason !== undefined) d.reason = reason
    return d
  }

  /** @internal a take (see Limiter), counted in statistics when `count` */
  _take(weight, _maxWaitUs, count) {
    if (unruled(this)) return this._call(OP.take, weight, count)
    return this._ruled(OP.take, weight, count)
  }

  /** @internal another operation (see Limiter): a peek, reset, block or adjust on the windows in force */
  _op(name, weight) {
    if (unruled(this)) return this._call(OP[name], weight)
    if (name === 'peek') return this._ruled(OP.peek, weight, false)
    return this._call(OP[name], weight, false, windowsOf(this, ruleOf(this)))
  }

  /**
   * @internal a refund comes off the previous calendar window first, so it never frees room
   * the refunded call did not take; once the shortest window has passed since the call, the
   * call may be two calendar windows back and the refund is skipped
   */
  _refundable(_d, atMs) {
    const shortest = Math.min(...this._windows.map((w) => w.intervalMs))
    return elapsedMs(this._store) < atMs + shortest
  }

  /**
   * @internal the decision at `o` of a flat result on `windows` (the owner's, or a rule's);
   * `degraded`: answered without Redis
   */
  _decision(out, o, degraded = false, decided = this._windows) {
    const allowed = out[o + ALLOWED] === 1
    let pick = 0
    const windows = decided.map((w, i) => {
      const at = o + HEAD + EACH * i
      return {
        limit: w.limit,
        intervalMs: w.intervalMs,
        remaining: out[at + W_REMAINING],
        retryAfterMs: ms(out[at + W_RETRY_US]),
        resetAfterMs: ms(out[at + W_RESET_US]),
      }
    })
    // the most restrictive window: the one that refuses longest, or the one with least room
    for (let i = 1; i < windows.length; i++) {
      const w = windows[i]
      const b = windows[pick]
      if (allowed ? w.remaining < b.remaining : w.retryAfterMs > b.retryAfterMs) pick = i
    }
    const m = windows[pick]
    return {
      allowed,
      limit: m.limit,
      remaining: m.remaining,
      retryAfterMs: ms(out[o + RETRY_US]),
      resetAfterMs: m.resetAfterMs,
      degraded,
      windows,
    }
  }
}

module.exports = { SlidingCounterLimiter }
