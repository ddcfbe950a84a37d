'use strict'

// The decision of an HTTP door, shared by sluice/express and sluice/fastify: a request's key
// and weight, the limiter (or limiters) deciding it, made once per key in a cache bounded by
// bytes, the outcome each kind's decision gives (its windows' remaining and reset), and the
// refund skipFailedRequests / skipSuccessfulRequests ask for. The adapters only read a
// request and write a response; options are lib/http/options.js, keys and counter names
// lib/http/key.js, header formats lib/http/headers.js.

const { BucketLimiter, WindowLimiter, LeakyLimiter, PointsLimiter, elapsedMs } = require('../limiters')
const { SlidingWindowLimiter } = require('../windows')
const { DistributedPacer, PacerComposite } = require('../pacer')
const { SluiceError, invalidConfig, invalidArgument } = require('../errors')
const { checkIdentifier, policyNames, MAX_LIMIT } = require('./options')
const { keyId, nameOf, ipKey } = require('./key')
const { headers } = require('./headers')

/** Store failures `passOnStoreError` lets through. */
const STORE_FAILURES = new Set(['ERR_STORE_UNAVAILABLE', 'ERR_TIMEOUT', 'ERR_STORE_OOM'])
/**
 * What a cached limiter costs, bytes, beyond its strings (2 bytes a character): the cache
 * entry, and each limiter object. Measured with --expose-gc (10,000 entries, keys of 12 to
 * 100 bytes): 360-750 bytes an entry of one window with its strings, 800-1,100 of two; the
 * estimate is 5-45 % above that, never below.
 */
const ENTRY_BYTES = 200
const LIMITER_BYTES = 600
/** @internal where a middleware or hook keeps its Door (for tests and tools) */
const DOOR = Symbol.for('sluice.door')

/**
 * One door: decides a request (`decide`), describes the outcome in headers (`headers`) and
 * refunds it when asked to skip failed or successful requests.
 */
class Door {
  constructor(config) {
    this.config = config
    /** cache key -> { limiter, bytes }, oldest first (see _limiterFor) */
    this._limiters = new Map()
    this._cacheBytes = 0
    checkIdentifier(config)
  }

  /** @internal what the limiter cache holds, bytes (an estimate; at most `cacheBytes`) */
  get cacheBytes() {
    return this._cacheBytes
  }

  /** Forgets what was counted for `key`. */
  async resetKey(key) {
    const c = this.config
    if (c.windows === null) throw invalidConfig('resetKey needs the door to make its limiters (not limiter(req))')
    if (c.algorithm === 'gcra') throw invalidConfig("resetKey is not available with algorithm 'gcra'")
    const limiter = this._make(keyId(String(key)), c.limitFn ? 1 : null)
    await Promise.all((Array.isArray(limiter) ? limiter : [limiter]).map((l) => l.reset()))
  }

  /** Now, ms, on the store's clock. */
  now() {
    const clock = this.config.store.clock
    return clock ? clock.now() : Date.now()
  }

  /**
   * @internal `at` (read with now(), just before a decision) on the clock refunds measure
   * elapsed time with (`elapsedMs`: monotonic), so a refund is tied to the window the server
   * charged even if the wall clock steps before it lands (issue 24)
   */
  elapsedAt(at) {
    return elapsedMs(this.config.store) - (this.now() - at)
  }

