// @ts-check
'use strict'

// The decision of an HTTP door, shared by sluice/express and sluice/fastify: a request's key
// and weight, the limiter (or limiters) deciding it, made once per key in a cache bounded by
// bytes, and the refund skipFailedRequests / skipSuccessfulRequests ask for. What each kind
// makes for a door key and how its decision reads as windows are the kind's (`door` in
// lib/kinds/<kind>.js, found through the registry). A request and a response are reached only
// through the adapter's accessors (`config.access`, lib/doors/http/adapter.d.ts `HttpAccess`);
// options are lib/doors/http/options.js, keys and counter names lib/doors/http/key.js, header
// formats lib/doors/http/headers.js, the outcome of a decision and the door's statistics (one
// limiter over all its clients) lib/doors/http/outcome.js, the refund after the response and
// the whole answer of a request lib/doors/http/respond.js.

const classes = require('../../classes')
const { classEntry } = require('../../kinds')
const { elapsedMs } = require('../../classes/base')
const { SluiceError, invalidConfig, invalidArgument, describeValue } = require('../../base/errors')
const {
  checkIdentifier,
  policyNames,
  algorithmOf,
  acceptedText,
  refundableText,
  MAX_LIMIT,
  MAX_WINDOW_MS,
} = require('./options')
const { keyId, nameOf, checkedKey } = require('./key')
const { ruleOf, denied, banAfter, tallyOf, ruledWindows, copyWindow, ruledEvent } = require('./rules')
const { headers } = require('./headers')
const { outcome, RateLimitInfo, doorOwner, uncounted, countOutcome } = require('./outcome')
const { settleAfter, accessOf } = require('./respond')
const { OP } = require('../../kinds/limit')
const { backoff } = require('./exceeding')

/** The limit kind's backoff counts (a window's: lib/kinds/limit.js) and peek. */
const OP_PEEK = OP.peek

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

/** @typedef {import('./adapter').HttpDoor} HttpDoor what an adapter calls on a door (lib/doors/http/adapter.d.ts) */
/** @typedef {import('../../kinds/contract').DoorSite} DoorSite what a kind's door section calls on it */

/**
 * One door: decides a request (`decide`), describes the outcome in headers (`headers`) and
 * refunds it when asked to skip failed or successful requests.
 * @implements {HttpDoor}
 * @implements {DoorSite}
 */
class Door {
  constructor(config) {
    this.config = config
    /** cache key -> { limiter, bytes }, oldest first (see _limiterFor) */
    this._limiters = new Map()
    this._cacheBytes = 0
    /**
     * Whether the door counts refused requests too, as the peers' stores do (every request
     * charged: `req.rateLimit.used` goes past the limit, a `createRateLimit` read sees the
     * hooks' refusals), on a door of one 'window' (countsEvery). Not on a store with
     * `localDenyCache`: there a key Redis refused is refused locally with no round trip, which
     * counting each refusal would undo; nor with `ban`, whose tally counts the refusals in the
     * decision's own script call (lib/kinds/limit.js). Either way the same requests are admitted.
     */
    this.countsAll = !config.store._denyCache && config.ban === null
    /** the door as one limiter in statistics and the registry (null: limiter(req)'s count) */
    this._owner = doorOwner(config)
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
    if (algorithmOf(c).resettable === false) {
      throw invalidConfig(`resetKey is not available with algorithm '${c.algorithm}'`)
    }
    if (c.windowFn) throw invalidConfig('resetKey needs the door to know its window: not with a windowMs function')
    const limiter = this._make(keyId(String(key)), c.limitFn ? 1 : null, null)
    await Promise.all((Array.isArray(limiter) ? limiter : [limiter]).map((l) => l.reset()))
  }

