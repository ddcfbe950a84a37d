'use strict'
// SlidingWindowLimiter: several exact sliding windows on one name, their options and results.
// Its calls are the sliding kind's (lib/kinds/sliding.js).

const { OverLimitError, invalidArgument, unknownOption } = require('../base/errors')
const { checkInteger, classOptions, plainObject, windowsOption, blockMs, overLimit } = require('./base')
const { modeOption, unruled, ruleOf, applyRule, windowsOf, specOf, answeredWindows } = require('./ruled')
const SLIDING = require('../kinds/sliding')
const { allowed: ALLOWED, retry_after_us: RETRY_US, size: HEAD } = SLIDING.RESULT.call
const { remaining: W_REMAINING, retry_after_us: W_RETRY_US, size: EACH } = SLIDING.RESULT.window
const { storeKey } = require('../store/keys')

const OP = SLIDING.OP

/**
 * Several exact sliding windows on one name (say 25 per 5 s and 300 per 60 s), decided and
 * charged together: a call is admitted only if every window has room, and then charged to
 * all of them; a refused call charges none. A window of `intervalMs` covers the last
 * `intervalMs` up to now; `retryAfterMs` is exact.
 *
 * Memory: a sliding log of the admitted calls of the longest window, one sorted-set entry
 * per admitted call (about 30 bytes each up to 128 entries, 70-100 above), so at most the
 * longest window's `limit` entries per name; trimmed on every call, and the key expires
 * when its newest call leaves the longest window.
 */
class SlidingWindowLimiter {
  constructor(store, options) {
    const { name, windows, mode } = classOptions(store, options, ['name', 'windows', 'mode'], 'limiter')
    this._windows = windowsOption(windows)
    this._store = store
    this._name = name
    this._storeKey = storeKey(store, 'sliding', name)
    this._maxWeight = Math.min(...this._windows.map((w) => w.limit))
    this._spec = [this._windows.length]
    for (const w of this._windows) this._spec.push(w.limit, w.intervalMs * 1000)
    this._sig = this._spec.join('|') // the options, for the store's local deny cache
    this._statsKind = 'sliding'
    this._statsName = name
    /** 'enforce', or 'shadow': decided and counted, a refusal admitted (a rule's mode wins) */
    this._mode = modeOption(mode)
  }

  /** @internal the options shown by `store.limiters()` */
  _statsOptions() {
    return { windows: this._windows }
  }

  /** This limiter's statistics over every process (as the rate limiters' `stats()`). */
  stats() {
    return this._store._statsOf('sliding', this._name)
  }

  /**
   * @internal keeps this limiter out of statistics (`_statsAs` null, lib/store/store.d.ts
   * StatsOwner): an HTTP door's per-client counter, the door counting each request as itself
   * (lib/doors/http/outcome.js). Returns it.
   */
  _uncounted() {
    this._statsAs = null
    return this
  }

  /** The limiter's name. */
  get name() {
    return this._name
  }

  /** The windows, as configured. */
  get windows() {
    return this._windows
  }

  _checkWeight(weight) {
    checkInteger('weight', weight, 0, this._maxWeight, (m) =>
      invalidArgument(`${m} (a weight above a window's limit can never be admitted)`),
    )
    return weight
  }

  /**
   * @internal one call: op, weight; resolves with its decision (a take counted in statistics),
   * under the rule of store.rules that applies to this limiter (windows, deny, allow, shadow)
   */
  _call(op, weight) {
    if (unruled(this)) return this._send(op, weight, op === OP.take)
    const rule = ruleOf(this)
    if (op !== OP.take && op !== OP.peek) {
      const windows = windowsOf(this, rule)
      return this._send(op, weight, false, windows, windows === this._windows ? this._spec : specOf(windows))
    }
    const take = op === OP.take
    return applyRule(
      this,
      rule,
      take,
      weight,
      0,
      take,
      (_wait, count) => {
        const windows = windowsOf(this, rule)
        return this._send(op, weight, count, windows, windows === this._windows ? this._spec : specOf(windows))
      },
      (allowed, reason) => this._ruledDecision(allowed, reason),
    )
  }