  /**
   * @internal the limiter of a key (known by `id`, keyId's) and limit, made once. The cache
   * holds at most `cacheBytes` (the oldest entries go first). Its keys are the id, or with
   * `limit(req)`, `<limit>:<id>`: the limit's digits end at the first `:`, so no key can be
   * read as another limit's.
   */
  _limiterFor(id, limit) {
    const cached = this._limiters.get(limit === null ? id : `${limit}:${id}`)
    if (cached !== undefined) return cached.limiter
    // a copy: a key cut from a larger string (a body, a header) would keep all of it alive
    id = id.split('').join('')
    const cacheKey = limit === null ? id : `${limit}:${id}`
    const limiter = this._make(id, limit)
    const made = Array.isArray(limiter) ? limiter : limiter instanceof PacerComposite ? limiter._leaves : [limiter]
    const bytes = ENTRY_BYTES + 2 * cacheKey.length + made.length * (LIMITER_BYTES + 2 * nameLength(made[0]))
    const max = this.config.cacheBytes
    if (bytes > max) return limiter
    while (this._cacheBytes + bytes > max) {
      const [oldest, entry] = this._limiters.entries().next().value
      this._limiters.delete(oldest)
      this._cacheBytes -= entry.bytes
    }
    this._limiters.set(cacheKey, { limiter, bytes })
    this._cacheBytes += bytes
    return limiter
  }

  /** @internal the limiter (or limiters, one per window) of a key known by `id` and a limit */
  _make(id, limit) {
    const c = this.config
    const windows = c.windows.map((w) => ({ ...w, limit: w.limit === null ? limit : w.limit }))
    const name = nameOf(c.counter, id)
    const store = c.store
    switch (c.algorithm) {
      case 'sliding':
        return new SlidingWindowLimiter(store, {
          name,
          windows: windows.map((w) => ({ limit: w.limit, intervalMs: w.windowMs })),
        })
      case 'gcra': {
        const pacers = windows.map(
          (w, i) =>
            new DistributedPacer(store, {
              // a pacer's key may hold any character: `.` is in no counter name
              key: windows.length === 1 ? name : `${name}.${i}`,
              qps: (w.limit * 1000) / w.windowMs,
              maxBurst: w.limit,
            }),
        )
        return pacers.length === 1 ? pacers[0] : new PacerComposite(pacers)
      }
      default: {
        const Kind = c.algorithm === 'fixed' ? BucketLimiter : c.algorithm === 'window' ? WindowLimiter : LeakyLimiter
        const made = windows.map(
          (w, i) =>
            new Kind(store, {
              // `_<window>`: a second `_`, so never the name of one window of another key
              name: windows.length === 1 ? name : `${name}_${i}`,
              limit: w.limit,
              interval: w.windowMs,
              waitTimeoutMs: 0,
            }),
        )
        return made.length === 1 ? made[0] : made
      }
    }
  }

  /**
   * The outcome of a request, or null when it is skipped: `{ allowed, degraded, key,
   * weight, windows: [{ name, limit, windowMs, remaining, resetMs }], main, retryAfterMs,
   * refund }` (`main`: the window the single-window headers describe, the one with fewest
   * remaining; `refund()`: gives the charge back, for skipFailedRequests and the like).
   * A key of more than 1 MiB rejects with ERR_INVALID_ARGUMENT, before anything is charged.
   */
  async decide(req, res) {
    const c = this.config
    if (c.skip && (await c.skip(req, res))) return null
    const raw = c.keyGenerator ? await c.keyGenerator(req, res) : ipKey(req.ip, c.ipv6Subnet)
    if ((typeof raw !== 'string' && typeof raw !== 'number') || raw === '') {
      throw invalidArgument(`keyGenerator must return a non-empty string, got ${describe(raw)}`)
    }
    const key = String(raw)
    const id = keyId(key)
    let weight = 1
    if (c.cost) {
      weight = await c.cost(req, res)
      if (typeof weight !== 'number' || !Number.isInteger(weight) || weight < 0 || weight > MAX_LIMIT) {
        throw invalidArgument(`cost must return an integer in [0, ${MAX_LIMIT}], got ${describe(weight)}`)
      }
    }
    const at = this.now()
    if (c.limiter) return this._custom(await c.limiter(req, res), key, weight, at)
    let limit = null
    if (c.limitFn) {
      limit = await c.limitFn(req, res)
      if (typeof limit !== 'number' || !Number.isInteger(limit) || limit < 1 || limit > MAX_LIMIT) {
        throw invalidArgument(`limit(req) must return an integer in [1, ${MAX_LIMIT}], got ${describe(limit)}`)
      }
    }
    const limiter = this._limiterFor(id, limit)
    const windows = c.windows.map((w) => ({
      name: w.name,
      limit: w.limit === null ? limit : w.limit,
      windowMs: w.windowMs,
    }))
    if (weight > Math.min(...windows.map((w) => w.limit))) {
      // never admitted: refused without a store call
      for (const w of windows) Object.assign(w, { remaining: 0, resetMs: w.windowMs })
      return outcome(key, weight, windows, false, false, Math.max(...windows.map((w) => w.windowMs)), null, at)
    }
    return this._check(limiter, key, weight, windows, at)
  }

