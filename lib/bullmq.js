'use strict'

// sluice/bullmq: BullMQ processors limited by any sluice limiter, with Sidekiq Enterprise's
// "reschedule an over-limit job with backoff" behaviour. BullMQ is the app's own dependency:
// it is loaded when a processor is made, not when sluice is.

const { OverLimitError, SluiceError, invalidConfig } = require('./errors')
const { ConcurrentLimiter } = require('./concurrent')
const { DistributedPacer, PacerComposite } = require('./pacer')
const { BucketLimiter, WindowLimiter, LeakyLimiter, PointsLimiter, MAX_MS } = require('./limiters')
const { SlidingWindowLimiter } = require('./windows')

const OPTIONS = ['limiter', 'reschedule', 'backoff', 'maxWaitMs', 'prefetch']
const DEFAULT_RESCHEDULE = 20
const MAX_RESCHEDULE = 1_000_000
/** Admissions a process takes ahead in one call: 1 % of the limit, at most this many. */
const MAX_PREFETCH = 1024
/** Units taken ahead are used only while their window surely lasts (latency, clock skew). */
const PREFETCH_MARGIN_MS = 250

function loadBullmq() {
  try {
    return require('bullmq')
  } catch (err) {
    throw new SluiceError('ERR_INVALID_CONFIG', 'sluice/bullmq needs the bullmq package: npm install bullmq', {
      cause: err,
    })
  }
}

/**
 * Sidekiq Enterprise's limiter backoff, in ms: `300 * overrated + rand(300) + 1` seconds,
 * `overrated` counting from 1 at the first reschedule.
 */
function sidekiqBackoff(overrated) {
  return (300 * overrated + Math.floor(Math.random() * 300) + 1) * 1000
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

const isRateLimiter = (l) =>
  l instanceof BucketLimiter ||
  l instanceof WindowLimiter ||
  l instanceof LeakyLimiter ||
  l instanceof PointsLimiter ||
  l instanceof SlidingWindowLimiter
const isPacer = (l) => l instanceof DistributedPacer || l instanceof PacerComposite

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
    const now = Date.now()
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
    const at = Date.now()
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
  const deadline = Date.now() + maxWaitMs
  for (;;) {
    const retryMs = await tryOnce(limiter, prefetch)
    if (retryMs === 0) return 0
    if (retryMs > deadline - Date.now()) return retryMs
    await sleep(retryMs)
  }
}

/** A lease within `maxWaitMs` (and the limiter's own waitTimeoutMs), or null. */
async function lease(limiter, maxWaitMs) {
  if (maxWaitMs === 0) return limiter.tryAcquire()
  try {
    return await limiter.acquire({ signal: AbortSignal.timeout(maxWaitMs) })
  } catch (err) {
    if (err instanceof SluiceError && (err.code === 'ERR_OVER_LIMIT' || err.code === 'ERR_ABORTED')) return null
    throw err
  }
}

/** Runs `fn` holding `held`: extended while it runs, released in every outcome. */
async function holding(limiter, held, fn) {
  const every = Math.max(250, Math.floor(limiter._lockTimeoutMs / 2))
  const timer = setInterval(() => held.extend().catch(() => {}), every)
  timer.unref()
  try {
    return await fn()
  } finally {
    clearInterval(timer)
    await held.release().catch(() => {})
  }
}

/**
 * How many times the job was moved back to delayed so far: its runs, minus the one under
 * way, its failed attempts and its stalls (BullMQ counts a run in `attemptsStarted` each
 * time the job becomes active, and a delay spends no attempt).
 */
function reschedules(job) {
  const n = (job.attemptsStarted || 0) - 1 - (job.attemptsMade || 0) - (job.stalledCounter || 0)
  return Math.max(0, n)
}

/**
 * Wraps a BullMQ processor: `limiter(job)` names the limiter of a job (a Bucket, Window,
 * Leaky, Points or SlidingWindow limiter, a DistributedPacer or PacerComposite, a
 * ConcurrentLimiter), or null for none. Admitted: the job runs (a concurrent lease is held
 * for the whole run, extended while it runs, released in every outcome). Over the limit for
 * longer than `maxWaitMs` (default 0): the job goes back to delayed without spending an
 * attempt, `backoff(job, overrated, err)` ms later (default Sidekiq's, or a pacer's own
 * delay), at most `reschedule` times (default 20; 0: never); then it fails with
 * OverLimitError and BullMQ's attempts take over.
 */
function limitProcessor(processor, options) {
  if (typeof processor !== 'function') throw invalidConfig('processor must be a function')
  if (options === null || typeof options !== 'object' || Array.isArray(options)) {
    throw invalidConfig('options must be an object { limiter, reschedule?, backoff?, maxWaitMs? }')
  }
  for (const name of Object.keys(options)) {
    if (!OPTIONS.includes(name)) throw invalidConfig(`unknown limitProcessor option ${JSON.stringify(name)}`)
  }
  const { limiter, reschedule = DEFAULT_RESCHEDULE, backoff, maxWaitMs = 0, prefetch = true } = options
  if (typeof prefetch !== 'boolean') throw invalidConfig('prefetch must be a boolean')
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
  // Bucket and Window limiters of 100 or more per window take admissions ahead (see Prefetch)
  const prefetches = new WeakMap()
  const prefetchOf = (l) => {
    if (!prefetch || !(l instanceof BucketLimiter || l instanceof WindowLimiter) || l.limit < 100) return null
    let p = prefetches.get(l)
    if (p === undefined) prefetches.set(l, (p = new Prefetch(l)))
    return p
  }

  /** Over the limit: back to delayed (no attempt spent), or OverLimitError past `reschedule`. */
  async function overLimit(job, token, chosen, retryAfterMs) {
    const name = chosen.name || chosen.key || 'composite'
    const overrated = reschedules(job) + 1
    const err = new OverLimitError(`job ${job.id} is over the limit of ${name}`, { limiter: name, retryAfterMs })
    if (overrated > reschedule) {
      err.message = `job ${job.id} is over the limit of ${name} after ${reschedule} reschedules`
      throw err
    }
    let delayMs
    if (backoff) delayMs = await backoff(job, overrated, err)
    else delayMs = isPacer(chosen) ? retryAfterMs : sidekiqBackoff(overrated)
    if (typeof delayMs !== 'number' || !Number.isFinite(delayMs) || delayMs < 0) {
      throw invalidConfig(`backoff must return ms >= 0, got ${String(delayMs)}`)
    }
    await job.moveToDelayed(Date.now() + Math.ceil(delayMs), token)
    throw new DelayedError(err.message)
  }

  return async function limitedProcessor(job, token) {
    const chosen = await limiter(job)
    if (chosen === null || chosen === undefined) return processor(job, token)
    if (chosen instanceof ConcurrentLimiter) {
      const held = await lease(chosen, maxWaitMs)
      if (held === null) return overLimit(job, token, chosen, 0)
      return holding(chosen, held, () => processor(job, token))
    }
    if (!isRateLimiter(chosen) && !isPacer(chosen)) {
      throw invalidConfig('limiter(job) must return a sluice limiter, a pacer, a composite, or null')
    }
    const retryAfterMs = await admit(chosen, maxWaitMs, prefetchOf(chosen))
    if (retryAfterMs > 0) return overLimit(job, token, chosen, retryAfterMs)
    return processor(job, token)
  }
}

module.exports = { limitProcessor, sidekiqBackoff }
