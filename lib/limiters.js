'use strict'
// The rate limiters (Bucket, Window, Leaky, Points, Unlimited) and the option checks and
// waiting helpers every limiter class shares. Their calls are the limit kind's (lib/kinds/limit.js).

const { MemoryStore, RedisStore } = require('./store')
const { SluiceError, OverLimitError, invalidConfig, invalidArgument, ownProps } = require('./errors')
const { longTimeout } = require('./timers')
const { retryAfterMs } = require('./retryafter')
const LIMIT = require('./kinds/limit')

const NAME = /^[A-Za-z0-9_-]{1,256}$/
const MAX_LIMIT = 1e9
const MAX_MS = 315_360_000_000 // 10 years
const DAY_MS = 86_400_000
const INTERVALS = { second: 1_000, minute: 60_000, hour: 3_600_000, day: DAY_MS }
const KIND = LIMIT.ALGORITHM
const { adjust: ADJUST, reset: RESET, peek: PEEK, block: BLOCK } = LIMIT.OP
/** A refund is skipped when its window may end within this margin (latency, clock skew). */
const REFUND_MARGIN_MS = 250

function checkStore(store) {
  if (!(store instanceof MemoryStore) && !(store instanceof RedisStore)) {
    throw invalidConfig('store must be a MemoryStore or a RedisStore')
  }
}

/** A block's duration: whole ms in [1, 10 years] (ERR_INVALID_ARGUMENT). */
function checkBlockMs(ms) {
  return checkInteger('ms', ms, 1, MAX_MS, invalidArgument)
}

/**
 * The duration of `block(arg)` on `store`, whole ms: `arg` is ms (an integer in [1, 10
 * years]) or `{ retryAfter }`, an HTTP `Retry-After` value (delta-seconds, fractions rounded
 * up, or an HTTP-date, measured from now on the store's clock), where 0 or a date not in the
 * future is 0: nothing to block. ERR_INVALID_ARGUMENT otherwise. `store` may be null (an
 * empty composite): the system clock.
 */
function blockMs(store, arg) {
  if (arg === null || typeof arg !== 'object' || Array.isArray(arg)) return checkBlockMs(arg)
  for (const key of Object.keys(arg)) {
    if (key !== 'retryAfter') throw invalidArgument(`unknown block option ${JSON.stringify(key)}`)
  }
  const ms = retryAfterMs(ownProps(arg).retryAfter, store ? nowMs(store) : Date.now())
  if (ms > MAX_MS) throw invalidArgument(`retryAfter must be at most ${MAX_MS / DAY_MS} days away`)
  return ms
}

function checkInteger(name, value, min, max, make = invalidConfig) {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) {
    throw make(`${name} must be an integer in [${min}, ${max}], got ${String(value)}`)
  }
  return value
}

/**
 * Validates the options every limiter shares (name, waitTimeoutMs, policy, ttlMs) plus the
 * kind's own, and rejects unknown ones.
 */
function limiterOptions(store, options, own) {
  checkStore(store)
  if (options === null || typeof options !== 'object' || Array.isArray(options)) {
    throw invalidConfig('options must be an object')
  }
  const known = ['name', 'waitTimeoutMs', 'policy', 'ttlMs', ...own]
  for (const key of Object.keys(options)) {
    if (!known.includes(key)) throw invalidConfig(`unknown limiter option ${JSON.stringify(key)}`)
  }
  const o = ownProps(options)
  const { name, waitTimeoutMs = 5_000, policy = 'raise', ttlMs = 90 * DAY_MS } = o
  if (typeof name !== 'string' || !NAME.test(name)) {
    throw invalidConfig('name must be 1..256 characters of [A-Za-z0-9_-]')
  }
  checkInteger('waitTimeoutMs', waitTimeoutMs, 0, MAX_MS)
  if (policy !== 'raise' && policy !== 'skip') throw invalidConfig("policy must be 'raise' or 'skip'")
  checkInteger('ttlMs', ttlMs, 1, MAX_MS)
  return { name, waitTimeoutMs, policy, ttlMs, options: o }
}

/** An interval name or a number of ms, as ms. */
function intervalMs(interval) {
  if (typeof interval === 'string' && Object.hasOwn(INTERVALS, interval)) return INTERVALS[interval]
  if (typeof interval === 'number' && Number.isInteger(interval) && interval >= 1 && interval <= MAX_MS) {
    return interval
  }
  throw invalidConfig(`interval must be 'second', 'minute', 'hour', 'day' or whole ms in [1, ${MAX_MS}]`)
}

function nowMs(store) {
  return store.clock ? store.clock.now() : Date.now()
}

/**
 * A time to measure how long ago something happened, ms: the store's ManualClock when it has
 * one (tests), else the process's monotonic clock (a wall-clock step, NTP or by hand, does not
 * move it). Only differences of two readings mean anything.
 */
function elapsedMs(store) {
  return store.clock ? store.clock.now() : performance.now()
}

const aborted = (signal) => new SluiceError('ERR_ABORTED', 'the operation was aborted', { cause: signal.reason })

