'use strict'
// DistributedPacer and PacerComposite under the store's rules (DESIGN §9, lib/classes/ruled.js):
// a deny or an allow answers with no round trip, a `qps` or `maxBurst` override is the call's
// (a view of the pacer with those options: the kind reads them as it always does), shadow mode
// decides at once (never a wait, never a reserved slot) and admits what would have been refused
// or delayed. Taken only when the store holds a rule or a pacer is in shadow mode.

const { OverLimitError } = require('../base/errors')
const { nowMs } = require('./base')
const { modeOf, event } = require('./ruled')
const PACER = require('../kinds/pacer')
const { PacerOutcome, withMarks, admittedAt } = require('./pacer-outcome')
const { delay_us: DELAY_US, watermark_before: WATERMARK, admitted: ADMITTED, size: MEMBER } = PACER.RESULT

/** Longest delay a denied rateLimit() answers: a rule's change is in force everywhere within 1 s. */
const DENIED_RETRY_MS = 1000

/** The rule entry of pacer `p` in force now, or undefined. */
const entryOf = (p) => p._store.rules._forName('pacer', p._name)

/** The delay of a denied rateLimit(): until the rule ends, at most DENIED_RETRY_MS (at least 1 ms). */
function deniedMs(p, e) {
  if (e.expiresAt === undefined) return DENIED_RETRY_MS
  return Math.max(1, Math.min(DENIED_RETRY_MS, Math.ceil(e.expiresAt - nowMs(p._store))))
}

const deniedError = (p) =>
  new OverLimitError(`${p._name} denies this call (a rule of store.rules)`, {
    limiter: p._name,
    retryAfterMs: 0,
    reason: 'denied',
  })

/**
 * Counts a decision of pacer `p` of `weight` (its statistics), `charged` of it, and an `extra`
 * field ('denied', 'shadowRefused'); a call of weight 0 is a probe, counted nowhere (as the
 * pacer's own decisions).
 */
function count(p, admitted, weight, degraded = false, charged = weight, extra = undefined) {
  if (weight === 0) return
  const book = p._store._stats
  if (book !== null) book.decision(p, admitted, charged, false, degraded)
  if (extra !== undefined) event(p, extra)
}

/** Pacer `p` as `rule` overrides it (`qps`, `maxBurst`), or `p` itself. */
function overridden(p, rule) {
  if (rule === undefined || (rule.qps === undefined && rule.maxBurst === undefined)) return p
  const qps = rule.qps ?? p._qps
  const maxBurst = rule.maxBurst ?? p._maxBurst
  const factor = p._factor === undefined ? 1 : p._factor
  return Object.create(p, {
    _qps: { value: qps },
    _maxBurst: { value: maxBurst },
    _sig: { value: `${qps}|${maxBurst}|${factor}` },
  })
}

/**
 * A view of pacer `p` whose outcome is shadow mode's: admitted at once (delay 0), a refusal
 * counted in `shadowRefused` and answered with reason 'shadow', nothing charged for it.
 */
function shadowed(p) {
  return Object.create(p, {
    _outcome: {
      value(out, i, weight, degraded = false) {
        if (admittedAt(out, i)) return p._outcome.call(this, out, i, weight, degraded, false)
        count(p, true, weight, degraded, weight, 'shadowRefused')
        return new PacerOutcome(0, 'shadow', 'watermark', out[i + WATERMARK], degraded, null, weight, false, 0)
      },
    },
  })
}

/** pace() (`pace`) or rateLimit() of `weight` on DistributedPacer `p` under its rule. */
function ruledPacer(p, weight, pace) {
  const e = entryOf(p)
  const rule = e === undefined ? undefined : e.rule
  if (rule !== undefined && rule.access === 'deny') {
    count(p, false, weight, false, weight, 'denied')
    if (pace) return Promise.reject(deniedError(p))
    return Promise.resolve(new PacerOutcome(deniedMs(p, e), 'denied', 'watermark', 0, false, null, weight, false, 0))
  }
  if (rule !== undefined && rule.access === 'allow') {
    count(p, true, weight, false, 0)
    return Promise.resolve(new PacerOutcome(0, 'allowed', 'watermark', 0, false, null, weight, pace, 0))
  }
  const target = overridden(p, rule)
  const factor = p._factor === undefined ? (pace ? 0.5 : 1) : p._factor
  if (modeOf(p, rule) !== 'shadow') return p._store._call(PACER, new PACER.Call(target, weight, pace, factor))
  // shadow: a rateLimit() (admitted now or refused, nothing reserved), at pace()'s leak rate for a pace()
  return p._store._call(PACER, new PACER.Call(shadowed(target), weight, false, factor))
}

/**
 * The store call of `op` (pace or rateLimit) of `weight` on members `indices` of `view` (a
 * composite's members as their rules make them): resolves with `{ rows, degraded }`, each
 * member's result fields in `indices` order.
 */
function sendTo(store, view, indices, weight, op) {
  const keys = []
  const args = [indices.length, op]
  for (const i of indices) {
    const leaf = view[i]
    keys.push(leaf._storeKey)
    const factor = leaf._factor === undefined ? (op === PACER.OP.pace ? 0.5 : 1) : leaf._factor
    args.push(weight, leaf._qps, leaf._maxBurst, factor)
  }
  const owner = {
    _outcome: (out, offset, _w, degraded = false) => ({
      rows: out.slice(offset, offset + MEMBER * indices.length),
      degraded,
    }),
  }
  return store._call(PACER, new PACER.Call(owner, weight, op === PACER.OP.pace, 0, keys, args))
}

