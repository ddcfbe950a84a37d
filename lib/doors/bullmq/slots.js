'use strict'

// Slots charged now for a job that runs later: a pacer's `pace()`, a Leaky or Points
// limiter's reservation, and for the other rate limiters a reschedule queue (a pacer at the
// limiter's rate) that hands each refused job a slot of its own.

const { DistributedPacer } = require('../../classes/pacer')
const { MAX_MS } = require('../../classes/rate')
const { isPacer, rateOf } = require('./roles')

/** A reservation as far ahead as a wait may be (10 years), µs. */
const MAX_WAIT_US = MAX_MS * 1000
/** A pacer's qps is at most this (its own validation). */
const { MAX_LIMIT: MAX_QPS } = require('../../store/bounds')

/**
 * The reschedule queue of a rate limiter that cannot reserve a later slot itself (Bucket,
 * Window, SlidingWindow; Leaky and Points when a block refuses them): a pacer at the
 * limiter's sustained rate, on its own key in the same store
 * (`pacer:{sluice/bullmq:<kind>:<name>}`), that hands each refused job a slot of its own,
 * none before the limiter reopens. Its decisions are not counted in statistics: the limiter
 * counts its own decisions, and its reschedules.
 */
class SlotQueue extends DistributedPacer {
  _count() {}
}

/**
 * A slot for a job the limiter refused with `retryAfterMs`, as ms from now: the queue is
 * first blocked until the limiter reopens (a queue already reaching past that is kept), so
 * the slots of jobs refused together follow one another at the limiter's rate from there.
 */
async function slotAfter(limiter, retryAfterMs) {
  const queue = new SlotQueue(limiter._store, {
    key: `sluice/bullmq:${limiter._statsKind}:${limiter.name}`,
    qps: Math.min(MAX_QPS, rateOf(limiter)),
  })
  await queue.block(Math.min(MAX_MS, Math.max(1, Math.ceil(retryAfterMs))))
  return (await queue.pace()).delayMs
}

/**
 * A slot charged to the job now, for later: `pace()` of a pacer, a reservation of a Leaky or
 * Points limiter. Resolves with the ms until the slot, or -ms to retry after when refused
 * (a Leaky or Points limiter under `block()`).
 */
async function reserve(limiter) {
  if (isPacer(limiter)) return (await limiter.pace()).delayMs
  const d = await limiter._call(1, MAX_WAIT_US, true)
  return d.allowed ? d.retryAfterMs : -Math.max(1, d.retryAfterMs)
}

module.exports = { slotAfter, reserve }
