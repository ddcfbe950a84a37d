'use strict'
// What every limiter class shares: the option checks (name, waits, policy, windows), block
// durations, waiting on the store's clock, and `Limiter`, the one-decision limiter over a kind
// (check, peek, reset, block, withinLimit, stats) that the rate limiters and kinds extend.

const {
  SluiceError,
  OverLimitError,
  invalidConfig,
  invalidArgument,
  ownProps,
  describeValue,
  gotValue,
  knownOptions,
} = require('../base/errors')
const { isStore } = require('../store/options')
const { longTimeout } = require('../base/timers')
const { retryAfterMs } = require('../base/retryafter')

const { MAX_NAME_BYTES, isName } = require('../base/names')

/** `name` checked as a name (`what` says whose), else ERR_INVALID_CONFIG. */
function checkName(name, what = 'name') {
  if (!isName(name)) {
    throw invalidConfig(
      `${what} must be a non-empty string of at most ${MAX_NAME_BYTES} bytes (UTF-8) with no lone surrogate, got ${describeValue(name)}`,
    )
  }
  return name
}

const { MAX_LIMIT, MAX_INTERVAL_MS: MAX_MS, MAX_WINDOWS } = require('../store/bounds')
const { storeKey } = require('../store/keys')
const DAY_MS = 86_400_000
const INTERVALS = { second: 1_000, minute: 60_000, hour: 3_600_000, day: DAY_MS }
/** A refund is skipped when its window may end within this margin (latency, clock skew). */
const REFUND_MARGIN_MS = 250

function checkStore(store) {
  if (!isStore(store)) throw invalidConfig('store must be a MemoryStore or a RedisStore')
}

function plainObject(value) {
  return value !== null && typeof value === 'object' && !Array.isArray(value)
}

/** `windows` (1..16 `{ limit, intervalMs }`), checked (ERR_INVALID_CONFIG) and frozen. */
function windowsOption(windows) {
  if (!Array.isArray(windows) || windows.length < 1 || windows.length > MAX_WINDOWS) {
    throw invalidConfig(`windows must be an array of 1..${MAX_WINDOWS} { limit, intervalMs }`)
  }
  // Array.from visits the holes of a sparse array (as undefined), where map skips them
  const checked = Array.from(windows, (w, i) => {
    if (!plainObject(w)) throw invalidConfig(`windows[${i}] must be an object { limit, intervalMs }`)
    w = ownProps(w)
    knownOptions(w, ['limit', 'intervalMs'], 'window', { where: ` in windows[${i}]` })
    return Object.freeze({
      limit: checkInteger(`windows[${i}].limit`, w.limit, 1, MAX_LIMIT),
      intervalMs: checkInteger(`windows[${i}].intervalMs`, w.intervalMs, 1, MAX_MS),
    })
  })
  return Object.freeze(checked)
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
  knownOptions(arg, ['retryAfter'], 'block', { make: invalidArgument })
  const ms = retryAfterMs(ownProps(arg).retryAfter, store ? nowMs(store) : Date.now())
  if (ms > MAX_MS) throw invalidArgument(`retryAfter must be at most ${MAX_MS / DAY_MS} days away`)
  return ms
}

function checkInteger(name, value, min, max, make = invalidConfig) {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) {
    throw make(`${name} must be an integer in [${min}, ${max}], got ${describeValue(value)}`)
  }
  return value
}

/**
 * Validates the options every limiter shares (name, waitTimeoutMs, policy, ttlMs) plus the
 * kind's own, and rejects unknown ones.
 */
/**
 * What every public class checks first (ERR_INVALID_CONFIG): `store` is a store, `options` an
 * object (`options must be an object<shape>`) of `known` keys only (`unknown <what> option`,
 * naming the closest known one) whose `name` is a name (see isName). Returns its own properties (a copy
 * without a prototype: nothing inherited is read).
 */
function classOptions(store, options, known, what, shape = '') {
  checkStore(store)
  if (!plainObject(options)) throw invalidConfig(`options must be an object${shape}`)
  knownOptions(options, known, what)
  const o = ownProps(options)
  checkName(o.name)
  return o
}

function limiterOptions(store, options, own) {
  const o = classOptions(store, options, ['name', 'waitTimeoutMs', 'policy', 'ttlMs', ...own], 'limiter')
  const { name, waitTimeoutMs = 5_000, policy = 'raise', ttlMs = 90 * DAY_MS } = o
  checkInteger('waitTimeoutMs', waitTimeoutMs, 0, MAX_MS)
  if (policy !== 'raise' && policy !== 'skip') {
    throw invalidConfig(`policy must be 'raise' or 'skip', ${gotValue(policy, ['raise', 'skip'])}`)
  }
  checkInteger('ttlMs', ttlMs, 1, MAX_MS)
  return { name, waitTimeoutMs, policy, ttlMs, options: o }
}