function checkSignal(signal) {
  if (signal !== undefined && (signal === null || typeof signal.aborted !== 'boolean')) {
    throw invalidArgument('signal must be an AbortSignal')
  }
  if (signal && signal.aborted) throw aborted(signal)
}

/**
 * Waits `ms` on the store's clock (a ManualClock moves only when advanced); rejects with
 * ERR_ABORTED when `signal` aborts. Returns a promise and, through `onCancel`, nothing else.
 */
function sleep(store, ms, signal) {
  return new Promise((resolve, reject) => {
    if (signal && signal.aborted) return reject(aborted(signal))
    let cancel = null
    let settled = false
    const onAbort = () => {
      if (settled) return
      settled = true
      if (cancel) cancel()
      reject(aborted(signal))
    }
    if (signal) signal.addEventListener('abort', onAbort, { once: true })
    const done = () => {
      if (settled) return
      settled = true
      if (signal) signal.removeEventListener('abort', onAbort)
      resolve()
    }
    // any length: a ManualClock's time, or setTimeout re-armed past its 24.8-day limit
    cancel = longTimeout(done, ms, { clock: store.clock })
  })
}

function overLimit(limiter, retryAfterMs) {
  return new OverLimitError(`over the limit of ${limiter.name}; retry after ${retryAfterMs} ms`, {
    limiter: limiter.name,
    retryAfterMs,
  })
}

function withinOptions(options, names) {
  if (options === undefined) return {}
  if (options === null || typeof options !== 'object') throw invalidArgument('options must be an object')
  for (const key of Object.keys(options)) {
    if (!names.includes(key)) throw invalidArgument(`unknown option ${JSON.stringify(key)}`)
  }
  return options
}

/**
 * What Bucket, Window, Leaky and Points limiters share: one decision per call, one round trip
 * (calls of one tick share it), waiting in `withinLimit` up to `waitTimeoutMs`.
 */
class RateLimiter {
  constructor(store, options, segment, own, limitName) {
    const common = limiterOptions(store, options, own)
    this._store = store
    this._name = common.name
    this._waitTimeoutMs = common.waitTimeoutMs
    this._policy = common.policy
    this._ttlMs = common.ttlMs
    this._limit = checkInteger(limitName, common.options[limitName], 1, MAX_LIMIT)
    this._intervalMs = intervalMs(common.options.interval)
    this._intervalUs = this._intervalMs * 1000
    this._kind = KIND[segment]
    this._key = `${store.keyPrefix}:${segment}:{${common.name}}`
    this._sig = `${this._kind}|${this._limit}|${this._intervalUs}` // the options, for the local deny cache
    this._statsKind = segment
    this._statsName = common.name
    this._limitName = limitName
  }

  /** @internal the options shown by `store.limiters()` */
  _statsOptions() {
    return { [this._limitName]: this._limit, intervalMs: this._intervalMs }
  }

  /**
   * This limiter's statistics over every process (see `store.limiters()` and README): decisions
   * admitted and refused (and their weight), near-limit admissions (at most 20 % left after
   * them), waits and wait time, degraded answers, reschedules. On a RedisStore, counts of the
   * last few seconds of other processes arrive with their next flush.
   */
  stats() {
    return this._store._statsOf(this._statsKind, this._statsName)
  }

  /** @internal counts one decision of a take */
  _count(d, weight) {
    const book = this._store._stats
    if (book !== null) book.decision(this, d.allowed, weight, d.remaining <= this._limit * 0.2, d.degraded)
  }

  /** The limiter's name. */
  get name() {
    return this._name
  }
  /** Units admitted per interval. */
  get limit() {
    return this._limit
  }
  /** The interval, ms. */
  get intervalMs() {
    return this._intervalMs
  }

  _checkWeight(weight, name = 'weight') {
    checkInteger(name, weight, 0, this._limit, (m) =>
      invalidArgument(`${m} (a weight above the limit can never be admitted)`),
    )
    return weight
  }

  /** @internal one call: resolves with a Decision (plus `_waitUs` for reservations) */
  _call(weight, maxWaitUs, count = false) {
    return this._store._call(LIMIT, new LIMIT.Call(this, weight, maxWaitUs, count))
  }

  /** @internal the decision at `out[o..o+4]`; `degraded`: answered without Redis */
  _decision(out, o, degraded = false) {
    const retryUs = out[o + 2]
    return {
      allowed: out[o] === 1,
      limit: this._limit,
      remaining: out[o + 1],
      retryAfterMs: retryUs > 0 ? Math.ceil(retryUs / 1000) : 0,
      resetAfterMs: out[o + 3] > 0 ? Math.ceil(out[o + 3] / 1000) : 0,
      degraded,
    }
  }

  /**
   * One decision, no waiting: charges `weight` (default 1) only if it is admitted now.
   * Rejects with ERR_INVALID_ARGUMENT for a weight that is not an integer in [0, limit].
   */
  check(weight = 1) {
    try {
      this._checkWeight(weight)
    } catch (err) {
      return Promise.reject(err)
    }
    // counted where the decision is made: no extra promise per call
    return this._call(weight, 0, true)
  }

  /** The decision a call of weight 1 would get now, without charging anything. */
  async peek() {
    return this._call(1, PEEK)
  }

