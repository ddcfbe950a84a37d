'use strict'

// What sluice/bullmq knows of each limiter kind, from the kinds' `bullmq` sections
// (lib/kinds/<kind>.js, by limiter class): which limiters are rate limiters, pacers or
// concurrent, which reserve later slots or may be prefetched, a limiter's sustained rate, the
// spacing of its slots, and how early a job that waits for a slot is delivered. The one place
// here that tells kinds apart.

const classes = require('../../classes')
const { classEntry } = require('../../kinds')

/** What the registry says of `l`'s class for sluice/bullmq (undefined: not a limiter it knows). */
const entryOf = (l) => classEntry(classes, l, 'bullmq')
const roleOf = (l) => entryOf(l)?.role
const isRateLimiter = (l) => roleOf(l) === 'rate'
const isPacer = (l) => roleOf(l) === 'pacer'
const isConcurrent = (l) => roleOf(l) === 'concurrent'
/** Limiters that charge a later slot now (`check` with a wait): Leaky and Points. */
const reservesSlots = (l) => entryOf(l)?.reserves === true
/** Limiters whose admissions may be taken ahead (see prefetch.js): Bucket and Window. */
const prefetchable = (l) => entryOf(l)?.prefetch === true
/** A pacer that can wait for a slot of its own (`pace()`): DistributedPacer. */
const paces = (l) => entryOf(l)?.paces === true
const nameOf = (l) => l.name || l.key || 'composite'

/** A rate limiter's sustained rate, per second (the slowest window of a sliding limiter). */
const rateOf = (limiter) => entryOf(limiter).rateOf(limiter)

/** The time between two slots of a rate limiter or pacer at its sustained rate, ms. */
function spacingMs(limiter) {
  const e = entryOf(limiter)
  return e.spacingMs ? e.spacingMs(limiter) : 1000 / e.rateOf(limiter)
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
const membersOf = (limiter) => entryOf(limiter)?.members?.(limiter) ?? [limiter]

module.exports = {
  isRateLimiter,
  isPacer,
  isConcurrent,
  paces,
  reservesSlots,
  prefetchable,
  nameOf,
  rateOf,
  spacingMs,
  leadOf,
  membersOf,
}
