'use strict'

// A job under a ConcurrentLimiter: its lease taken within `maxWaitMs`, held (and extended)
// for the whole run and released in every outcome; Sidekiq's backoff for a refused job.

const { SluiceError } = require('../../base/errors')
const { longTimeout, MAX_TIMEOUT_MS } = require('../../base/timers')

/**
 * Sidekiq Enterprise's limiter backoff, in ms: `300 * overrated + rand(300) + 1` seconds,
 * `overrated` counting from 1 at the first reschedule. The default for a ConcurrentLimiter
 * (whose slots free up at no known time); pass it as `backoff` to get it for any limiter.
 */
function sidekiqBackoff(overrated) {
  return (300 * overrated + Math.floor(Math.random() * 300) + 1) * 1000
}

/** A lease within `maxWaitMs` (and the limiter's own waitTimeoutMs), or null. */
async function lease(limiter, maxWaitMs) {
  if (maxWaitMs === 0) return limiter.tryAcquire()
  // not AbortSignal.timeout: it overflows like setTimeout (a wait over 24.8 days ended at once)
  const ac = new AbortController()
  const cancel = longTimeout(() => ac.abort(new DOMException('timed out', 'TimeoutError')), maxWaitMs, { unref: true })
  try {
    return await limiter.acquire({ signal: ac.signal })
  } catch (err) {
    if (err instanceof SluiceError && (err.code === 'ERR_OVER_LIMIT' || err.code === 'ERR_ABORTED')) return null
    throw err
  } finally {
    cancel()
  }
}

/** Runs `fn` holding `held`: extended while it runs, released in every outcome. */
async function holding(limiter, held, fn) {
  // at most the longest timer (setInterval overflows above 2^31 - 1 ms and would fire every ms)
  const every = Math.min(MAX_TIMEOUT_MS, Math.max(250, Math.floor(limiter._lockTimeoutMs / 2)))
  const timer = setInterval(() => held.extend().catch(() => {}), every)
  timer.unref()
  try {
    return await fn()
  } finally {
    clearInterval(timer)
    await held.release().catch(() => {})
  }
}

module.exports = { sidekiqBackoff, lease, holding }
