'use strict'
// DistributedPacer and PacerComposite: pacing and rate-limiting calls across processes. Their
// calls are the pacer kind's (lib/kinds/pacer.js).

const { MemoryStore, RedisStore } = require('../store')
const { invalidConfig, invalidArgument, ownProps, describeValue, knownOptions } = require('../base/errors')
const { blockMs, nowMs } = require('./base')
const { escapeKey, storeKey } = require('../store/keys')
const PACER = require('../kinds/pacer')
const { delay_us: DELAY_US, watermark_before: WATERMARK, size: MEMBER } = PACER.RESULT
const { PacerOutcome, withMarks, fixed2, delayMsOf, admittedAt } = require('./pacer-outcome')
const { modeOption, unruled } = require('./ruled')
const { ruledPacer, ruledComposite, ruledView, entryOf } = require('./pacer-rules')

const MAX_KEY_LENGTH = 512
/** Largest qps or burst; latest start of a slot given back, µs from now (the store refuses more). */
const { MAX_LIMIT: MAX_NUMBER, MAX_INTERVAL_US: MAX_START_US } = require('../store/bounds')
const OPTIONS = ['key', 'qps', 'maxBurst', 'burstAllowanceFactor', 'mode']

function checkStore(store) {
  if (!(store instanceof MemoryStore) && !(store instanceof RedisStore)) {
    throw invalidConfig('store must be a MemoryStore or a RedisStore')
  }
}

function checkNumber(name, value, { min, minExclusive = false, max }) {
  if (
    typeof value !== 'number' ||
    !Number.isFinite(value) ||
    (minExclusive ? value <= min : value < min) ||
    value > max
  ) {
    const low = minExclusive ? `(${min}` : `[${min}`
    throw invalidConfig(`${name} must be a finite number in ${low}, ${max}], got ${describeValue(value)}`)
  }
  return value
}

const badWeight = (weight) =>
  invalidArgument(`weight must be a finite number in [0, ${MAX_NUMBER}], got ${describeValue(weight)}`)

/**
 * Paces and rate-limits calls across every process that shares a store: a leaky bucket of
 * `maxBurst` in front of a queue spaced at `qps` (the algorithm and API of
 * @clickup/distributed-pacer, with its defects fixed). Cheap to construct: no round trip.
 */
class DistributedPacer {
  constructor(store, options) {
    checkStore(store)
    if (options === null || typeof options !== 'object') throw invalidConfig('options must be an object')
    knownOptions(options, OPTIONS, 'pacer')
    const { key, qps, maxBurst = 0, burstAllowanceFactor, mode } = ownProps(options)
    if (typeof key !== 'string' || key.length === 0 || key.length > MAX_KEY_LENGTH || !key.isWellFormed()) {
      // a lone surrogate cannot cross to the store as UTF-8: it would become U+FFFD and share
      // a pacer with every other key that holds one
      throw invalidConfig(
        `key must be a non-empty string of at most ${MAX_KEY_LENGTH} characters, with no lone surrogate`,
      )
    }
    checkNumber('qps', qps, { min: 0, minExclusive: true, max: MAX_NUMBER })
    checkNumber('maxBurst', maxBurst, { min: 0, max: MAX_NUMBER })
    if (burstAllowanceFactor !== undefined) {
      checkNumber('burstAllowanceFactor', burstAllowanceFactor, { min: 0, minExclusive: true, max: 1 })
    }
    this._store = store
    this._name = key
    this._storeKey = storeKey(store, 'pacer', key)
    this._statsKind = 'pacer'
    this._statsName = key
    this._qps = qps
    this._maxBurst = maxBurst
    this._factor = burstAllowanceFactor
    // rateLimit()'s options, for the store's local deny cache
    this._sig = `${qps}|${maxBurst}|${burstAllowanceFactor === undefined ? 1 : burstAllowanceFactor}`
    /** 'enforce', or 'shadow': decided at once and counted, a refusal or a delay admitted (a rule's mode wins) */
    this._mode = modeOption(mode)
  }