  /** @internal the outcome of the door's own limiter(s) for a request (algorithm and windows of the config) */
  async _check(limiter, key, weight, windows, at) {
    switch (this.config.algorithm) {
      case 'sliding': {
        const d = await limiter.check(weight)
        windows.forEach((w, i) => fromSliding(w, d.windows[i]))
        return outcome(key, weight, windows, d.allowed, d.degraded, d.retryAfterMs, null, at)
      }
      case 'gcra': {
        const o = await limiter.rateLimit(weight)
        const allowed = o.delayMs === 0
        const marks = windows.length === 1 ? [o.watermark] : o.watermarks
        windows.forEach((w, i) => fromGcra(w, marks[i], weight, allowed, o.delayMs))
        return outcome(key, weight, windows, allowed, o.degraded, o.delayMs, null, at)
      }
      default: {
        if (Array.isArray(limiter)) return this._chargeEach(limiter, key, weight, windows, at)
        // one counter: the common case, kept short (the weight is checked: straight to the
        // store), and counted in the store's statistics as check() counts
        const d = await limiter._call(weight, 0, true)
        fromDecision(windows[0], d)
        const refund = this._refundOf(limiter, weight, d, at)
        return outcome(key, weight, windows, d.allowed, d.degraded, d.retryAfterMs, refund, at)
      }
    }
  }

  /**
   * @internal several counters (fixed, window, leaky with `limits`), all or nothing: each
   * window is charged on its own, and when one refuses, those that admitted give their charge
   * back. Not atomic: a concurrent request can be refused by a charge about to be refunded
   * (issue 25 item 4 replaces this with one all-or-nothing store call).
   */
  async _chargeEach(limiters, key, weight, windows, at) {
    const c = this.config
    const decisions = await Promise.all(limiters.map((l) => l.check(weight)))
    const allowed = decisions.every((d) => d.allowed)
    let retryAfterMs = 0
    decisions.forEach((d, i) => {
      fromDecision(windows[i], d)
      if (!d.allowed) retryAfterMs = Math.max(retryAfterMs, d.retryAfterMs)
    })
    const degraded = decisions.some((d) => d.degraded)
    const atE = this.elapsedAt(at)
    if (!allowed && weight > 0) {
      // all or nothing: the windows that admitted give their charge back
      await Promise.all(
        decisions.map((d, i) => {
          if (!d.allowed) return null
          windows[i].remaining = Math.min(windows[i].limit, d.remaining + weight)
          return limiters[i]._refund(weight, d, atE)
        }),
      )
    }
    const refund =
      allowed && weight > 0 && c.refunds
        ? () => Promise.all(limiters.map((l, i) => l._refund(weight, decisions[i], atE)))
        : null
    return outcome(key, weight, windows, allowed, degraded, retryAfterMs, refund, at)
  }

  /**
   * @internal what gives an admitted counter decision `d` back, when skipFailedRequests or
   * skipSuccessfulRequests ask (else null), tied to the window the server charged: time is
   * measured from `at` on the monotonic clock (issue 24)
   */
  _refundOf(limiter, weight, d, at) {
    if (!d.allowed || weight === 0 || !this.config.refunds) return null
    const atE = this.elapsedAt(at)
    return () => limiter._refund(weight, d, atE)
  }

