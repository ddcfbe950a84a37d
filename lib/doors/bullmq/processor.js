'use strict'

// limitProcessor: wraps a BullMQ processor so that each job runs only when its limiter admits
// it, and a refused job goes back to delayed (no attempt spent) for a slot of its own or a
// backoff, or fails with OverLimitError past `reschedule` refusals.

const { OverLimitError, invalidConfig, describeValue, knownOptions } = require('../../base/errors')
const { MAX_MS } = require('../../classes/rate')
const {
  isRateLimiter,
  isPacer,
  isConcurrent,
  reservesSlots,
  prefetchable,
  nameOf,
  spacingMs,
  leadOf,
} = require('./roles')
const { slotAfter, reserve } = require('./slots')
const { Prefetch } = require('./prefetch')
const { admit } = require('./admit')
const { sidekiqBackoff, lease, holding } = require('./concurrent')
const { readMark, moveUntil } = require('./mark')
const { loadBullmq, sleep } = require('./support')

const OPTIONS = ['limiter', 'reschedule', 'backoff', 'maxWaitMs', 'prefetch']
const DEFAULT_RESCHEDULE = 20
const MAX_RESCHEDULE = 1_000_000

/**
 * Wraps a BullMQ processor: `limiter(job)` names the limiter of a job (a Bucket, Window,
 * Leaky, Points or SlidingWindow limiter, a DistributedPacer or PacerComposite, a
 * ConcurrentLimiter), or null for none. Admitted: the job runs (a concurrent lease is held
 * for the whole run, extended while it runs, released in every outcome).
 *
 * Not admitted within `maxWaitMs` (default 0), the job goes back to delayed without spending
 * an attempt, for a slot of its own (unless `backoff` is given or `reschedule` is 0): a
 * pacer's `pace()` or a Leaky/Points reservation (charged now, run at its time, never charged
 * twice), or for a Bucket, Window or SlidingWindow limiter a slot from its reschedule queue
 * (the limiter's rate, from when it reopens). A move that only waits for a slot the job
 * already holds is not counted; a refusal by the limiter is, and past `reschedule` of them
 * (default 20; 0: the first refusal fails) the job fails with OverLimitError and BullMQ's
 * attempts take over. With `backoff(job, overrated, err)`, a refused job runs again that many
 * ms later instead (each such move counted); a ConcurrentLimiter's default is Sidekiq's.
 */
