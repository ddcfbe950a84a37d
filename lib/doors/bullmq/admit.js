'use strict'

// Admitting a job now or within `maxWaitMs`: one try of a rate limiter (through its
// prefetched admissions) or a pacer, retried when the limiter says, and a pacer's wait that
// reserves no slot it will not wait for.

const { isPacer, paces } = require('./roles')
const { sleep } = require('./support')

/** One try of a rate limiter or pacer: 0 when admitted (and charged), else ms to retry after. */
async function tryOnce(limiter, prefetch) {
  if (isPacer(limiter)) return (await limiter.rateLimit()).delayMs
  if (prefetch !== null) {
    if (prefetch.take()) return 0
    await prefetch.refill() // one call for the jobs that found the pool empty
    if (prefetch.take()) return 0
  }
  const d = await limiter.check()
  return d.allowed ? 0 : Math.max(1, d.retryAfterMs)
}

/** Admits within `maxWaitMs` (retrying when the limiter says), or the last retry hint. */
async function admit(limiter, maxWaitMs, prefetch) {
  if (maxWaitMs > 0 && paces(limiter)) return paced(limiter, maxWaitMs)
  const deadline = Date.now() + maxWaitMs
  for (;;) {
    const retryMs = await tryOnce(limiter, prefetch)
    if (retryMs === 0) return 0
    if (retryMs > deadline - Date.now()) return retryMs
    await sleep(retryMs)
  }
}

/**
 * A pacer that may wait but reserves no slot it will not wait for (a job rescheduled by a
 * user's `backoff`): a slot in its queue (FIFO over every process, exactly `qps`) when the
 * queue's tail is within `maxWaitMs`; 0 once the slot has come, or the ms to retry after.
 * The probe (weight 0) charges nothing; a slot pushed past `maxWaitMs` by a concurrent
 * caller in between is given back (`outcome.cancel()`: the next caller takes it; a failure
 * to give it back leaves it spent, admitting less, never more).
 */
async function paced(pacer, maxWaitMs) {
  const probe = await pacer.rateLimit(0)
  if (probe.delayMs > maxWaitMs) return probe.delayMs
  const slot = await pacer.pace()
  if (slot.delayMs > maxWaitMs) {
    await slot.cancel().catch(() => false)
    return slot.delayMs
  }
  if (slot.delayMs > 0) await sleep(slot.delayMs)
  return 0
}

module.exports = { admit }
