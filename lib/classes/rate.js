'use strict'
// The rate limiters (Bucket, Window, Leaky, Points, Unlimited): one `limit` per `interval`,
// their calls the limit kind's (lib/kinds/limit.js), the rest `Limiter`'s (lib/classes/base.js).

const {
  Limiter,
  limiterOptions,
  checkInteger,
  intervalMs,
  withinOptions,
  checkSignal,
  elapsedMs,
  MAX_LIMIT,
  MAX_MS,
  REFUND_MARGIN_MS,
} = require('./base')
const { invalidArgument } = require('../base/errors')
const { modeOption, ruledCall, unruled, ruleOf } = require('./ruled')
const { Lease, leaseOption } = require('./lease')
const { MemoryStore } = require('../store/memory')
const LIMIT = require('../kinds/limit')
const { allowed: ALLOWED, remaining: REMAINING, retry_after_us: RETRY_US, reset_after_us: RESET_US } = LIMIT.RESULT

const KIND = LIMIT.ALGORITHM
const OP = LIMIT.OP

/**
 * What Bucket, Window, Leaky and Points limiters share: the limit kind's calls (lib/kinds/limit.js)
 * for one `limit` per `interval`; everything else is `Limiter`'s. A subclass says which
 * algorithm it is by its statics: `_segment` (the statistics kind and key segment, which names
 * the algorithm in `LIMIT.ALGORITHM`) and `_limitName` (the option that holds the limit).
 */
class RateLimiter extends Limiter {
  static _limitName = 'limit'

  constructor(store, options) {
    const { _segment: segment, _limitName: limitName } = new.target
    const common = limiterOptions(store, options, [limitName, 'interval', 'mode', 'lease'])
    super(store, common, segment)
    this._limit = checkInteger(limitName, common.options[limitName], 1, MAX_LIMIT)
    this._intervalMs = intervalMs(common.options.interval)
    this._intervalUs = this._intervalMs * 1000
    this._kind = KIND[segment]
    this._sig = `${this._kind}|${this._limit}|${this._intervalUs}` // the options, for the local deny cache
    this._limitName = limitName
    /** 'enforce', or 'shadow': decided and counted, a refusal admitted (a rule's mode wins) */
    this._mode = modeOption(common.options.mode)
    const lease = leaseOption(common.options.lease, this._limit)
    /** lease mode (lib/classes/lease.js); null when off, and on a MemoryStore (one process: nothing to lease) */
    this._leased =
      lease === null || store instanceof MemoryStore ? null : new Lease(this, lease, () => elapsedMs(store))
    /** whether its tokens belong to a window that ends (a lease's run ends with it) */
    this._counter = this._kind !== KIND.leaky
  }

  /**
   * @internal the options shown by `store.limiters()`; a window of an HTTP door's several
   * windows (`_window`, see `_asWindow`) says which, so that inspect finds its key
   */
  _statsOptions() {
    const o = { [this._limitName]: this._limit, intervalMs: this._intervalMs }
    if (this._window !== undefined) o.window = this._window
    return o
  }

  /**
   * @internal makes this limiter window `index` of the windows `group` that an HTTP door key
   * decides together (the limit kind's door, lib/kinds/limit.js): its key lives under the
   * group's hash tag (`groupKey`), and its options say which window it is. Returns it.
   */
  _asWindow(group, index) {
    this._storeKey = LIMIT.groupKey(this._store, this._statsKind, group, index)
    this._window = { group, index }
    return this
  }

  /** Units admitted per interval. */
  get limit() {
    return this._limit
  }
  /** The interval, ms. */
  get intervalMs() {
    return this._intervalMs
  }

  /** @internal one call: resolves with a Decision (plus `_waitUs` for reservations) */
  _call(weight, maxWaitUs, count = false) {
    if (unruled(this)) return this._store._call(LIMIT, new LIMIT.Call(this, weight, maxWaitUs, count))
    const take = maxWaitUs >= 0
    if (!take && maxWaitUs !== OP.peek) {
      // adjust, reset, block: on the limit and interval the takes are decided against
      const e = this._store.rules._forName(this._statsKind, this._name)
      const r = e === undefined ? undefined : e.rule
      const call = new LIMIT.Call(
        this,
        weight,
        maxWaitUs,
        count,
        r?.limit ?? this._limit,
        r?.intervalMs !== undefined ? r.intervalMs * 1000 : this._intervalUs,
      )
      return this._store._call(LIMIT, call)
    }
    return ruledCall(this, take, weight, maxWaitUs, count, (limit, intervalUs, wait, counted) => {
      const c = new LIMIT.Call(this, weight, wait, counted, limit, intervalUs)
      if (limit !== this._limit) c.ruled = limit
      return this._store._call(LIMIT, c)
    })
  }

