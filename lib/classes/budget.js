'use strict'
// Budget and Reservation: several dimensions (requests, input tokens, output tokens...) each a
// rate per interval with a burst, reserved all or nothing in one fleet-wide FIFO before a call
// and settled with the true amounts after it (lib/kinds/budget.js, src/core/budget/).

const { randomBytes } = require('node:crypto')
const { SluiceError, invalidConfig, invalidArgument, ownProps, suggestion, knownOptions } = require('../base/errors')
const {
  classOptions,
  checkInteger,
  plainObject,
  checkSignal,
  withinOptions,
  sleep,
  nowMs,
  overLimit,
} = require('./base')
const { checkName, MAX_LIMIT, MAX_MS } = require('./base')
const { modeOption, unruled, modeOf, event } = require('./ruled')
const budget = require('../kinds/budget')
const { Holds } = require('./budget-hold')
const { storeKey } = require('../store/keys')

const { OP, STATUS } = budget
/** Most dimensions of one budget. */
const MAX_DIMENSIONS = 8
/** How long a reservation neither settled nor cancelled stays open, ms (then it is spent). */
const DEFAULT_TTL_MS = 600_000
/** How long reserve() waits for its turn by default, ms. */
const DEFAULT_MAX_WAIT_MS = 60_000
/** How far ahead a tenant may commit borrowed capacity by default, ms. */
const DEFAULT_BORROW_AHEAD_MS = 1000
/** Longest tenant id, bytes (UTF-8). */
const MAX_TENANT_BYTES = 256
const PPM = 1e6

// reservation ids: unique per process (random) and per call (a counter)
const PROCESS = randomBytes(9).toString('base64url')
let serial = 0
const nextId = () => `${PROCESS}.${(serial++).toString(36)}`

/** `dimensions` checked (ERR_INVALID_CONFIG) and frozen, in the order given. */
function dimensionsOption(dimensions) {
  if (!plainObject(dimensions))
    throw invalidConfig('dimensions must be an object { [name]: { limit, intervalMs, maxBurst?, maxDebt? } }')
  const names = Object.keys(dimensions)
  if (names.length < 1 || names.length > MAX_DIMENSIONS) {
    throw invalidConfig(`dimensions must name 1..${MAX_DIMENSIONS} dimensions, got ${names.length}`)
  }
  const out = {}
  for (const name of names) {
    // shown by the CLI and the dashboard (escaped for a terminal), never in a key
    checkName(name, 'a dimension name')
    const d = dimensions[name]
    if (!plainObject(d))
      throw invalidConfig(
        `dimensions[${JSON.stringify(name)}] must be an object { limit, intervalMs, maxBurst?, maxDebt? }`,
      )
    const o = ownProps(d)
    knownOptions(o, ['limit', 'intervalMs', 'maxBurst', 'maxDebt'], 'dimension', {
      where: ` in ${JSON.stringify(name)}`,
    })
    const at = `dimensions[${JSON.stringify(name)}]`
    const limit = checkInteger(`${at}.limit`, o.limit, 1, MAX_LIMIT)
    const intervalMs = checkInteger(`${at}.intervalMs`, o.intervalMs, 1, MAX_MS)
    const maxBurst = checkInteger(`${at}.maxBurst`, o.maxBurst ?? 0, 0, MAX_LIMIT)
    // one interval's worth by default: an answer reporting an absurd amount cannot stall the budget
    const maxDebt = checkInteger(`${at}.maxDebt`, o.maxDebt ?? limit + maxBurst, 0, 2 * MAX_LIMIT)
    out[name] = Object.freeze({ limit, intervalMs, maxBurst, maxDebt })
  }
  return Object.freeze(out)
}

