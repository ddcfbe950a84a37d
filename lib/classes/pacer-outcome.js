'use strict'
// What a pacer's pace() and rateLimit() resolve with (PacerOutcome), and how an outcome is read
// from the pacer kind's result (lib/kinds/pacer.js): shared by lib/classes/pacer.js and the rules'
// answers (lib/classes/pacer-rules.js).

const PACER = require('../kinds/pacer')
const { delay_us: DELAY_US, admitted: ADMITTED } = PACER.RESULT

/** `x.toFixed(2)` for the watermark (0 <= x <= 1e9), at a third of the cost. */
function fixed2(x) {
  const cents = Math.round(x * 100)
  const whole = Math.trunc(cents / 100)
  const frac = cents - whole * 100
  return whole + (frac < 10 ? '.0' : '.') + frac
}

/** `delayMs` of a decision: whole ms, rounded up so nobody starts before their slot. */
const delayMsOf = (delayUs) => (delayUs > 0 ? Math.ceil(delayUs / 1000) : 0)
/** Whether the member's decision at `out[i..]` admitted: it was paced, or it starts now. */
const admittedAt = (out, i) => out[i + ADMITTED] === 1 || out[i + DELAY_US] === 0

/**
 * What `pace()` and `rateLimit()` resolve with: `{ delayMs, reason, watermark | pacer,
 * degraded }`, and `cancel()`, which gives back what the call took when it will not be made.
 */
class PacerOutcome {
  #owner // the pacer or composite charged (null: nothing to give back)
  #weight
  #pace
  #atMs // when the slot starts, on the store's clock (a composite: per member)
  constructor(delayMs, reason, name, value, degraded, owner, weight, pace, atMs) {
    this.delayMs = delayMs
    this.reason = reason
    this[name] = value
    this.degraded = degraded
    this.#owner = owner
    this.#weight = weight
    this.#pace = pace
    this.#atMs = atMs
  }

  /**
   * Gives back what this call took, for a call that will not be made (its caller gave up, or
   * decided otherwise): a paced slot that has not started goes to the next caller, of any
   * process while it is the last one queued (the queue's tail moves back to its start), else
   * of this process (its next pace() on the key takes it, at the slot's own time: starting
   * with the last one queued would be a burst the pacer never allows); an admitted
   * rateLimit() gives its weight back to the bucket. Resolves true when given back, false
   * when there was nothing to give (refused, weight 0, answered without Redis, cancelled
   * already, or a slot whose time has come: it is spent). A store failure rejects (the slot
   * then stays spent: the error is on the side of admitting less).
   */
  async cancel() {
    const owner = this.#owner
    if (owner === null) return false
    this.#owner = null
    return owner._give(this.#weight, this.#pace, this.#atMs)
  }
}

/**
 * A composite's outcome with each member's watermark as `watermarks`, for sluice's own readers
 * (the HTTP doors' headers): not enumerable, so the public result is `{ delayMs, reason,
 * pacer, degraded }` (JSON, spreads and deep equality do not show it).
 */
function withMarks(outcome, watermarks) {
  return Object.defineProperty(outcome, 'watermarks', { value: watermarks, enumerable: false })
}

module.exports = { PacerOutcome, withMarks, fixed2, delayMsOf, admittedAt }
