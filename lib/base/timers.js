'use strict'

/**
 * The longest delay `setTimeout` keeps: above it Node (and browsers) fire after 1 ms instead
 * (a TimeoutOverflowWarning), so a 30-day wait would end at once.
 */
const MAX_TIMEOUT_MS = 2 ** 31 - 1 // ~24.8 days

/**
 * Calls `fn` once, `ms` from now, whatever `ms` is (options accept up to 10 years): on a
 * ManualClock (`clock`), when that clock reaches it; otherwise with `setTimeout`, re-armed in
 * steps of at most MAX_TIMEOUT_MS, so it never fires early. A real timer keeps the process
 * alive like `setTimeout` unless `unref` is true. A non-positive or NaN `ms` fires on the next
 * timer turn (at once on a ManualClock); `Infinity` never fires. Returns a function that
 * cancels it (a no-op once it fired).
 */
function longTimeout(fn, ms, { clock = null, unref = false } = {}) {
  if (clock) return clock._schedule(ms > 0 ? ms : 0, fn)
  let left = ms > 0 ? ms : 0
  let timer = null
  const arm = () => {
    const step = Math.min(left, MAX_TIMEOUT_MS)
    left -= step
    timer = setTimeout(left > 0 ? arm : fn, step)
    if (unref) timer.unref()
  }
  arm()
  return () => clearTimeout(timer)
}

module.exports = { longTimeout, MAX_TIMEOUT_MS }