  /** @internal the outcome of a limiter given by `limiter(req)` (null: not limited) */
  async _custom(limiter, key, weight, at) {
    const c = this.config
    if (limiter === null || limiter === undefined) return null
    if (limiter instanceof DistributedPacer || limiter instanceof PacerComposite) {
      // a window per pacer (a composite's members, nested ones included)
      const pacers = limiter instanceof DistributedPacer ? [limiter] : limiter._leaves
      if (pacers.length === 0) return null // a composite of no pacers limits nothing
      const o = await limiter.rateLimit(weight)
      const allowed = o.delayMs === 0
      const marks = limiter instanceof DistributedPacer ? [o.watermark] : o.watermarks
      const windows = pacers.map((p, i) => pacerWindow(p, marks[i], weight, allowed, o.delayMs))
      return outcome(key, weight, policyNames(windows, c.identifier), allowed, o.degraded, o.delayMs, null, at)
    }
    if (limiter instanceof SlidingWindowLimiter) {
      if (c.skipFailedRequests || c.skipSuccessfulRequests) throw noRefund()
      const d = await limiter.check(weight)
      const windows = limiter.windows.map((w, i) =>
        fromSliding({ name: '', limit: w.limit, windowMs: w.intervalMs }, d.windows[i]),
      )
      return outcome(key, weight, policyNames(windows, c.identifier), d.allowed, d.degraded, d.retryAfterMs, null, at)
    }
    if (
      limiter instanceof BucketLimiter ||
      limiter instanceof WindowLimiter ||
      limiter instanceof LeakyLimiter ||
      limiter instanceof PointsLimiter
    ) {
      const d = await limiter.check(weight)
      const w = fromDecision({ name: '', limit: limiter.limit, windowMs: limiter.intervalMs }, d)
      const refund = this._refundOf(limiter, weight, d, at)
      return outcome(key, weight, policyNames([w], c.identifier), d.allowed, d.degraded, d.retryAfterMs, refund, at)
    }
    throw invalidConfig(
      'limiter(req) must return a Bucket/Window/Leaky/Points/SlidingWindow limiter, a DistributedPacer, a PacerComposite or null',
    )
  }

  /**
   * The headers of an outcome, as [name, value, append] (append: a list field other doors
   * may add to). `Retry-After` on every refusal, never before the reset it reports.
   */
  headers(o) {
    return headers(o, this.config.legacyHeaders, this.config.standardHeaders)
  }

  /** `req.rateLimit`: the window the single-window headers describe */
  info(o) {
    const main = o.windows[o.main]
    return {
      limit: main.limit,
      used: Math.max(0, main.limit - main.remaining),
      remaining: main.remaining,
      resetTime: new Date(o.at + main.resetMs),
      degraded: o.degraded,
      key: o.key,
    }
  }

  /**
   * The status of a refusal: `downStatusCode` (503) when it was refused for want of Redis
   * (whenDown 'deny'), else `statusCode` (429; whenDown 'local' refuses by a real count).
   */
  status(o) {
    return this.unavailable(o) ? this.config.downStatusCode : this.config.statusCode
  }

  /** Whether a refusal is for want of Redis (whenDown 'deny'), not for a count. */
  unavailable(o) {
    return o.degraded && this.config.store.whenDown === 'deny'
  }

  /** Whether a store failure lets the request through (passOnStoreError). */
  passes(err) {
    return this.config.passOnStoreError && err instanceof SluiceError && STORE_FAILURES.has(err.code)
  }