/**
 * A budget of several dimensions, each `limit` per `intervalMs`, replenished continuously,
 * holding up to `maxBurst` beyond that when a reservation arrives. `reserve()` charges every
 * dimension it names at once, or none: a reservation that does not fit now takes its place in
 * one FIFO shared by every process and resolves when its turn comes. Over any span of T ms a
 * dimension admits at most `limit * T / intervalMs + maxBurst` plus one reservation; what a
 * settlement charges beyond the reservation is debt that later reservations wait for, at most
 * `maxDebt` (default `limit + maxBurst`) per settlement: the rest is counted (`excess`), not owed.
 */
class Budget {
  constructor(store, options) {
    const o = classOptions(store, options, ['name', 'dimensions', 'mode'], 'budget', ' { name, dimensions }')
    this._store = store
    this._name = o.name
    this._dimensions = dimensionsOption(o.dimensions)
    this._names = Object.keys(this._dimensions)
    this._index = new Map(this._names.map((n, i) => [n, i]))
    this._spec = []
    for (const n of this._names) {
      const d = this._dimensions[n]
      this._spec.push(d.limit, d.intervalMs * 1000, d.maxBurst, d.maxDebt)
    }
    this._storeKey = storeKey(store, 'budget', o.name)
    this._statsKind = 'budget'
    this._statsName = o.name
    /** @internal this view's tenant `{ id, sharePpm, maxPpm, aheadUs }`, null for the budget */
    this._tenant = null
    /** @internal the tenants' callers held in this process (shared by the views made from this budget) */
    this._holds = new Holds(store)
    /** 'enforce', or 'shadow': reserve() decides at once, a refusal admitted holding nothing (a rule's mode wins) */
    this._mode = modeOption(o.mode)
  }

  /**
   * A view of this budget for tenant `id` (any string of 1..256 UTF-8 bytes, used as data,
   * never joined into a key): its reservations charge the tenant's own allowance and the
   * whole budget, all or nothing, in one store call. `share` (0..1) of every dimension's rate
   * is the tenant's: a reservation within it waits only for the tenant's own earlier ones
   * (FIFO within a tenant) and for capacity others borrowed (committed at most `borrowAheadMs`
   * ahead, default 1,000), never for other tenants' queues. Beyond its share a tenant borrows
   * what the budget has unused now, up to `maxShare` (default 1) of each rate, committing it
   * at most `borrowAheadMs` ahead. A share is in force while its tenant is active (it has a
   * waiting or unsettled reservation, or reserved within the last second) and holds nothing
   * while it is idle; when the active tenants' shares add up to more than 1 they are scaled
   * down in proportion (weighted fair shares), never refused. Views hold nothing of their
   * own: make one per call (`budget.tenant(customerId, { share: 0.05 })`) for any number of
   * ids. Shares are kept in parts per million (rounded down).
   */
  tenant(id, options) {
    if (this._tenant !== null) throw invalidConfig('a tenant view has no tenants: call tenant() on the budget')
    // a lone surrogate would be sent as U+FFFD: two ids could meet
    if (typeof id !== 'string' || id.length < 1 || !id.isWellFormed() || Buffer.byteLength(id) > MAX_TENANT_BYTES) {
      throw invalidConfig(`a tenant id must be a well-formed string of 1..${MAX_TENANT_BYTES} UTF-8 bytes`)
    }
    if (!plainObject(options))
      throw invalidConfig('tenant options must be an object { share, maxShare?, borrowAheadMs? }')
    knownOptions(options, ['share', 'maxShare', 'borrowAheadMs'], 'tenant')
    const o = ownProps(options)
    const fraction = (what, v) => {
      if (typeof v !== 'number' || !(v >= 0 && v <= 1)) throw invalidConfig(`${what} must be a number in [0, 1]`)
      return Math.floor(v * PPM)
    }
    const sharePpm = fraction('share', o.share)
    const maxPpm = fraction('maxShare', o.maxShare ?? 1)
    if (maxPpm < 1 || maxPpm < sharePpm) throw invalidConfig('maxShare must be > 0 and at least share')
    const aheadMs = checkInteger('borrowAheadMs', o.borrowAheadMs ?? DEFAULT_BORROW_AHEAD_MS, 0, MAX_MS)
    const view = Object.create(Budget.prototype)
    Object.assign(view, this)
    view._tenant = Object.freeze({ id, sharePpm, maxPpm, aheadUs: aheadMs * 1000 })
    return view
  }