  /**
   * What is counted for `key` (express-rate-limit's `getKey`): `{ totalHits, resetTime }`, or
   * undefined when nothing is. One window of a fixed limit and length, counted by a limiter
   * that can peek (fixed, window, leaky); nothing is charged.
   */
  async getKey(key) {
    const c = this.config
    if (c.windows === null || c.windows.length !== 1 || c.limitFn || c.windowFn) {
      throw invalidConfig('getKey needs one window of a fixed limit and length')
    }
    const limit = c.windows[0].limit
    if (limit === 0) return undefined
    if (this.countsAll && this.countsEvery()) {
      // every request counted (refusals too): the count itself, as the peer's store holds it
      const d = await this._limiterFor(keyId(String(key)), null, null)._countAt(MAX_LIMIT, OP_PEEK)
      const used = d.allowed ? MAX_LIMIT - d.remaining : limit
      if (used === 0) return undefined
      return { totalHits: used, resetTime: new Date(this.now() + (d.allowed ? d.resetAfterMs : d.retryAfterMs)) }
    }
    const limiter = this._make(keyId(String(key)), null, null)
    if (typeof limiter.peek !== 'function')
      throw invalidConfig(`getKey is not available with algorithm '${c.algorithm}'`)
    const d = await limiter.peek()
    if (d.allowed && d.remaining >= limit) return undefined
    return {
      totalHits: limit - d.remaining,
      resetTime: new Date(this.now() + (d.allowed ? d.resetAfterMs : d.retryAfterMs)),
    }
  }

  /** Now, ms, on the store's clock. */
  now() {
    const clock = this.config.store.clock
    return clock ? clock.now() : Date.now()
  }

  /**
   * @internal `at` (read with now(), just before a decision) on the clock refunds measure
   * elapsed time with (`elapsedMs`: monotonic), so a refund is tied to the window the server
   * charged even if the wall clock steps before it lands
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
  _limiterFor(id, limit, windowMs, ruled = null) {
    const dynamic = limit !== null || windowMs !== null
    // with a windowMs function: `<limit>:<windowMs>:<id>` (every entry of the door has that form);
    // windows a rule gives (store.rules): `r<limit>/<windowMs>,...:<id>` (no digit first)
    const rkey = ruled === null ? '' : `r${ruled.map((w) => `${w.limit}/${w.windowMs}`).join(',')}:`
    const cacheOf = (id) => rkey + (!dynamic ? id : windowMs === null ? `${limit}:${id}` : `${limit}:${windowMs}:${id}`)
    const cached = this._limiters.get(cacheOf(id))
    if (cached !== undefined) return cached.limiter
    // a copy: a key cut from a larger string (a body, a header) would keep all of it alive
    id = id.split('').join('')
    const cacheKey = cacheOf(id)
    const limiter = this._make(id, limit, windowMs, ruled)
    const members = algorithmOf(this.config).members
    const made = members ? members(limiter) : Array.isArray(limiter) ? limiter : [limiter]
    const bytes = ENTRY_BYTES + 2 * cacheKey.length + made.length * (LIMITER_BYTES + 2 * nameLength(made[0]))
    const max = this.config.cacheBytes
    if (bytes > max) return limiter
    while (this._cacheBytes + bytes > max) {
      const [oldest, old] = this._limiters.entries().next().value
      this._limiters.delete(oldest)
      this._cacheBytes -= old.bytes
      // an evicted counter's lease ends: what it holds goes back
      if (old.limiter._leased) old.limiter._leased.end()
    }
    this._limiters.set(cacheKey, { limiter, bytes })
    this._cacheBytes += bytes
    return limiter
  }

  /**
   * @internal the limiter (or limiters, one per window) of a key known by `id`, a limit and a
   * window; out of statistics (the door counts each request as itself: see lib/doors/http/outcome.js)
   */
  _make(id, limit, windowMs, ruled = null) {
    const c = this.config
    const windows =
      ruled ??
      c.windows.map((w) => ({
        limit: w.limit === null ? limit : w.limit,
        windowMs: w.windowMs === null ? windowMs : w.windowMs,
      }))
    const algorithm = algorithmOf(c)
    const limiter = algorithm.make(classes, c.store, nameOf(c.counter, id), windows, c.lease)
    uncounted(algorithm.members ? algorithm.members(limiter) : Array.isArray(limiter) ? limiter : [limiter])
    return limiter
  }

  /**
   * The outcome of a request, or null when it is skipped: `{ allowed, degraded, key,
   * weight, windows: [{ name, limit, windowMs, remaining, resetMs, used? }], main, retryAfterMs,
   * refund }` (`main`: the window the single-window headers describe, the one with fewest
   * remaining; `refund()`: gives the charge back, for skipFailedRequests and the like).
   * A key of more than 1 MiB rejects with ERR_INVALID_ARGUMENT, before anything is charged.
   * `known`: the key, already known (skip and allowList not asked); `charge` false: what the
   * request would get, nothing charged (fastify's createRateLimit `{ increment: false }`);
   * `every`: count every call, refusals too, as @fastify/rate-limit's store (see _every).
   * A request charged on the door's own limiters counts once in the door's statistics.
   */
  async decide(req, res, known = null, charge = true, every = false) {
    const o = await this._decide(req, res, known, charge, every)
    if (charge && o !== null && this._owner !== null) {
      countOutcome(this.config.store, this._owner, o)
      if (o.reason !== undefined) ruledEvent(this.config.store, this._owner, o.reason)
    }
    return o
  }