  /**
   * Gives the charge of `o` back once the response ends, when skipFailedRequests or
   * skipSuccessfulRequests asks (`raw`: the node response; a response closed before it
   * finished counts as failed).
   */
  settleAfter(o, req, res, raw) {
    const c = this.config
    if (o.refund === null || (!c.skipFailedRequests && !c.skipSuccessfulRequests)) return
    let settled = false
    const settle = (finished) => {
      if (settled) return
      settled = true
      let ok = false
      try {
        ok = finished && (c.requestWasSuccessful ? c.requestWasSuccessful(req, res) : raw.statusCode < 400)
      } catch {
        ok = false // a requestWasSuccessful that throws: the request did not succeed
      }
      if (ok ? c.skipSuccessfulRequests : c.skipFailedRequests) o.refund().catch(() => {})
    }
    raw.once('finish', () => settle(true))
    raw.once('close', () => settle(raw.writableFinished))
  }
}

// How each kind's decision describes a door window `w` ({ name, limit, windowMs }): its
// `remaining` and `resetMs` (ms from the decision to the reset the headers report). Counters
// and sliding windows give both in their Decision; a pacer gives only its delay and its
// bucket level before the call, so its remaining and reset are derived here. These move into
// each kind's file with the kind registry ("how it describes itself to HTTP headers", issue
// 25 item 1).

/** A counter's Decision (bucket, window, leaky, points), as the store answered it. */
function fromDecision(w, d) {
  w.remaining = d.remaining
  w.resetMs = d.allowed ? d.resetAfterMs : d.retryAfterMs
  return w
}

/**
 * A sliding window's part `dw` of its Decision. It names no reset: until it has room
 * (refused), else its length at most.
 */
function fromSliding(w, dw) {
  w.remaining = dw.remaining
  w.resetMs = dw.retryAfterMs > 0 ? dw.retryAfterMs : w.windowMs
  return w
}

/**
 * A pacer's part of a 'gcra' door's rateLimit() outcome (the pacer of `limit` per
 * `windowMs`, maxBurst `limit`): `mark` is its bucket level before the call. Remaining is
 * what the level leaves after an admitted charge; the reset, when the bucket is empty again
 * (refused: when a retry would be admitted, the delay).
 */
function fromGcra(w, mark, weight, allowed, delayMs) {
  const qps = (w.limit * 1000) / w.windowMs
  const level = Math.min(w.limit, mark + (allowed ? weight : 0))
  w.remaining = Math.max(0, Math.floor(w.limit - level))
  w.resetMs = allowed ? Math.ceil((level / qps) * 1000) : delayMs
  return w
}

/**
 * The window of a pacer `p` given by `limiter(req)`: its maxBurst (rounded down: a policy's
 * quota is an Integer) per the time its bucket takes to drain; the reset is the delay.
 */
function pacerWindow(p, mark, weight, allowed, delayMs) {
  return {
    name: '',
    limit: Math.floor(p._maxBurst),
    windowMs: Math.ceil((p._maxBurst / p._qps) * 1000) || 1000,
    remaining: Math.max(0, Math.floor(p._maxBurst - mark - (allowed ? weight : 0))),
    resetMs: delayMs,
  }
}

const noRefund = () =>
  invalidConfig('skipFailedRequests and skipSuccessfulRequests need a Bucket, Window, Leaky or Points limiter')

function outcome(key, weight, windows, allowed, degraded, retryAfterMs, refund, at) {
  let main = 0
  for (let i = 1; i < windows.length; i++) {
    const w = windows[i]
    const m = windows[main]
    if (w.remaining < m.remaining || (w.remaining === m.remaining && w.resetMs > m.resetMs)) main = i
  }
  return { allowed, degraded, key, weight, windows, main, retryAfterMs, refund, at }
}

function describe(value) {
  if (typeof value === 'string') return JSON.stringify(value)
  if (typeof value === 'number' || typeof value === 'boolean' || value === null || value === undefined)
    return String(value)
  return typeof value
}

/** The characters of a made limiter's name (or pacer key): what its strings cost. */
function nameLength(limiter) {
  return limiter instanceof DistributedPacer ? limiter.key.length : limiter.name.length
}

module.exports = { Door, DOOR }