  /**
   * @internal makes this pacer window `index` of the windows `group` that an HTTP door key
   * decides together (the pacer kind's door, lib/kinds/pacer.js): its store key lives under the
   * group's hash tag (`groupKey`). Returns it.
   */
  _asWindow(group, index) {
    this._storeKey = PACER.groupKey(this._store, group, index)
    return this
  }

  /** The key as given (without prefix or escaping). */
  get key() {
    return this._name
  }

  /**
   * Reserves a slot for a call of `weight` (default 1) and resolves with how long to wait
   * before making it: `await sleep(outcome.delayMs)`.
   */
  pace(weight = 1) {
    const store = this._store
    // a rule of this pacer (or its own shadow mode) decides; other rules in the store leave
    // its slots given back to be taken first
    if (!unruled(this) && (this._mode !== 'enforce' || entryOf(this) !== undefined)) return this._call(weight, true)
    if (store._spares.size !== 0 && typeof weight === 'number' && weight > 0 && weight <= MAX_NUMBER) {
      // a slot a caller of this process gave back (outcome.cancel()), at its own time
      const now = nowMs(store)
      const at = store._spares.take(this._storeKey, weight, now)
      if (at >= 0) return Promise.resolve(this._outcome([(at - now) * 1000, this._maxBurst, 1], 0, weight))
    }
    return this._call(weight, true)
  }

  /**
   * Admits a call now or refuses it: `delayMs === 0` means admitted (and charged);
   * `delayMs > 0` means refused, nothing charged, and a retry after `delayMs` would be
   * admitted if no other caller takes the slot first.
   */
  rateLimit(weight = 1) {
    return this._call(weight, false)
  }

  /**
   * Upstream back-pressure (an API answered 429 with Retry-After): nobody is admitted on
   * this key for the next `ms`, or as long as `{ retryAfter }` (the header's value:
   * delta-seconds or an HTTP-date) says, in any process. `rateLimit()` refuses until then and
   * `pace()` schedules after it; calls resume at `qps` afterwards (the burst is spent). A
   * queue that already reaches past the block is kept. Resolves once the store recorded it (at
   * once for a Retry-After of 0 or a past date: nothing is blocked).
   */
  async block(arg) {
    const ms = blockMs(this._store, arg)
    if (ms > 0) await this._block(ms)
  }

  /**
   * @internal gives back `weight` a call of this key took, its slot at `atMs` (pace: its
   * mode; see PacerOutcome.cancel): true when given back to the store or kept for this
   * process's next call
   */
  async _give(weight, pace, atMs) {
    const store = this._store
    const startInUs = Math.round((atMs - nowMs(store)) * 1000)
    if (startInUs < 0 && pace) return false // its time has come: spent
    const factor = this._factor === undefined ? (pace ? 0.5 : 1) : this._factor
    const q = ruledView(this)
    const nums = new Float64Array([q._qps, q._maxBurst, factor, weight, Math.min(Math.max(0, startInUs), MAX_START_US)])
    const given = await store._call(PACER.single, new PACER.GiveCall(this._storeKey, nums))
    if (given === 1) return true
    return startInUs > 0 && store._spares.put(this._storeKey, atMs, weight)
  }

  /** @internal blocks this key for `ms` (whole ms, > 0) */
  async _block(ms) {
    const factor = this._factor === undefined ? 0.5 : this._factor
    const q = ruledView(this)
    const nums = new Float64Array([q._qps, q._maxBurst, factor, ms * 1000])
    await this._store._call(PACER.single, new PACER.BlockCall(this._storeKey, nums))
  }

  _call(weight, pace) {
    if (typeof weight !== 'number' || !(weight >= 0 && weight <= MAX_NUMBER)) return Promise.reject(badWeight(weight))
    if (!unruled(this)) return ruledPacer(this, weight, pace)
    const factor = this._factor === undefined ? (pace ? 0.5 : 1) : this._factor
    return this._store._call(PACER, new PACER.Call(this, weight, pace, factor))
  }