  /** The tenant's id, for a view from `tenant()`; undefined for the budget. */
  get tenantId() {
    return this._tenant === null ? undefined : this._tenant.id
  }

  /** The budget's name. */
  get name() {
    return this._name
  }

  /** The dimensions, as configured (`maxBurst` filled in). */
  get dimensions() {
    return this._dimensions
  }

  /** @internal the options shown by `store.limiters()` */
  _statsOptions() {
    return { dimensions: this._dimensions }
  }

  /** @internal `amounts` by dimension index; `most(d)`: the largest amount accepted */
  _amounts(amounts, what, fill, most) {
    if (!plainObject(amounts)) throw invalidArgument(`${what} must be an object { [dimension]: amount }`)
    const out = fill.slice()
    const o = ownProps(amounts)
    for (const name of Object.keys(o)) {
      const d = this._index.get(name)
      if (d === undefined) {
        throw invalidArgument(
          `unknown dimension ${JSON.stringify(name)} in ${what}${suggestion(name, [...this._index.keys()])}`,
        )
      }
      const max = most(this._dimensions[name])
      checkInteger(`${what}[${JSON.stringify(name)}]`, o[name], 0, max, (m) =>
        invalidArgument(what === 'amounts' ? `${m} (over limit + maxBurst it can never be admitted)` : m),
      )
      out[d] = o[name]
    }
    return out
  }

  /** @internal one call of this budget (on the limits the rules in force give it) */
  async _call(op, id, amounts, ttlUs = 1000, maxWaitUs = 0) {
    let t = this._tenant
    if (t !== null && (op === OP.reserve || op === OP.stats)) {
      op = op === OP.reserve ? OP.reserveAs : OP.statsOf
    }
    let owner = this
    if (this._store.rules._table.size !== 0) [owner, t] = this._ruledLimits(t)
    const tenant = op === OP.reserveAs || op === OP.statsOf ? t : null
    return this._store._call(budget, new budget.Call(owner, op, id, amounts, ttlUs, maxWaitUs, tenant))
  }

  /**
   * @internal this budget and tenant `t` as the rules of store.rules make them: a budget rule's
   * `dimensions` override those dimensions' limits; a tenant rule's cap the tenant's maxShare
   * at the smallest of `limit / the budget's limit` over the dimensions it names
   */
  _ruledLimits(t) {
    const rules = this._store.rules
    const e = rules._forName('budget', this._name)
    let owner = this
    const dims = e === undefined ? undefined : e.rule.dimensions
    if (dims !== undefined) {
      const spec = this._spec.slice()
      for (const [name, d] of Object.entries(dims)) {
        const at = this._index.get(name)
        if (at !== undefined) spec[4 * at] = d.limit
      }
      owner = Object.create(this, { _spec: { value: spec } })
    }
    const te = t === null ? undefined : rules._forTenant(this._name, t.id)
    if (te === undefined || te.rule.dimensions === undefined) return [owner, t]
    let capPpm = PPM
    for (const [name, d] of Object.entries(te.rule.dimensions)) {
      const at = this._index.get(name)
      if (at !== undefined) capPpm = Math.min(capPpm, Math.floor((d.limit / owner._spec[4 * at]) * PPM))
    }
    const maxPpm = Math.max(1, Math.min(t.maxPpm, capPpm))
    return [owner, { ...t, maxPpm, sharePpm: Math.min(t.sharePpm, maxPpm) }]
  }