  /**
   * @internal gives back `weight` charged by decision `d` of a call made at `atMs`, read with
   * `elapsedMs(store)` when the call was made. A counter's refund is skipped when the window
   * charged may be over by the time it lands (it would free room in the next window): that
   * admits less, never more. The window is the one the server charged: its `resetAfterMs`,
   * against the time elapsed since on a monotonic clock, which no step of the process's
   * wall clock moves.
   */
  _refund(weight, d, atMs) {
    if (d.degraded) return Promise.resolve(false)
    if (this._kind !== KIND.leaky && elapsedMs(this._store) + REFUND_MARGIN_MS >= atMs + d.resetAfterMs) {
      return Promise.resolve(false)
    }
    return this._call(-weight, ADJUST).then(() => true)
  }

  /** Forgets everything this limiter has counted (and ends a block). */
  async reset() {
    await this._call(0, RESET)
  }

  /**
   * Upstream back-pressure (an API answered 429 with Retry-After): nobody is admitted on
   * this limiter for the next `ms`, or as long as `{ retryAfter }` (the header's value) says,
   * in any process; its counts are kept. Takes and peeks are refused with `remaining: 0` and a
   * `retryAfterMs` no earlier than the block's end; a longer block already in place is kept.
   * Resolves once the store recorded it (at once for a Retry-After of 0 or a past date).
   */
  async block(arg) {
    const ms = blockMs(this._store, arg)
    if (ms > 0) await this._call(ms * 1000, BLOCK)
  }

  /** @internal whether waiting happens by reserving a future slot (leaky, points) */
  get _reserves() {
    return this._kind === KIND.leaky
  }

  /**
   * Runs `fn` when `weight` (default 1) is admitted, waiting up to `waitTimeoutMs` for it.
   * Over the limit after that: OverLimitError (policy 'raise') or resolves undefined without
   * running `fn` (policy 'skip'). `signal` aborts the wait (ERR_ABORTED).
   */
  async withinLimit(fn, options) {
    if (typeof fn !== 'function') throw invalidArgument('fn must be a function')
    const { weight = 1, signal } = withinOptions(options, ['weight', 'signal'])
    this._checkWeight(weight)
    checkSignal(signal)
    if (!(await this._admit(weight, signal))) return undefined
    return fn()
  }

  /** @internal waits for `weight`; true when admitted, false when skipped */
  async _admit(weight, signal) {
    const store = this._store
    const start = nowMs(store)
    const deadline = start + this._waitTimeoutMs
    let waited = false
    for (;;) {
      const left = Math.max(0, deadline - nowMs(store))
      const d = await this._call(weight, this._reserves ? left * 1000 : 0)
      if (d.allowed) {
        if (d.retryAfterMs > 0) {
          try {
            await sleep(store, d.retryAfterMs, signal)
          } catch (err) {
            // give the reserved slot back; if that fails the charge stays (admits less, never more)
            await this._call(-weight, ADJUST).catch(() => {})
            throw err
          }
          waited = true
        }
        this._count(d, weight)
        if (waited && store._stats !== null) store._stats.waited(this, nowMs(store) - start)
        return true
      }
      if (this._reserves || d.retryAfterMs > deadline - nowMs(store)) {
        this._count(d, weight)
        if (this._policy === 'skip') return false
        throw overLimit(this, d.retryAfterMs)
      }
      await sleep(store, d.retryAfterMs, signal)
      waited = true
    }
  }
}

/** At most `limit` per calendar-aligned interval (UTC second, minute, hour, day, or ms). */
class BucketLimiter extends RateLimiter {
  constructor(store, options) {
    super(store, options, 'bucket', ['limit', 'interval'], 'limit')
  }
}

/** At most `limit` per interval that starts at the first call after the previous one ended. */
class WindowLimiter extends RateLimiter {
  constructor(store, options) {
    super(store, options, 'window', ['limit', 'interval'], 'limit')
  }
}

/**
 * A burst of `limit`, then one every `interval / limit`, exactly. Waiters in `withinLimit`
 * reserve their own future slot, in arrival order, so none of them starves.
 */
class LeakyLimiter extends RateLimiter {
  constructor(store, options) {
    super(store, options, 'leaky', ['limit', 'interval'], 'limit')
  }
}

/**
 * A budget of `points`, refilled continuously at `points` per interval, for APIs that cost a
 * variable number of points per call. `withinLimit` charges an estimate up front; the
 * function reports the real cost through its handle and the difference is settled after.
 */
class PointsLimiter extends RateLimiter {
  constructor(store, options) {
    super(store, options, 'points', ['points', 'interval'], 'points')
  }

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
    const o = withinOptions(options, ['estimate', 'weight', 'signal'])
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
      if (actual !== null && actual !== estimate) await this._call(actual - estimate, ADJUST)
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
  limiterOptions,
  checkInteger,
  checkBlockMs,
  blockMs,
  checkSignal,
  withinOptions,
  sleep,
  nowMs,
  elapsedMs,
  overLimit,
  aborted,
  MAX_LIMIT,
  MAX_MS,
}