  /** @internal the options shown by `store.limiters()` */
  _statsOptions() {
    return { qps: this._qps, maxBurst: this._maxBurst }
  }

  /** This pacer's statistics over every process (as the rate limiters' `stats()`). */
  stats() {
    return this._store._statsOf('pacer', this._name)
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

  /**
   * @internal counts the decision at `out[i..]` (a member of the pacer kind's `RESULT`):
   * admitted when it starts now or was paced (a paced call that waits counts a wait); near the
   * limit when the bucket is 80 % full
   */
  _count(out, i, weight, degraded, admitted = admittedAt(out, i)) {
    const book = this._store._stats
    if (book === null || weight === 0) return
    book.decision(this, admitted, weight, out[i + WATERMARK] + weight >= 0.8 * this._maxBurst, degraded)
    if (admitted && out[i + DELAY_US] > 0) book.waited(this, delayMsOf(out[i + DELAY_US]))
  }

  /** @internal the outcome of this pacer's decision at `out[i..]` */
  _outcome(out, i, weight, degraded = false, pace = true) {
    this._count(out, i, weight, degraded)
    const delayUs = out[i + DELAY_US]
    const delayMs = delayMsOf(delayUs)
    const reason = `watermark=${fixed2(out[i + WATERMARK])}/${this._maxBurst} + weight=${weight}, delayMs=${delayMs}`
    const charged = weight > 0 && !degraded && admittedAt(out, i)
    const atMs = charged ? nowMs(this._store) + delayUs / 1000 : 0
    return new PacerOutcome(
      delayMs,
      reason,
      'watermark',
      out[i + WATERMARK],
      degraded,
      charged ? this : null,
      weight,
      pace,
      atMs,
    )
  }

  /** @internal the members this pacer contributes to a composite */
  _members(out) {
    out.push(this)
  }
}

/**
 * Several pacers decided as one: the outcome is the largest delay. `rateLimit()` is
 * all-or-nothing: when any member refuses, no member is charged. `pace()` reserves a slot in
 * every member. Members must share one store.
 */
class PacerComposite {
  constructor(pacers) {
    if (!Array.isArray(pacers)) throw invalidConfig('pacers must be an array')
    for (const p of pacers) {
      if (!(p instanceof DistributedPacer) && !(p instanceof PacerComposite)) {
        throw invalidConfig('every member must be a DistributedPacer or a PacerComposite')
      }
    }
    this._pacers = pacers.slice()
    this._leaves = []
    this._childOf = [] // top-level child index of each leaf
    pacers.forEach((p, child) => {
      const before = this._leaves.length
      p._members(this._leaves)
      for (let i = before; i < this._leaves.length; i++) this._childOf.push(child)
    })
    const stores = new Set(this._leaves.map((p) => p._store))
    if (stores.size > 1) throw invalidConfig('all pacers of a composite must use the same store')
    this._store = this._leaves.length ? this._leaves[0]._store : null
    /** no member in shadow mode of its own (then, with no rule in the store, calls go as always) */
    this._enforced = this._leaves.every((p) => p._mode === 'enforce')
  }

  /** A composite has no key of its own. */
  get key() {
    return ''
  }

  /** The member pacers, as given. */
  get pacers() {
    return this._pacers.slice()
  }

  pace(weight = 1) {
    return this._call(weight, true)
  }

  rateLimit(weight = 1) {
    return this._call(weight, false)
  }

  /**
   * Upstream back-pressure: blocks every member pacer (nested composites included) for the
   * next `ms`, or as long as `{ retryAfter }` says, as `DistributedPacer.block` does; one
   * duration for all of them. Resolves once the store recorded every block (at once for a
   * Retry-After of 0 or a past date, or a composite with no members).
   */
  async block(arg) {
    const ms = blockMs(this._store, arg)
    if (ms === 0) return
    await Promise.all([...new Set(this._leaves)].map((leaf) => leaf._block(ms)))
  }

  _members(out) {
    for (const leaf of this._leaves) out.push(leaf)
  }