  /**
   * @internal a reservation of `charged` answered under the access and mode of the rules in
   * force (a tenant's rule, else the budget's; a deny of the budget wins), counted here; or
   * undefined when it goes on as enforced. A deny rejects (OverLimitError, reason 'denied'), an
   * allow resolves a reservation that holds nothing; in shadow mode a reservation decided at
   * once: one that fits now, else one that holds nothing (`reason: 'shadow'`, `shadowRefused`)
   */
  async _ruledReserve(charged, ttlMs) {
    const rules = this._store.rules
    const e = rules._forName('budget', this._name)
    let rule = e === undefined ? undefined : e.rule
    if (this._tenant !== null && (rule === undefined || rule.access !== 'deny')) {
      const te = rules._forTenant(this._name, this._tenant.id)
      if (te !== undefined) rule = te.rule
    }
    const book = this._store._stats
    if (rule !== undefined && rule.access === 'deny') {
      if (book) book.decision(this, false, 1, false, false)
      event(this, 'denied')
      throw overLimit(this, 0, 'denied')
    }
    const held = () => {
      const r = new Reservation(this, nextId(), charged, { delayUs: 0, nowUs: nowMs(this._store) * 1000 })
      r._free = true
      return r
    }
    if (rule !== undefined && rule.access === 'allow') {
      if (book) book.decision(this, true, 0, false, false)
      return held()
    }
    if (modeOf(this, rule) !== 'shadow') return undefined
    const id = nextId()
    const r = await this._call(OP.reserve, id, charged, ttlMs * 1000, 0)
    if (book) book.decision(this, true, 1, false, r.degraded)
    if (r.status === STATUS.ok) return new Reservation(this, id, charged, r)
    event(this, 'shadowRefused')
    const got = held()
    got.reason = 'shadow'
    return got
  }

  /**
   * @internal what a reservation of `charged` needs of tenant `t`'s hold, µs: `costUs` and
   * `lowUs`, its time at the tenant's share (0 for a share of 0) and at its maxShare on its
   * slowest dimension, and `horizonUs`, how far ahead it may be committed: `borrowAheadMs`, or
   * its time at the share when longer
   */
  _need(charged, t) {
    let costUs = 0
    let lowUs = 0
    for (let d = 0; d < charged.length; d++) {
      if (charged[d] === 0) continue
      const [limit, intervalUs] = [this._spec[4 * d], this._spec[4 * d + 1]]
      const full = (charged[d] * intervalUs) / limit
      if (t.sharePpm > 0) costUs = Math.max(costUs, (full * PPM) / t.sharePpm)
      lowUs = Math.max(lowUs, (full * PPM) / t.maxPpm)
    }
    return { costUs, lowUs, horizonUs: Math.max(t.aheadUs, costUs) }
  }