function limitProcessor(processor, options) {
  if (typeof processor !== 'function')
    throw invalidConfig(`processor must be a function, got ${describeValue(processor)}`)
  if (options === null || typeof options !== 'object' || Array.isArray(options)) {
    throw invalidConfig('options must be an object { limiter, reschedule?, backoff?, maxWaitMs? }')
  }
  knownOptions(options, OPTIONS, 'limitProcessor')
  const { limiter, reschedule = DEFAULT_RESCHEDULE, backoff, maxWaitMs = 0, prefetch = true } = options
  if (typeof prefetch !== 'boolean') throw invalidConfig(`prefetch must be a boolean, got ${describeValue(prefetch)}`)
  if (typeof limiter !== 'function') throw invalidConfig('limiter must be a function (job) => limiter | null')
  if (!Number.isInteger(reschedule) || reschedule < 0 || reschedule > MAX_RESCHEDULE) {
    throw invalidConfig(`reschedule must be an integer in [0, ${MAX_RESCHEDULE}]`)
  }
  if (backoff !== undefined && typeof backoff !== 'function') {
    throw invalidConfig('backoff must be a function (job, overrated, err) => ms')
  }
  if (!Number.isInteger(maxWaitMs) || maxWaitMs < 0 || maxWaitMs > MAX_MS) {
    throw invalidConfig(`maxWaitMs must be an integer in [0, ${MAX_MS}]`)
  }
  const { DelayedError } = loadBullmq()
  // refused jobs get a slot of their own, unless the user chose the delay or no reschedules
  const reserving = reschedule > 0 && backoff === undefined
  // Bucket and Window limiters of 100 or more per window take admissions ahead (see Prefetch)
  const prefetches = new WeakMap()
  const prefetchOf = (l) => {
    if (!prefetch || !prefetchable(l) || l.limit < 100) return null
    let p = prefetches.get(l)
    if (p === undefined) prefetches.set(l, (p = new Prefetch(l)))
    return p
  }

  /** Back to delayed until `at` to wait for a slot the job holds: not counted. */
  async function waitForSlot(job, token, chosen, at, mark) {
    await moveUntil(job, token, chosen, at, leadOf(chosen), mark)
    const ms = Math.max(0, Math.ceil(at - Date.now()))
    throw new DelayedError(`job ${job.id} waits ${ms} ms for its slot of ${nameOf(chosen)}`)
  }

  /** Refused by the limiter: back to delayed (counted), or OverLimitError past `reschedule`. */
  async function overLimit(job, token, chosen, retryAfterMs, counted) {
    const name = nameOf(chosen)
    const overrated = counted + 1
    const err = new OverLimitError(`job ${job.id} is over the limit of ${name}`, { limiter: name, retryAfterMs })
    if (overrated > reschedule) {
      err.message = `job ${job.id} is over the limit of ${name} after ${reschedule} reschedules`
      throw err
    }
    let delayMs
    if (backoff) delayMs = await backoff(job, overrated, err)
    else if (isConcurrent(chosen)) delayMs = sidekiqBackoff(overrated)
    else if (isPacer(chosen)) delayMs = retryAfterMs
    else delayMs = await slotAfter(chosen, retryAfterMs)
    if (typeof delayMs !== 'number' || !Number.isFinite(delayMs) || delayMs < 0) {
      throw invalidConfig(`backoff must return ms >= 0, got ${describeValue(delayMs)}`)
    }
    // a slot from the reschedule queue is waited for as any slot; a backoff is not a slot
    const leadMs = backoff || isConcurrent(chosen) ? 0 : Math.min(leadOf(chosen), delayMs)
    await moveUntil(job, token, chosen, Date.now() + delayMs, leadMs, { c: overrated, h: false, b: false })
    throw new DelayedError(err.message)
  }

  /**
   * Runs the job once its slot, `delayMs` away and already charged, has come: waits for it
   * here when it is within `maxWaitMs` or the lead, else in delayed.
   */
  async function atSlot(job, token, chosen, delayMs, counted) {
    if (delayMs > Math.max(maxWaitMs, leadOf(chosen))) {
      return waitForSlot(job, token, chosen, Date.now() + delayMs, { c: counted, h: true })
    }
    if (delayMs > 0) await sleep(delayMs)
    return processor(job, token)
  }

  return async function limitedProcessor(job, token) {
    const chosen = await limiter(job)
    if (chosen === null || chosen === undefined) return processor(job, token)
    const concurrent = isConcurrent(chosen)
    if (!concurrent && !isRateLimiter(chosen) && !isPacer(chosen)) {
      throw invalidConfig('limiter(job) must return a sluice limiter, a pacer, a composite, or null')
    }
    const mark = await readMark(job)
    const counted = mark === null ? 0 : mark.c
    // the state written for this very run (a slot it holds), if any
    const held = mark !== null && mark.r === job.attemptsStarted ? mark : null
    if (concurrent) {
      const got = await lease(chosen, maxWaitMs)
      if (got === null) return overLimit(job, token, chosen, 0, counted)
      return holding(chosen, got, () => processor(job, token))
    }
    // a slot charged for this run: it runs at its time, and is never charged twice
    if (held !== null && held.h) return atSlot(job, token, chosen, Math.max(0, held.at - Date.now()), counted)
    if (reserving && (isPacer(chosen) || reservesSlots(chosen))) {
      const delayMs = await reserve(chosen)
      if (delayMs >= 0) return atSlot(job, token, chosen, delayMs, counted)
      return overLimit(job, token, chosen, -delayMs, counted)
    }
    let bounced = false
    if (held !== null) {
      // a slot of the reschedule queue: the job was delivered up to the lead early
      const early = held.at - Date.now()
      if (early > Math.max(maxWaitMs, leadOf(chosen))) return waitForSlot(job, token, chosen, held.at, held)
      if (early > 0) await sleep(early)
      bounced = held.b
    }
    for (;;) {
      const retryAfterMs = await admit(chosen, maxWaitMs, prefetchOf(chosen))
      if (retryAfterMs === 0) return processor(job, token)
      // a job at its slot whose limiter reopens sooner than the next slot (its window began
      // a little late): it waits for that, once, without losing its turn
      if (!reserving || held === null || bounced || retryAfterMs > spacingMs(chosen)) {
        return overLimit(job, token, chosen, retryAfterMs, counted)
      }
      bounced = true
      if (retryAfterMs > leadOf(chosen)) {
        return waitForSlot(job, token, chosen, Date.now() + retryAfterMs, { c: counted, h: false, b: true })
      }
      await sleep(retryAfterMs)
    }
  }
}

module.exports = { limitProcessor }