  _call(weight, pace) {
    if (typeof weight !== 'number' || !(weight >= 0 && weight <= MAX_NUMBER)) return Promise.reject(badWeight(weight))
    if (this._leaves.length === 0) {
      return Promise.resolve(withMarks({ delayMs: 0, reason: 'no pacers', pacer: null, degraded: false }, []))
    }
    if (!this._enforced || this._store.rules._table.size !== 0) return ruledComposite(this, weight, pace)
    const keys = []
    const args = [this._leaves.length, pace ? PACER.OP.pace : PACER.OP.rateLimit]
    for (const leaf of this._leaves) {
      keys.push(leaf._storeKey)
      const factor = leaf._factor === undefined ? (pace ? 0.5 : 1) : leaf._factor
      args.push(weight, leaf._qps, leaf._maxBurst, factor)
    }
    return this._store._call(PACER, new PACER.Call(this, weight, pace, 0, keys, args))
  }

  /** @internal gives back `weight` on every member, each slot at `atMs[i]` (see PacerOutcome.cancel) */
  async _give(weight, pace, atMs) {
    const given = await Promise.all(this._leaves.map((leaf, i) => leaf._give(weight, pace, atMs[i])))
    return given.some(Boolean)
  }

  _outcome(out, offset, weight, degraded = false, pace = true) {
    // all or nothing: the entry is admitted when every member starts now or was paced
    let admitted = true
    for (let i = 0; i < this._leaves.length; i++) {
      if (!admittedAt(out, offset + MEMBER * i)) admitted = false
    }
    for (let i = 0; i < this._leaves.length; i++) {
      this._leaves[i]._count(out, offset + MEMBER * i, weight, degraded, admitted)
    }
    // Per top-level child: its largest member delay (first one on ties), like lodash maxBy.
    let best = -1
    let bestDelay = 0
    let bestLeaf = -1
    const watermarks = new Array(this._leaves.length)
    for (let i = 0; i < this._leaves.length; i++) {
      watermarks[i] = out[offset + MEMBER * i + WATERMARK]
      const delayUs = out[offset + MEMBER * i + DELAY_US]
      if (delayUs > bestDelay) {
        bestDelay = delayUs
        best = this._childOf[i]
        bestLeaf = i
      }
    }
    const owner = admitted && weight > 0 && !degraded ? this : null
    // each member's slot start (a leaf gives back its own)
    const now = owner === null ? 0 : nowMs(this._leaves[0]._store)
    const atMs = owner === null ? null : this._leaves.map((_, i) => now + out[offset + MEMBER * i + DELAY_US] / 1000)
    const made = (delayMs, reason, pacer) =>
      withMarks(new PacerOutcome(delayMs, reason, 'pacer', pacer, degraded, owner, weight, pace, atMs), watermarks)
    if (best < 0) return made(0, 'no delay', null)
    const leaf = this._leaves[bestLeaf]
    const delayMs = delayMsOf(bestDelay)
    const wb = out[offset + MEMBER * bestLeaf + WATERMARK]
    let reason = `watermark=${fixed2(wb)}/${leaf._maxBurst} + weight=${weight}, delayMs=${delayMs}`
    // Nested composites contribute their leaf's line; every level adds its own prefix.
    const chain = []
    let node = leaf
    for (const p of this._pathTo(bestLeaf)) chain.push(p)
    for (let i = chain.length - 1; i >= 0; i--) {
      node = chain[i]
      if (node.key) reason = `${node.constructor.name} ${node.key}\n${reason}`
    }
    return made(delayMs, reason, this._pacers[best])
  }

  /** The members from this composite's child down to the leaf. */
  _pathTo(leafIndex) {
    const path = []
    let composite = this
    let index = leafIndex
    for (;;) {
      const child = composite._pacers[composite._childOf[index]]
      path.push(child)
      if (!(child instanceof PacerComposite)) return path
      let first = 0
      while (composite._childOf[first] !== composite._childOf[index]) first++
      index -= first
      composite = child
    }
  }
}

module.exports = { DistributedPacer, PacerComposite, escapeKey }