  /**
   * Reserves `amounts` (`{ [dimension]: integer }`, dimensions left out are not charged) on
   * every dimension at once, waiting for its turn in the FIFO on the store's clock. Rejects
   * with OverLimitError (nothing charged) when its turn is more than `maxWaitMs` (default
   * 60,000; `Infinity`: no bound) away; with ERR_ABORTED when `signal` aborts the wait (the
   * charge is given back); with ERR_INVALID_ARGUMENT for an unknown dimension or an amount
   * over `limit + maxBurst`. The reservation stays open for `ttlMs` (default 600,000) from
   * its turn: then it counts as spent as reserved and can no longer be settled.
   */
  async reserve(amounts, options) {
    const o = withinOptions(options, ['maxWaitMs', 'signal', 'ttlMs'], 'reserve')
    const { signal, ttlMs = DEFAULT_TTL_MS } = o
    let { maxWaitMs = DEFAULT_MAX_WAIT_MS } = o
    if (maxWaitMs === Infinity) maxWaitMs = MAX_MS
    checkInteger('maxWaitMs', maxWaitMs, 0, MAX_MS, invalidArgument)
    checkInteger('ttlMs', ttlMs, 1, MAX_MS, invalidArgument)
    const charged = this._amounts(
      amounts,
      'amounts',
      new Array(this._names.length).fill(0),
      (d) => d.limit + d.maxBurst,
    )
    checkSignal(signal)
    if (!unruled(this)) {
      const got = await this._ruledReserve(charged, ttlMs)
      if (got !== undefined) return got
    }
    const store = this._store
    const book = store._stats
    const id = nextId()
    const start = nowMs(store)
    const t = this._tenant
    const holds = this._holds
    let heldMs = 0
    let r
    if (t === null) r = await this._call(OP.reserve, id, charged, ttlMs * 1000, maxWaitMs * 1000)
    else {
      // held here until its start is within the tenant's horizon (nothing charged yet); the store
      // refuses it past the horizon (a queue committed there could never borrow): it comes back
      const need = this._need(charged, t)
      const refuse = (ms) => {
        if (book) book.decision(this, false, 1, false, false)
        return overLimit(this, ms)
      }
      let seq
      for (;;) {
        const turn = await holds.turn(t.id, need, maxWaitMs - (nowMs(store) - start), signal, refuse, seq)
        heldMs += turn.heldMs
        seq = turn.seq
        const leftUs = Math.max(0, maxWaitMs - (nowMs(store) - start)) * 1000
        // a tenant coming back waits for what was borrowed while it was idle, up to a horizon plus
        // a reservation: the first of a hold (nothing known yet) is not refused for its horizon
        const capUs = t.sharePpm > 0 && turn.known ? Math.min(leftUs, need.horizonUs) : leftUs
        try {
          r = await this._call(OP.reserve, id, charged, ttlMs * 1000, capUs)
        } catch (err) {
          holds.failed(t.id, need)
          throw err
        }
        // refused for its horizon alone (not for its maxWaitMs, nor as a share-0 tenant that
        // cannot borrow): it waits here, first in line, for the start the store told
        const again = r.status === STATUS.refused && capUs < leftUs && r.delayUs > capUs && r.delayUs <= leftUs
        if (r.status === STATUS.ok || again) holds.answered(t.id, need, !again, r.nowUs + r.delayUs, r.nowUs)
        else holds.failed(t.id, need)
        if (!again) break
      }
    }
    const ok = r.status === STATUS.ok
    if (r.status === STATUS.refused) {
      if (book) book.decision(this, false, 1, false, r.degraded)
      throw overLimit(this, Math.ceil(r.delayUs / 1000))
    }
    if (!ok) throw new SluiceError('ERR_INTERNAL', 'a reservation id was used twice')
    const reservation = new Reservation(this, id, charged, r)
    reservation.delayMs += heldMs
    const waited = nowMs(store) - start
    if (r.delayUs > 0) {
      try {
        await sleep(store, Math.ceil(r.delayUs / 1000), signal)
      } catch (err) {
        // give the charge back; if that fails the reservation expires as spent (admits less, never more)
        await reservation.cancel().catch(() => {})
        throw err
      } finally {
        if (t !== null) holds.done(t.id)
      }
    } else if (t !== null) holds.done(t.id)
    if (book && (r.delayUs > 0 || waited > 0)) book.waited(this, nowMs(store) - start)
    if (book) book.decision(this, true, 1, false, r.degraded)
    return reservation
  }

