'use strict'

// What sluice/bullmq knows of each limiter kind: which kinds are rate limiters, pacers or
// reserve later slots, a limiter's sustained rate, the spacing of its slots, and how early a
// job that waits for a slot is delivered. The one place here that tells kinds apart.

const { DistributedPacer, PacerComposite } = require('../pacer')
const { BucketLimiter, WindowLimiter, LeakyLimiter, PointsLimiter } = require('../limiters')
const { SlidingWindowLimiter } = require('../windows')

const isRateLimiter = (l) =>
  l instanceof BucketLimiter ||
  l instanceof WindowLimiter ||
  l instanceof LeakyLimiter ||
  l instanceof PointsLimiter ||
  l instanceof SlidingWindowLimiter
const isPacer = (l) => l instanceof DistributedPacer || l instanceof PacerComposite
/** Limiters that charge a later slot now (`check` with a wait): Leaky and Points. */
const reservesSlots = (l) => l instanceof LeakyLimiter || l instanceof PointsLimiter
/** Limiters whose admissions may be taken ahead (see prefetch.js): Bucket and Window. */
const prefetchable = (l) => l instanceof BucketLimiter || l instanceof WindowLimiter
const nameOf = (l) => l.name || l.key || 'composite'

/** A rate limiter's sustained rate, per second (the slowest window of a sliding limiter). */
function rateOf(limiter) {
  if (limiter instanceof SlidingWindowLimiter) {
    return Math.min(...limiter.windows.map((w) => (w.limit * 1000) / w.intervalMs))
  }
  return (limiter.limit * 1000) / limiter.intervalMs
}

/** The time between two slots of a rate limiter or pacer at its sustained rate, ms. */
function spacingMs(limiter) {
  if (limiter instanceof DistributedPacer) return 1000 / limiter._qps
  if (limiter instanceof PacerComposite) return Math.max(0, ...limiter._leaves.map((p) => 1000 / p._qps))
  return 1000 / rateOf(limiter)
}

/**
 * A delayed BullMQ job starts up to a few hundred ms after its time (a worker's BZPOPMIN times
 * out on the Redis clock tick, 100 ms at Redis's default hz 10, and busy workers fetch later),
 * so jobs that start at reserved slots would bunch (measured: 11-13 starts in a second at
 * 10/s). A job that waits for a slot is delivered this much early and waits for the slot
 * itself: four slots' spacing, at most SLOT_LEAD_MS, so that on average about four worker
 * slots per limiter are held waiting, whatever the rate.
 */
const SLOT_LEAD_MS = 400
const leadOf = (limiter) => Math.min(SLOT_LEAD_MS, 4 * spacingMs(limiter))

/** The members a composite's statistics are kept on (a limiter alone: itself). */
const membersOf = (limiter) => (limiter instanceof PacerComposite ? limiter._leaves : [limiter])

module.exports = {
  isRateLimiter,
  isPacer,
  reservesSlots,
  prefetchable,
  nameOf,
  rateOf,
  spacingMs,
  leadOf,
  membersOf,
}