  /** @internal decide() but the count */
  async _decide(req, res, known, charge, every) {
    const c = this.config
    let key = known
    if (key === null) {
      if (c.skip && (await c.skip(req, res))) return null
      let raw = this.rawKeyOf(req, res)
      if (raw !== null && typeof raw === 'object' && typeof raw.then === 'function') raw = await raw
      key = checkedKey(raw)
      // allowList sees the key as keyGenerator gave it (a number stays one, as in the peer)
      if (c.allowList !== null && (await this.allowListed(req, raw))) return null
    }
    const rule = ruleOf(this, key)
    if (rule !== undefined && rule.access === 'allow') return null // let through, nothing charged
    if (rule !== undefined && rule.access === 'deny') return denied(this, key)
    const shadow = (rule !== undefined && rule.mode !== undefined ? rule.mode : c.mode) === 'shadow'
    const o = await this._decideKey(req, res, key, charge && !shadow ? every : false, charge, rule, shadow)
    if (!shadow && charge && c.ban !== null && o !== null && !o.allowed) return banAfter(this, key, o)
    if (!shadow || o === null || o.allowed) return o
    // shadow: decided as if enforced, the refusal admitted (headers as usual, no 429)
    o.allowed = true
    o.retryAfterMs = 0
    o.reason = 'shadow'
    return o
  }

  /** @internal where the refusals of counter `name` are tallied for `ban` (lib/doors/http/rules.js) */
  tallyOf(name) {
    return tallyOf(this, name)
  }

  /** @internal decide() of a request's key, under a rule's limits (`rule`) and mode (`shadow`) */
  async _decideKey(req, res, key, every, charge, rule, shadow) {
    const c = this.config
    const id = keyId(key)
    let weight = 1
    if (c.cost) {
      weight = await c.cost(req, res)
      if (typeof weight !== 'number' || !Number.isInteger(weight) || weight < 0 || weight > MAX_LIMIT) {
        throw invalidArgument(`cost must return an integer in [0, ${MAX_LIMIT}], got ${describeValue(weight)}`)
      }
    }
    const at = this.now()
    if (c.limiter) {
      if (!charge) throw invalidConfig('{ increment: false } needs the door to make its limiters (not limiter(req))')
      return this._custom(await c.limiter(req, res), key, weight, at)
    }
    let limit = null
    if (c.limitFn) {
      limit = await c.limitFn(req, res, key)
      if (typeof limit !== 'number' || !Number.isInteger(limit) || limit < 0 || limit > MAX_LIMIT) {
        throw invalidArgument(`limit(req) must return an integer in [0, ${MAX_LIMIT}], got ${describeValue(limit)}`)
      }
    }
    let windowMs = null
    if (c.windowFn) {
      windowMs = await c.windowFn(req, res, key)
      if (typeof windowMs !== 'number' || !Number.isInteger(windowMs) || windowMs < 1 || windowMs > MAX_WINDOW_MS) {
        throw invalidArgument(
          `windowMs(req) must return whole ms in [1, ${MAX_WINDOW_MS}], got ${describeValue(windowMs)}`,
        )
      }
    }
    let windows = c.windows.map((w) => ({
      name: w.name,
      limit: w.limit === null ? limit : w.limit,
      windowMs: w.windowMs === null ? windowMs : w.windowMs,
    }))
    // a rule's limits (store.rules) instead of the door's: its windows, or its limit and interval
    const ruled = rule === undefined ? null : ruledWindows(windows, rule)
    if (ruled !== null) windows = ruled.map((w, i) => ({ name: windows[i]?.name ?? `${windows[0].name}-${i}`, ...w }))
    const least = Math.min(...windows.map((w) => w.limit))
    if (weight > least || least === 0) {
      // never admitted (a limit of 0 refuses everything): refused without a store call
      for (const w of windows) Object.assign(w, { remaining: 0, resetMs: w.windowMs })
      const o = outcome(key, weight, windows, false, false, Math.max(...windows.map((w) => w.windowMs)), null, at)
      // ban counts these refusals too (max 0 with ban 0 bans at once, as the peer); nothing to block
      return c.exceeding !== null && c.exceeding.ban >= 0 ? c.exceeding.refused(this, null, id, o) : o
    }
    const limiter =
      ruled === null ? this._limiterFor(id, limit, windowMs) : this._limiterFor(id, null, null, ruled.map(copyWindow))
    // shadow mode: no back-off nor ban (a would-be refusal is admitted)
    if (shadow)
      return charge ? this._check(limiter, key, weight, windows, at) : this._peek(limiter, key, weight, windows, at)
    if (charge && c.exceeding !== null && c.exceeding.backsOff && this.countsEvery()) {
      return backoff(this, limiter, key, windows, at)
    }
    const countAll = c.exceeding === null ? this.countsAll : c.exceeding.countsEvery || c.exceeding.backsOff
    if ((every || countAll) && this.countsEvery()) {
      const o = await this._every(limiter, key, windows, at, charge)
      return charge && !o.allowed && c.exceeding !== null ? c.exceeding.refused(this, limiter, id, o) : o
    }
    if (!charge) return this._peek(limiter, key, weight, windows, at)
    const o = await this._check(limiter, key, weight, windows, at)
    return c.exceeding !== null && !o.allowed ? c.exceeding.refused(this, limiter, id, o) : o
  }