/** An interval name or a number of ms, as ms. */
function intervalMs(interval) {
  if (typeof interval === 'string' && Object.hasOwn(INTERVALS, interval)) return INTERVALS[interval]
  if (typeof interval === 'number' && Number.isInteger(interval) && interval >= 1 && interval <= MAX_MS) {
    return interval
  }
  throw invalidConfig(
    `interval must be 'second', 'minute', 'hour', 'day' or whole ms in [1, ${MAX_MS}], ${gotValue(interval, Object.keys(INTERVALS))}`,
  )
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

function overLimit(limiter, retryAfterMs, reason = 'limit') {
  const message =
    reason === 'denied'
      ? `${limiter.name} denies this call (a rule of store.rules)`
      : `over the limit of ${limiter.name}; retry after ${retryAfterMs} ms`
  return new OverLimitError(message, { limiter: limiter.name, retryAfterMs, reason })
}

/** The options of a call (`what`: its name), of `names` only (ERR_INVALID_ARGUMENT). */
function withinOptions(options, names, what) {
  if (options === undefined) return {}
  if (options === null || typeof options !== 'object') throw invalidArgument('options must be an object')
  knownOptions(options, names, what, { make: invalidArgument })
  return options
}

/**
 * What every one-decision limiter shares (the rate limiters of lib/classes/rate.js, and the
 * classes of kind files that hold their own): `check`, `peek`, `reset`, `block`, `withinLimit` and
 * `stats` over its kind's calls, one round trip each (calls of one tick share it), waiting in
 * `withinLimit` up to `waitTimeoutMs`. A subclass gives its store `key` (its kind's segment),
 * `_limit` (the largest weight it can ever admit), and the kind's calls:
 * - `_take(weight, maxWaitUs, count)`: charges `weight` if admitted now (or, when `_reserves`,
 *   by reserving a slot up to `maxWaitUs` ahead); `count`: counted in statistics;
 * - `_op(name, weight)`: 'peek' (weight 1), 'reset', 'block' (weight = µs), 'adjust' (charge
 *   `weight`, negative refunds);
 * - `_refundable(d, atMs)`: whether a refund of decision `d` made at `atMs` still lands in the
 *   window it charged.
 */
class Limiter {
  constructor(store, common, segment) {
    this._store = store
    this._name = common.name
    this._waitTimeoutMs = common.waitTimeoutMs
    this._policy = common.policy
    this._ttlMs = common.ttlMs
    this._storeKey = storeKey(store, segment, common.name)
    this._statsKind = segment
    this._statsName = common.name
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

  /**
   * @internal keeps this limiter out of statistics (`_statsAs` null, lib/store/store.d.ts
   * StatsOwner): an HTTP door's per-client counter, the door counting each request as itself
   * (lib/doors/http/outcome.js). Returns it.
   */
  _uncounted() {
    this._statsAs = null
    return this
  }

  /** @internal counts one decision of a take */
  _count(d, weight) {
    const book = this._store._stats
    if (book !== null) book.decision(this, d.allowed, weight, d.remaining <= d.limit * 0.2, d.degraded)
  }

  /** The limiter's name. */
  get name() {
    return this._name
  }

  _checkWeight(weight, name = 'weight') {
    checkInteger(name, weight, 0, this._limit, (m) =>
      invalidArgument(`${m} (a weight above the limit can never be admitted)`),
    )
    return weight
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
    return this._take(weight, 0, true)
  }

  /** The decision a call of weight 1 would get now, without charging anything. */
  async peek() {
    return this._op('peek', 1)
  }

  /**
   * @internal gives back `weight` charged by decision `d` of a call made at `atMs`, read with
   * `elapsedMs(store)` when the call was made; skipped (false) when it may no longer land in
   * the window charged (it would free room in a later one): that admits less, never more.
   */
  _refund(weight, d, atMs) {
    if (d.degraded || !this._refundable(d, atMs)) return Promise.resolve(false)
    return this._op('adjust', -weight).then(() => true)
  }

  /** Forgets everything this limiter has counted (and ends a block). */
  async reset() {
    await this._op('reset', 0)
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
    if (ms > 0) await this._op('block', ms * 1000)
  }

  /** @internal whether waiting happens by reserving a future slot (leaky, points) */
  get _reserves() {
    return false
  }

  /**
   * Runs `fn` when `weight` (default 1) is admitted, waiting up to `waitTimeoutMs` for it.
   * Over the limit after that: OverLimitError (policy 'raise') or resolves undefined without
   * running `fn` (policy 'skip'). `signal` aborts the wait (ERR_ABORTED).
   */
  async withinLimit(fn, options) {
    if (typeof fn !== 'function') throw invalidArgument('fn must be a function')
    const { weight = 1, signal } = withinOptions(options, ['weight', 'signal'], 'withinLimit')
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
      const d = await this._take(weight, this._reserves ? left * 1000 : 0, false)
      if (d.allowed) {
        if (d.retryAfterMs > 0) {
          try {
            await sleep(store, d.retryAfterMs, signal)
          } catch (err) {
            // give the reserved slot back; if that fails the charge stays (admits less, never more)
            await this._op('adjust', -weight).catch(() => {})
            throw err
          }
          waited = true
        }
        this._count(d, weight)
        if (waited && store._stats !== null) store._stats.waited(this, nowMs(store) - start)
        return true
      }
      if (this._reserves || d.retryAfterMs > deadline - nowMs(store) || d.reason === 'denied') {
        // a denied call was counted where the rule answered it
        if (d.reason !== 'denied') this._count(d, weight)
        if (this._policy === 'skip') return false
        throw overLimit(this, d.retryAfterMs, d.reason)
      }
      await sleep(store, d.retryAfterMs, signal)
      waited = true
    }
  }
}

module.exports = {
  Limiter,
  classOptions,
  limiterOptions,
  windowsOption,
  plainObject,
  checkStore,
  checkInteger,
  checkBlockMs,
  blockMs,
  checkSignal,
  withinOptions,
  intervalMs,
  sleep,
  nowMs,
  elapsedMs,
  overLimit,
  aborted,
  MAX_NAME_BYTES,
  isName,
  checkName,
  describeValue,
  MAX_LIMIT,
  MAX_MS,
  MAX_WINDOWS,
  DAY_MS,
  REFUND_MARGIN_MS,
}