  /**
   * @internal a take (maxWaitUs 0) or a peek (OP.peek) of weight 1 decided against `limit`
   * instead of this limiter's own, uncounted: the HTTP doors count every request on their
   * key with a limit no count reaches, and read the count from `remaining`
   */
  _countAt(limit, maxWaitUs) {
    return this._store._call(LIMIT, new LIMIT.Call(this, 1, maxWaitUs, false, limit))
  }

  /** @internal a take (see Limiter): from the lease when leasing, unless a rule or shadow mode applies */
  _take(weight, maxWaitUs, count) {
    const lease = this._leased
    // no lease while the store is down: whenDown decides each call (the tokens held still admit)
    if (lease === null || maxWaitUs !== 0 || (this._store.status === 'down' && lease.held < weight)) {
      return this._call(weight, maxWaitUs, count)
    }
    if (!unruled(this) && (this._mode === 'shadow' || ruleOf(this) !== undefined)) {
      // a rule (or shadow mode) decides every call as it says: the lease ends (DESIGN §11)
      if (lease.held > 0) lease.end()
      return this._call(weight, 0, count)
    }
    return lease.take(weight, count)
  }

  /** @internal another operation (see Limiter): its code goes in the max-wait field */
  _op(name, weight) {
    const lease = this._leased
    // a reset or a block ends this process's lease first (its tokens go back, then the op)
    if (lease !== null && (name === 'reset' || name === 'block') && lease.held > 0) {
      return lease.end().then(() => this._call(weight, OP[name]))
    }
    return this._call(weight, OP[name])
  }

  /** @internal a lease call: a take of `weight`, uncounted, straight to the store (lib/classes/lease.js) */
  _leaseCall(weight) {
    return this._store._call(LIMIT, new LIMIT.Call(this, weight, 0, false))
  }

  /** @internal a take with no lease (the store is down: whenDown decides it) */
  _exactTake(weight, count) {
    return this._call(weight, 0, count)
  }

  /** @internal gives `n` leased tokens back (an adjust of -n) */
  _returnTokens(n) {
    return this._call(-n, OP.adjust)
  }

  /** @internal counts `n` of statistics field `field` (leaseCalls, returned) */
  _leaseEvent(field, n) {
    const book = this._store._stats
    if (book !== null && this._statsAs !== null) book.event(this, field, n)
  }

  /**
   * Statistics (see Limiter), and when leasing: `leased` (tokens this process holds now) and
   * `leasedOutstanding` (held by every process, as their last statistics flush wrote it).
   */
  async stats() {
    const s = await super.stats()
    const lease = this._leased
    if (lease !== null) {
      const all = await this._store._leasedOutstanding(this._statsKind, this._statsName)
      // this process's part as held now, not as its last flush wrote it
      const flushed = lease.member === '' ? 0 : Number(lease.member.split(',')[1])
      s.leased = lease.held
      s.leasedOutstanding = Math.max(0, all - flushed) + lease.held
    }
    return s
  }

  /** @internal the decision at `out[o..]` (the limit kind's `RESULT`); `degraded`: answered without Redis */
  _decision(out, o, degraded = false) {
    const retryUs = out[o + RETRY_US]
    const resetUs = out[o + RESET_US]
    return {
      allowed: out[o + ALLOWED] === 1,
      limit: this._limit,
      remaining: out[o + REMAINING],
      retryAfterMs: retryUs > 0 ? Math.ceil(retryUs / 1000) : 0,
      resetAfterMs: resetUs > 0 ? Math.ceil(resetUs / 1000) : 0,
      degraded,
    }
  }