  /**
   * The key of a request: `keyGenerator`'s, or the client IP in the adapter's form (a string,
   * or a promise of one when the key is computed asynchronously).
   */
  keyOf(req, res) {
    const raw = this.rawKeyOf(req, res)
    if (raw !== null && typeof raw === 'object' && typeof raw.then === 'function') return raw.then(checkedKey)
    return checkedKey(raw)
  }

  /** @internal the key of a request as keyGenerator (or the default key) answers it, unchecked */
  rawKeyOf(req, res) {
    const c = this.config
    return c.keyGenerator ? c.keyGenerator(req, res) : c.defaultKey(req, res)
  }

  /** Whether `allowList` (@fastify/rate-limit's: keys, or `(req, key)`) exempts the request. */
  async allowListed(req, key) {
    const list = this.config.allowList
    return typeof list === 'function' ? Boolean(await list(req, key)) : list.includes(key)
  }

  /** Whether the door can count every call (_every): one window of algorithm 'window', its own limiters, weight 1. */
  countsEvery() {
    const c = this.config
    return c.algorithm === 'window' && c.windows !== null && c.windows.length === 1 && !c.limiter && !c.cost
  }

  /**
   * @internal a request counted as the peers' stores count it: charged even over the limit, so
   * the window's count tells a window that refused (count > limit: `isExceeded` of a read), how
   * far over it is (`o.exceeded`, `o.banned`) and `req.rateLimit.used`. Refusals are not kept
   * in the deny cache: each goes to the store.
   */
  async _every(limiter, key, windows, at, charge) {
    const c = this.config
    const w = windows[0]
    // counted on the door's own key with a limit no count reaches (the count is in `remaining`);
    // not counted in statistics by that call: they would show its limit for the door's name
    const d = await limiter._countAt(MAX_LIMIT, charge ? 0 : OP_PEEK)
    // refused by the store (a block in place, or whenDown 'deny'): no count to read
    const used = d.allowed ? MAX_LIMIT - d.remaining : null
    const allowed = used !== null && used <= w.limit
    w.remaining = used === null ? 0 : Math.max(0, w.limit - used)
    // what req.rateLimit.used reports: the count, past the limit once requests were refused
    if (used !== null) w.used = used
    w.resetMs = used === 0 ? 0 : d.allowed ? d.resetAfterMs : d.retryAfterMs
    // in statistics as the door's limiter (its name, limit and this decision), as a take is
    if (charge) limiter._count({ allowed, remaining: w.remaining, limit: w.limit, degraded: d.degraded }, 1)
    // a refusal is counted too, so it is given back as well when its response asks (express-
    // rate-limit's skipFailedRequests gives back every failed response's count, a 429's too)
    const refund = used !== null ? this.refundOf(limiter, 1, d, at) : null
    const o = outcome(key, 1, windows, allowed, d.degraded, allowed ? 0 : w.resetMs, refund, at)
    if (used !== null && !allowed) {
      const ban = c.exceeding === null ? -1 : c.exceeding.ban
      o.exceeded = used - w.limit
      o.banned = ban >= 0 && o.exceeded > ban
    }
    return o
  }

