// @ts-check
'use strict'

// store.rules at an HTTP door (DESIGN §9): the rule of a client key (its own, a prefix of
// keys, the whole door; a ban first), a request a rule denies (403, no store call), the windows
// an override gives a key, and the door's `ban`: refusals tallied fleet-wide (in the decision's
// own script call where the kind can: lib/kinds/limit.js), each `after`-th within `withinMs`
// a ban of `forMs` every process honours.

const classes = require('../../classes')
const { storeKey } = require('../../store/keys')
const { OP } = require('../../kinds/limit')
const { keyId, nameOf } = require('./key')
const { outcome } = require('./outcome')
const { MAX_LIMIT } = require('./options')

/**
 * The rule of store.rules for client `key` of `door` (by its counter identifier), or
 * undefined: one property read when the store has no rule
 */
function ruleOf(door, key) {
  const c = door.config
  const table = c.store.rules._table
  if (c.counter === undefined || (table.size === 0 && table._banCount === 0)) return undefined
  return c.store.rules._forDoorKey(c.counter, key)?.rule
}

/**
 * Where the refusals of counter `name` are tallied for `ban`: a window of `ban.withinMs` under
 * the counter's hash tag (`<prefix>:window:{<name>}:ban`), opened at the first refusal
 */
function tallyOf(door, name) {
  const c = door.config
  return { key: storeKey(c.store, 'window', name, 0, ['ban']), limit: MAX_LIMIT, intervalUs: c.ban.withinMs * 1000 }
}

/**
 * Refusal `o` of client `key` at `door` under `ban`: its refusals (tallied by the decision's
 * own script call when its kind can, else counted here in one more call), and at each
 * `ban.after`-th of them within `ban.withinMs` the client banned for `ban.forMs` in every
 * process (store.rules): this refusal is then the ban's, a 403
 */
async function banAfter(door, key, o) {
  const c = door.config
  // refused without Redis (whenDown): no fleet-wide count to go by
  if (o.degraded) return o
  let n = o.refusals
  if (n === undefined) {
    const name = nameOf(c.counter, keyId(key))
    const tally = new classes.WindowLimiter(c.store, { name, limit: MAX_LIMIT, interval: c.ban.withinMs })
    tally._uncounted()._storeKey = tallyOf(door, name).key
    const d = await tally._countAt(MAX_LIMIT, OP.adjust)
    n = d.degraded ? 0 : MAX_LIMIT - d.remaining
  }
  // every `after`-th refusal in the window bans (one decision of the fleet sees each: the
  // tally is atomic), so a client unbanned, or whose ban ended, is refused `after` times more first
  if (n === 0 || n % c.ban.after !== 0) return o
  await c.store.rules._ban(c.counter, key, door.now() + c.ban.forMs)
  o.reason = 'denied'
  o.banned = true
  o.retryAfterMs = c.ban.forMs
  return o
}

/** A request of client `key` a rule denies at `door`: refused with no store call (403). */
function denied(door, key) {
  const c = door.config
  const windows = (c.windows ?? [{ name: c.identifier ?? '', limit: 0, windowMs: 0 }]).map((w) => ({
    name: w.name,
    limit: w.limit ?? 0,
    windowMs: w.windowMs ?? 0,
    remaining: 0,
    resetMs: 0,
  }))
  const o = outcome(key, 1, windows, false, false, 0, null, door.now())
  o.reason = 'denied'
  return o
}

/**
 * The windows a rule gives a door key (`windows` as the door computed them), or null when the
 * rule overrides no limit: its own `windows`, else the door's with its `limit` and `intervalMs`.
 */
function ruledWindows(windows, rule) {
  if (rule.windows !== undefined) return rule.windows.map((w) => ({ limit: w.limit, windowMs: w.intervalMs }))
  if (rule.limit === undefined && rule.intervalMs === undefined) return null
  return windows.map((w) => ({ limit: rule.limit ?? w.limit, windowMs: rule.intervalMs ?? w.windowMs }))
}

const copyWindow = (w) => ({ limit: w.limit, windowMs: w.windowMs })

/** Counts `reason` ('shadow', 'denied') of a door's request in its statistics. */
function ruledEvent(store, owner, reason) {
  const book = store._stats
  if (book !== null) book.event(owner, reason === 'shadow' ? 'shadowRefused' : 'denied')
}

module.exports = { ruleOf, tallyOf, banAfter, denied, ruledWindows, copyWindow, ruledEvent }