/**
 * pace() or rateLimit() of `weight` on composite `c` under its members' rules: a deny of any
 * member denies the whole (counted on every member, `denied` on the denying ones); an allowed
 * member is left out of the call (no limit applies to it: admitted, nothing charged); an
 * override is its member's options in the call. Members in shadow mode are decided at once
 * (rateLimit, never a reserved slot) in a call of their own, made in the same tick as the
 * enforced members' (calls of one tick share a round trip on a standalone Redis): when only
 * they refuse, the composite is admitted with reason 'shadow' (they are not charged, each
 * counts it in `shadowRefused`); when an enforced member refuses, the composite is refused and
 * what the shadow members took is given back.
 */
function ruledComposite(c, weight, pace) {
  const leaves = c._leaves
  const entries = leaves.map(entryOf)
  const rules = entries.map((e) => (e === undefined ? undefined : e.rule))
  const denying = rules.findIndex((r) => r !== undefined && r.access === 'deny')
  const watermarks = leaves.map(() => 0)
  if (denying >= 0) {
    leaves.forEach((leaf, i) => {
      const denied = rules[i] !== undefined && rules[i].access === 'deny'
      count(leaf, false, weight, false, weight, denied ? 'denied' : undefined)
    })
    const leaf = leaves[denying]
    if (pace) return Promise.reject(deniedError(leaf))
    const delayMs = deniedMs(leaf, entries[denying])
    const pacer = c._pacers[c._childOf[denying]]
    return Promise.resolve(
      withMarks(new PacerOutcome(delayMs, 'denied', 'pacer', pacer, false, null, weight, false, null), watermarks),
    )
  }
  const enforced = []
  const shadows = []
  const view = leaves.map((leaf, i) => {
    const rule = rules[i]
    if (rule !== undefined && rule.access === 'allow') return unlimited(leaf)
    ;(modeOf(leaf, rule) === 'shadow' ? shadows : enforced).push(i)
    return overridden(leaf, rule)
  })
  if (enforced.length === 0 && shadows.length === 0) {
    for (const leaf of leaves) count(leaf, true, weight, false, 0)
    return Promise.resolve(
      withMarks(new PacerOutcome(0, 'allowed', 'pacer', null, false, null, weight, pace, null), watermarks),
    )
  }
  const store = c._store
  const none = Promise.resolve({ rows: new Float64Array(0), degraded: false })
  const sentE =
    enforced.length === 0 ? none : sendTo(store, view, enforced, weight, pace ? PACER.OP.pace : PACER.OP.rateLimit)
  const sentS = shadows.length === 0 ? none : sendTo(store, view, shadows, weight, PACER.OP.rateLimit)
  return Promise.all([sentE, sentS]).then(async ([e, s]) => {
    // every member's row (an allowed one: starts now, level 0)
    const full = new Float64Array(MEMBER * leaves.length)
    for (let i = 0; i < leaves.length; i++) full[MEMBER * i + ADMITTED] = 1
    const spread = (indices, rows) =>
      indices.forEach((i, k) => {
        for (let f = 0; f < MEMBER; f++) full[MEMBER * i + f] = rows[MEMBER * k + f]
      })
    spread(enforced, e.rows)
    spread(shadows, s.rows)
    const degraded = e.degraded || s.degraded
    const admitted = (indices) => indices.every((i) => admittedAt(full, MEMBER * i))
    const decided = Object.create(c, { _leaves: { value: view } })
    if (!admitted(enforced)) {
      // refused by an enforced member: what the shadow members took goes back
      if (shadows.length > 0 && admitted(shadows) && !s.degraded) {
        const now = nowMs(store)
        await Promise.all(shadows.map((i) => view[i]._give(weight, false, now)))
      }
      return decided._outcome(full, 0, weight, degraded, pace)
    }
    if (admitted(shadows)) return decided._outcome(full, 0, weight, degraded, pace)
    // only shadow members refuse: admitted, they charged nothing (a refusal takes nothing)
    for (const i of shadows) {
      count(leaves[i], true, weight, degraded, weight, 'shadowRefused')
      view[i] = Object.create(view[i], {
        _count: { value: () => {} },
        _give: { value: () => Promise.resolve(false) },
      })
      full[MEMBER * i + DELAY_US] = 0
      full[MEMBER * i + ADMITTED] = 1
    }
    const o = decided._outcome(full, 0, weight, degraded, pace)
    o.reason = 'shadow'
    return o
  })
}

/** Member `leaf` of a composite under an allow: counted admitted with nothing charged, nothing to give back. */
function unlimited(leaf) {
  return Object.create(leaf, {
    _count: { value: (_out, _i, w, degraded) => count(leaf, true, w, degraded, 0) },
    _give: { value: () => Promise.resolve(false) },
  })
}

/**
 * Pacer `p` with the rate and burst its calls are decided at now: a rule's `qps` and
 * `maxBurst` when one overrides them (a block and a slot given back use them too), else `p`.
 */
function ruledView(p) {
  if (p._store.rules._table.size === 0) return p
  const e = entryOf(p)
  return overridden(p, e === undefined ? undefined : e.rule)
}

module.exports = { ruledPacer, ruledComposite, ruledView, entryOf, DENIED_RETRY_MS }