  /**
   * @internal a counter's refund is skipped when the window charged may be over by the time it
   * lands: the window is the one the server charged, its `resetAfterMs` against the time
   * elapsed since on a monotonic clock, which no step of the process's wall clock moves. A
   * leaky bucket's refund always lands.
   */
  _refundable(d, atMs) {
    return this._kind === KIND.leaky || elapsedMs(this._store) + REFUND_MARGIN_MS < atMs + d.resetAfterMs
  }

  /** @internal whether waiting happens by reserving a future slot (leaky, points) */
  get _reserves() {
    return this._kind === KIND.leaky
  }
}

/** At most `limit` per calendar-aligned interval (UTC second, minute, hour, day, or ms). */
class BucketLimiter extends RateLimiter {
  static _segment = 'bucket'
}

/** At most `limit` per interval that starts at the first call after the previous one ended. */
class WindowLimiter extends RateLimiter {
  static _segment = 'window'
}

/**
 * A burst of `limit`, then one every `interval / limit`, exactly. Waiters in `withinLimit`
 * reserve their own future slot, in arrival order, so none of them starves.
 */
class LeakyLimiter extends RateLimiter {
  static _segment = 'leaky'
}

/**
 * A budget of `points`, refilled continuously at `points` per interval, for APIs that cost a
 * variable number of points per call. `withinLimit` charges an estimate up front; the
 * function reports the real cost through its handle and the difference is settled after.
 */
class PointsLimiter extends RateLimiter {
  static _segment = 'points'
  static _limitName = 'points'

  /** The budget. */
  get points() {
    return this._limit
  }

  /**
   * Charges `estimate` (default 1) when it fits (waiting up to `waitTimeoutMs`), runs
   * `fn(handle)`, then settles: if `handle.pointsUsed(actual)` was called, the difference is
   * refunded or charged. The settlement is awaited; a store failure there rejects.
   */
  async withinLimit(fn, options) {
    if (typeof fn !== 'function') throw invalidArgument('fn must be a function')
    const o = withinOptions(options, ['estimate', 'weight', 'signal'], 'withinLimit')
    const estimate = o.estimate !== undefined ? o.estimate : o.weight !== undefined ? o.weight : 1
    this._checkWeight(estimate, 'estimate')
    checkSignal(o.signal)
    if (!(await this._admit(estimate, o.signal))) return undefined
    let actual = null
    const handle = {
      pointsUsed(points) {
        checkInteger('points used', points, 0, MAX_LIMIT, invalidArgument)
        actual = points
      },
    }
    let result
    try {
      result = await fn(handle)
    } finally {
      if (actual !== null && actual !== estimate) await this._op('adjust', actual - estimate)
    }
    return result
  }
}

const UNLIMITED_DECISION = Object.freeze({
  allowed: true,
  limit: Infinity,
  remaining: Infinity,
  retryAfterMs: 0,
  resetAfterMs: 0,
  degraded: false,
})

/**
 * Never limits: accepts any options and always runs the function. A drop-in for any other
 * limiter in tests or when limiting is switched off.
 */
class UnlimitedLimiter {
  constructor(..._ignored) {
    this.name = 'unlimited'
  }
  async check() {
    return UNLIMITED_DECISION
  }
  async peek() {
    return UNLIMITED_DECISION
  }
  async reset() {}
  /** Runs `fn` with a stub handle that serves as a points handle and as a lease. */
  async withinLimit(fn) {
    const handle = { token: 0, pointsUsed() {}, release: async () => true, extend: async () => true }
    return fn(handle)
  }
  async acquire() {
    return { token: 0, release: async () => true, extend: async () => true }
  }
  async tryAcquire() {
    return this.acquire()
  }
  async stats() {
    return {
      admitted: 0,
      refused: 0,
      admittedWeight: 0,
      refusedWeight: 0,
      nearLimit: 0,
      degraded: 0,
      rescheduled: 0,
      held: 0,
      heldTimeMs: 0,
      immediate: 0,
      waited: 0,
      waitTimeMs: 0,
      overages: 0,
      reclaimed: 0,
      current: 0,
      waiting: 0,
    }
  }
}

module.exports = {
  BucketLimiter,
  WindowLimiter,
  LeakyLimiter,
  PointsLimiter,
  UnlimitedLimiter,
  RateLimiter,
  // for sluice/bullmq and the HTTP doors, which measure refund windows and cap waits alike
  elapsedMs,
  MAX_MS,
}