  /** @internal what a request of `weight` would get now, nothing charged (one window of a counter) */
  async _peek(limiter, key, weight, windows, at) {
    if (windows.length !== 1 || typeof limiter.peek !== 'function') {
      throw invalidConfig(`{ increment: false } needs one window of algorithm 'fixed', 'window' or 'leaky'`)
    }
    const d = await limiter.peek()
    const w = windows[0]
    w.remaining = d.remaining
    w.resetMs = d.allowed ? d.resetAfterMs : d.retryAfterMs
    return outcome(key, weight, windows, d.allowed, d.degraded, d.retryAfterMs, null, at)
  }

  /** @internal the outcome of the door's own limiter(s) for a request (algorithm and windows of the config) */
  _check(limiter, key, weight, windows, at) {
    return algorithmOf(this.config).check(this, limiter, key, weight, windows, at)
  }

  /**
   * @internal what gives an admitted counter decision `d` back, when skipFailedRequests or
   * skipSuccessfulRequests ask (else null), tied to the window the server charged: time is
   * measured from `at` on the monotonic clock (a wall-clock step does not move it)
   */
  refundOf(limiter, weight, d, at) {
    if (!d.allowed || weight === 0 || !this.config.refunds) return null
    const atE = this.elapsedAt(at)
    return () => limiter._refund(weight, d, atE)
  }

  /** @internal the outcome of a limiter given by `limiter(req)` (null: not limited) */
  async _custom(limiter, key, weight, at) {
    if (limiter === null || limiter === undefined) return null
    const entry = classEntry(classes, limiter, 'door.limiters')
    if (entry === undefined) throw invalidConfig(`limiter(req) must return ${acceptedText()} or null`)
    return entry.check(this, limiter, key, weight, at)
  }

  /**
   * @internal an outcome: `{ allowed, degraded, key, weight, windows, main, retryAfterMs,
   * refund, at }` (`main`: the window with fewest remaining, the one single-window headers
   * describe)
   */
  outcome(key, weight, windows, allowed, degraded, retryAfterMs, refund, at) {
    return outcome(key, weight, windows, allowed, degraded, retryAfterMs, refund, at)
  }

  /** @internal windows of a limiter(req) limiter named for the headers (lib/doors/http/options.js policyNames) */
  named(windows) {
    return policyNames(windows, this.config.identifier)
  }

  /** @internal the error of a limiter(req) limiter that cannot refund while the door is asked to */
  noRefund() {
    return invalidConfig(`skipFailedRequests and skipSuccessfulRequests need a ${refundableText()} limiter`)
  }

  /**
   * The headers of an outcome, as [name, value, append] (append: a list field other doors
   * may add to). `Retry-After` on every refusal, never before the reset it reports.
   */
  headers(o) {
    // a client a rule denies is not rate limited: no limit to describe (a 403 and no headers)
    if (o.reason === 'denied') return []
    const out = headers(o, this.config.legacyHeaders, this.config.standardHeaders, this.config.headerForm)
    return /** @type {[string, string, boolean][]} */ (out)
  }

  /** Writes the headers of an outcome into `res` (the adapter's `access.setHeader`). */
  writeHeaders(o, res) {
    const access = accessOf(this)
    for (const [name, value, append] of this.headers(o)) access.setHeader(res, name, value, append)
  }

  /** `req.rateLimit`: the window the single-window headers describe */
  info(o) {
    const main = o.windows[o.main]
    return new RateLimitInfo(main, o)
  }

  /** Puts `info(o)` on the request under `requestPropertyName` (the adapter's `access.setInfo`). */
  attach(o, req) {
    accessOf(this).setInfo(req, this.config.requestPropertyName, this.info(o))
  }

  /**
   * The status of a refusal: `downStatusCode` (503) when it was refused for want of Redis
   * (whenDown 'deny'), else `statusCode` (429; whenDown 'local' refuses by a real count).
   */
  status(o) {
    if (o.reason === 'denied') return 403
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
   * Gives the charge of `o` back once the response `res` ends (the adapter's `access.onEnd`),
   * when skipFailedRequests or skipSuccessfulRequests ask (lib/doors/http/respond.js).
   */
  settleAfter(o, req, res) {
    settleAfter(this, o, req, res)
  }
}

/** The characters of a made limiter's name (or a pacer's key): what its strings cost. */
function nameLength(limiter) {
  return (limiter.name ?? limiter.key).length
}

module.exports = { Door, DOOR }