  /** @internal the store call `op` of `weight` on `windows`, counted when `count` */
  _send(op, weight, count, windows, spec) {
    const sent = this._store._call(SLIDING, new SLIDING.Call(this, op, weight, windows, spec))
    if (!count) return sent
    return sent.then((d) => {
      this._count(d, weight)
      return d
    })
  }

  /** @internal counts one decision of a take (near the limit: a window with at most 20 % left) */
  _count(d, weight) {
    const book = this._store._stats
    if (book !== null) {
      const near = d.windows.some((w) => w.remaining <= w.limit * 0.2)
      book.decision(this, d.allowed, weight, near, d.degraded)
    }
  }

  /** @internal a decision answered by a rule with no round trip (deny, allow) */
  _ruledDecision(allowed, reason) {
    const d = { allowed, retryAfterMs: 0, degraded: false, windows: answeredWindows(this, allowed) }
    if (reason !== undefined) d.reason = reason
    return d
  }

  /**
   * @internal the decision at `o` of a flat result on `windows` (the owner's, or a rule's);
   * `degraded`: answered without Redis
   */
  _decision(out, o, degraded = false, windows = this._windows) {
    const ms = (us) => (us > 0 ? Math.ceil(us / 1000) : 0)
    return {
      allowed: out[o + ALLOWED] === 1,
      retryAfterMs: ms(out[o + RETRY_US]),
      degraded,
      windows: windows.map((w, i) => ({
        limit: w.limit,
        intervalMs: w.intervalMs,
        remaining: out[o + HEAD + EACH * i + W_REMAINING],
        retryAfterMs: ms(out[o + HEAD + EACH * i + W_RETRY_US]),
      })),
    }
  }

  /**
   * One decision: charges `weight` (default 1) to every window if all of them have room
   * now, otherwise charges nothing. Rejects with ERR_INVALID_ARGUMENT for a weight that is
   * not an integer in [0, smallest limit].
   */
  async check(weight = 1) {
    return this._call(OP.take, this._checkWeight(weight))
  }

  /** The decision `check(weight)` would get now, charging nothing. */
  async peek(weight = 1) {
    return this._call(OP.peek, this._checkWeight(weight))
  }

  /** Forgets every call this limiter has logged (and ends a block). */
  async reset() {
    await this._call(OP.reset, 0)
  }

  /**
   * Upstream back-pressure: nobody is admitted for the next `ms`, or as long as
   * `{ retryAfter }` (an HTTP Retry-After value) says, in any process; the log is kept, a
   * longer block already in place is kept. Checks and peeks are refused with no window
   * reporting room and `retryAfterMs` no earlier than the block's end. A Retry-After of 0 or a
   * past date blocks nothing.
   */
  async block(arg) {
    const ms = blockMs(this._store, arg)
    if (ms > 0) await this._call(OP.block, ms * 1000)
  }

  /**
   * Runs `fn` if `weight` (default 1) is admitted now; otherwise rejects with an
   * OverLimitError whose `window` is the window that refused (the one that frees up last).
   */
  async ensure(fn, options) {
    if (typeof fn !== 'function') throw invalidArgument('fn must be a function')
    if (options !== undefined && !plainObject(options)) throw invalidArgument('options must be an object')
    const { weight = 1, ...rest } = options || {}
    const extra = Object.keys(rest)
    if (extra.length > 0) throw unknownOption(extra[0], ['weight'], 'ensure', { make: invalidArgument })
    const d = await this.check(weight)
    if (d.reason === 'denied') throw overLimit(this, 0, 'denied')
    if (!d.allowed) {
      const w = d.windows.find((x) => x.retryAfterMs === d.retryAfterMs && x.retryAfterMs > 0) || d.windows[0]
      const window = { limit: w.limit, intervalMs: w.intervalMs }
      const error = new OverLimitError(
        `${this._name} is constrained to ${w.limit} per ${w.intervalMs} ms; retry after ${d.retryAfterMs} ms`,
        { limiter: this._name, retryAfterMs: d.retryAfterMs },
      )
      error.window = window
      throw error
    }
    return fn()
  }
}

module.exports = { SlidingWindowLimiter }