  /**
   * Per dimension its `limit`, `used` (charged and not yet replenished: open reservations,
   * queued ones and debt included), `reserved` (held by open reservations) and `excess`
   * (settled past `maxDebt`: counted, not charged); the number of
   * open `reservations` and of those that `expired` unsettled; plus this budget's statistics
   * (admitted, refused, waited...) when the store keeps them. On the budget: `activeTenants`,
   * the number of active tenants, and `tenants`, at most 20 of them (those with an open
   * reservation first, then the latest active) with their share, maxShare and per dimension
   * the use of their share (`used`); on a tenant view: `tenants` holds that tenant alone (its
   * share as sent and 0s while it is idle). One store call either way.
   */
  async stats() {
    const r = await this._call(OP.stats, '-', null)
    const dimensions = {}
    // the limits in force: a rule's dimensions (store.rules) where one overrides them
    const owner = this._store.rules._table.size === 0 ? this : this._ruledLimits(this._tenant)[0]
    this._names.forEach((name, d) => {
      const limit = owner._spec[4 * this._index.get(name)]
      dimensions[name] = { limit, used: r.used[d], reserved: r.reserved[d], excess: r.excess[d] }
    })
    const counts = this._store._stats === null ? {} : await this._store._statsOf('budget', this._name)
    const out = { ...counts, dimensions, reservations: r.open, expired: r.expired }
    const tenant = (t) => {
      const used = {}
      this._names.forEach((name, d) => (used[name] = t.used[d]))
      return { share: t.sharePpm / PPM, maxShare: t.maxPpm / PPM, used }
    }
    out.tenants = {}
    if (this._tenant !== null) out.tenants[this._tenant.id] = tenant(r.tenant)
    else {
      out.activeTenants = r.active
      for (const t of r.listed) out.tenants[t.id] = tenant(t)
    }
    return out
  }
}

/** What `reserve()` resolves with: settle it with the true amounts, or cancel it. */
class Reservation {
  constructor(owner, id, charged, r) {
    this._owner = owner
    this._charged = charged
    this._degraded = r.degraded
    this._state = 'open'
    /** The reservation's id (unique across processes). */
    this.id = id
    /** The amounts reserved, by dimension. */
    this.amounts = Object.freeze(Object.fromEntries(owner._names.map((n, d) => [n, charged[d]])))
    /** How long `reserve()` waited for its turn, ms. */
    this.delayMs = Math.ceil(r.delayUs / 1000)
    /** When its turn came on the store's clock (Redis' on a RedisStore), ms since the epoch (µs precision). */
    this.startMs = (r.nowUs + r.delayUs) / 1000
    /** @internal the store's time of the decision, µs */
    this._nowUs = r.nowUs
    /** Whether it was answered without Redis (whenDown): settling and cancelling it change nothing. */
    this.degraded = r.degraded === true
  }

  _closed() {
    return invalidArgument(`this reservation is already ${this._state}: it can be settled or cancelled once`)
  }

  async _end(op, amounts, state) {
    if (this._state !== 'open') throw this._closed()
    this._state = state
    if (this._degraded || this._free === true) return
    let r
    try {
      r = await this._owner._call(op, this.id, amounts)
    } catch (err) {
      // not known to be applied: a retry is safe (the store applies one of them at most)
      this._state = 'open'
      throw err
    }
    if (r.status !== STATUS.ok) {
      this._state = 'expired'
      throw invalidArgument('this reservation is no longer open: it expired (ttlMs) and counts as spent')
    }
  }

  /**
   * The true amounts (`{ [dimension]: integer }`; dimensions left out keep their reserved
   * amount): less than reserved is given back at once, more is charged as debt that later
   * reservations wait for (this call never fails for it), at most the dimension's `maxDebt`
   * beyond the reservation (the rest is counted in `stats()`' `excess`, not owed). ERR_INVALID_ARGUMENT when settled,
   * cancelled or expired already (nothing changes), or for an unknown dimension.
   */
  async settle(actual) {
    const owner = this._owner
    const amounts = owner._amounts(actual, 'actual', this._charged, () => MAX_LIMIT)
    await this._end(OP.settle, amounts, 'settled')
  }

  /** Gives every reserved amount back. ERR_INVALID_ARGUMENT when settled, cancelled or expired already. */
  async cancel() {
    await this._end(OP.cancel, null, 'cancelled')
  }
}

module.exports = { Budget, Reservation, MAX_DIMENSIONS }
