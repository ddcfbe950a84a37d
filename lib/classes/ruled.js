// @ts-check
'use strict'
// The store's rules (DESIGN §9, lib/store/rules/) applied where a call is built, in the process:
// a deny or an allow answers with no round trip, an override is the call's limit, shadow mode
// decides as if enforced and admits what would have been refused, at once.

const { invalidConfig } = require('../base/errors')
const { gotValue } = require('../base/errors')

/** The `mode` option of a limiter: 'enforce' (the default) or 'shadow'. */
function modeOption(mode) {
  if (mode === undefined || mode === 'enforce') return 'enforce'
  if (mode === 'shadow') return 'shadow'
  throw invalidConfig(`mode must be 'enforce' or 'shadow', ${gotValue(mode, ['enforce', 'shadow'])}`)
}

/** A decision answered by a rule, with no round trip: `allowed`, at `limit`, with `reason`. */
function ruledDecision(allowed, limit, reason) {
  const d = { allowed, limit, remaining: allowed ? limit : 0, retryAfterMs: 0, resetAfterMs: 0, degraded: false }
  if (reason !== undefined) d.reason = reason
  return d
}

/** Counts `field` (an extra statistics field, lib/store/stats.js) for `owner`. */
function event(owner, field) {
  const book = owner._store._stats
  if (book !== null && owner._statsAs !== null) book.event(owner, field)
}

/**
 * Whether `owner`'s calls go as they always did: no rule in its store's table and its own mode
 * 'enforce' (one property read and a comparison per call: the hot path without rules).
 */
const unruled = (owner) => owner._mode === 'enforce' && owner._store.rules._table.size === 0

/**
 * A take (or a peek) of `owner` under the rule that applies to it now: `send(limit, intervalUs,
 * maxWaitUs, count)` makes the store call (`limit`, `intervalUs`: the rule's override or the
 * owner's), `take`: a take (else a peek). Resolves with the decision, its `reason` set when a
 * rule or the mode answered ('denied', 'shadow').
 */
function ruledCall(owner, take, weight, maxWaitUs, count, send) {
  const e = owner._store.rules._forName(owner._statsKind, owner._name)
  const rule = e === undefined ? undefined : e.rule
  if (rule !== undefined && rule.access === 'deny') {
    if (take) {
      // counted here whoever asked (check() or a wait: withinLimit counts no denial itself)
      owner._count(ruledDecision(false, owner._limit), weight)
      event(owner, 'denied')
    }
    return Promise.resolve(ruledDecision(false, owner._limit, 'denied'))
  }
  if (rule !== undefined && rule.access === 'allow') {
    if (take && count) owner._count(ruledDecision(true, owner._limit), 0)
    return Promise.resolve(ruledDecision(true, owner._limit))
  }
  const limit = rule !== undefined && rule.limit !== undefined ? rule.limit : owner._limit
  const intervalUs = rule !== undefined && rule.intervalMs !== undefined ? rule.intervalMs * 1000 : owner._intervalUs
  const mode = rule !== undefined && rule.mode !== undefined ? rule.mode : owner._mode
  if (mode !== 'shadow' || !take) return send(limit, intervalUs, maxWaitUs, count)
  // shadow: decided at once (never a wait, never a reservation), a refusal admitted uncharged
  return send(limit, intervalUs, 0, false).then((d) => {
    if (d.allowed) {
      if (count) owner._count(d, weight)
      return d
    }
    const admitted = { ...d, allowed: true, retryAfterMs: 0, reason: 'shadow' }
    if (count) owner._count(admitted, weight)
    event(owner, 'shadowRefused')
    return admitted
  })
}

module.exports = { modeOption, ruledCall, unruled }
