'use strict'

// Admissions of a Bucket or Window limiter taken ahead by one process, in batches charged in
// one call each, so that most jobs are admitted without a round trip.

const { elapsedMs } = require('../../classes/rate')

/** Admissions a process takes ahead in one call: 1 % of the limit, at most this many. */
const MAX_PREFETCH = 1024
/** Units taken ahead are used only while their window surely lasts (latency, clock skew). */
const PREFETCH_MARGIN_MS = 250

/**
 * Admissions taken ahead, per Bucket or Window limiter and process: a job that finds one runs
 * without a round trip. Each batch of units was charged to the limiter in one call and is
 * used only before the end of the window it was charged to, so the count per window stays
 * exact; what it may cost is under-admission, at most the units unused when a window ends
 * (2 % of the limit per process, at most 2048). Batches: [{ units, until }], earliest first.
 */
class Prefetch {
  constructor(limiter) {
    this.limiter = limiter
    this.chunk = Math.min(MAX_PREFETCH, Math.floor(limiter.limit / 100))
    this.batches = []
    this.refilling = null
  }

  /** A unit taken ahead, if one is left in a window that lasts. */
  take() {
    // on a monotonic clock (elapsedMs): a wall-clock step must not stretch a window's units
    // into the next window
    const now = elapsedMs(this.limiter._store)
    while (this.batches.length > 0) {
      const b = this.batches[0]
      if (b.until > now && b.units > 0) {
        b.units--
        if (this.left() < this.chunk) this.refill()
        return true
      }
      this.batches.shift()
    }
    return false
  }

  left() {
    let n = 0
    for (const b of this.batches) n += b.units
    return n
  }

  /** Charges `chunk` units in one call (in the background); a refusal simply adds none. */
  refill() {
    if (this.refilling !== null) return this.refilling
    const at = elapsedMs(this.limiter._store)
    this.refilling = this.limiter
      .check(this.chunk)
      .then(
        (d) => {
          if (d.allowed && !d.degraded) {
            this.batches.push({ units: this.chunk, until: at + d.resetAfterMs - PREFETCH_MARGIN_MS })
            this.batches.sort((a, b) => a.until - b.until)
          }
        },
        () => {},
      )
      .finally(() => {
        this.refilling = null
      })
    return this.refilling
  }
}

module.exports = { Prefetch }
