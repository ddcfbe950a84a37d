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
 * 'enforce' (one property read and a comparison per call: the hot path without rules). An HTTP
 * door's counter of one client (kept out of statistics: `_statsAs` null) takes no rule of its
 * kind: the door's rules apply to it, at the door (lib/doors/http/door.js).
 */
const unruled = (owner) =>
  owner._mode === 'enforce' && (owner._store.rules._table.size === 0 || owner._statsAs === null)

/** The rule of `owner` (its statistics kind and its name) in force now, or undefined. */
function ruleOf(owner) {
  if (owner._statsAs === null) return undefined
  const e = owner._store.rules._forName(owner._statsKind, owner._name)
  return e === undefined ? undefined : e.rule
}

/** The mode a call of `owner` is decided in under `rule` (a rule's mode wins). */
const modeOf = (owner, rule) => (rule !== undefined && rule.mode !== undefined ? rule.mode : owner._mode)

/**
 * A take (or a peek) of `owner` under `rule` (undefined: none): `send(maxWaitUs, count)` makes
 * the store call with the rule's override already in it, `answer(allowed, reason)` makes a
 * decision with no round trip (a deny, an allow), `take`: a take (else a peek). A deny or an
 * allow is counted on a take (an allow at weight 0: nothing charged); in shadow mode a take is
 * decided at once (never a wait, never a reservation) and a refusal is admitted uncharged with
 * reason 'shadow', counted in `shadowRefused`.
 */
function applyRule(owner, rule, take, weight, maxWaitUs, count, send, answer) {
  if (rule !== undefined && rule.access === 'deny') {
    if (take) {
      // counted here whoever asked (check() or a wait: withinLimit counts no denial itself)
      owner._count(answer(false), weight)
      event(owner, 'denied')
    }
    return Promise.resolve(answer(false, 'denied'))
  }
  if (rule !== undefined && rule.access === 'allow') {
    if (take && count) owner._count(answer(true), 0)
    return Promise.resolve(answer(true))
  }
  if (modeOf(owner, rule) !== 'shadow' || !take) return send(maxWaitUs, count)
  // shadow: decided at once (never a wait, never a reservation), a refusal admitted uncharged
  return send(0, false).then((d) => {
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

/**
 * A take (or a peek) of a rate limiter `owner` under the rule that applies to it now: `send(limit,
 * intervalUs, maxWaitUs, count)` makes the store call (`limit`, `intervalUs`: the rule's override
 * or the owner's), `take`: a take (else a peek). Resolves with the decision, its `reason` set
 * when a rule or the mode answered ('denied', 'shadow').
 */
function ruledCall(owner, take, weight, maxWaitUs, count, send) {
  const rule = ruleOf(owner)
  const limit = rule !== undefined && rule.limit !== undefined ? rule.limit : owner._limit
  const intervalUs = rule !== undefined && rule.intervalMs !== undefined ? rule.intervalMs * 1000 : owner._intervalUs
  return applyRule(
    owner,
    rule,
    take,
    weight,
    maxWaitUs,
    count,
    (wait, counted) => send(limit, intervalUs, wait, counted),
    (allowed, reason) => ruledDecision(allowed, owner._limit, reason),
  )
}

/**
 * The windows a limiter of several windows (sliding, sliding-counter) decides on under `rule`:
 * the rule's `windows`, or one window of the rule's `limit` and `intervalMs` (what it leaves out:
 * the first window's), or the owner's own.
 */
function windowsOf(owner, rule) {
  if (rule === undefined) return owner._windows
  if (rule.windows !== undefined) return rule.windows
  if (rule.limit === undefined && rule.intervalMs === undefined) return owner._windows
  const first = owner._windows[0]
  return [{ limit: rule.limit ?? first.limit, intervalMs: rule.intervalMs ?? first.intervalMs }]
}

/** The spec numbers of `windows` (`[count, (limit, intervalUs) per window]`), as a call sends them. */
function specOf(windows) {
  const spec = [windows.length]
  for (const w of windows) spec.push(w.limit, w.intervalMs * 1000)
  return spec
}

/**
 * The windows of a decision a rule answered with no round trip (deny, allow) of a limiter of
 * several windows (sliding windows, sliding counters): all left (allowed) or none.
 */
function answeredWindows(owner, allowed) {
  return owner._windows.map((w) => ({
    limit: w.limit,
    intervalMs: w.intervalMs,
    remaining: allowed ? w.limit : 0,
    retryAfterMs: 0,
  }))
}

module.exports = {
  modeOption,
  ruledCall,
  unruled,
  ruleOf,
  modeOf,
  applyRule,
  event,
  windowsOf,
  specOf,
  answeredWindows,
}
