'use strict'

const { invalidArgument } = require('./errors')

const MAX_MS = 9e12 // ~2255 AD; keeps µs arithmetic exact in a double

function checkMs(name, ms) {
  if (typeof ms !== 'number' || !Number.isFinite(ms) || ms < 0 || ms > MAX_MS) {
    throw invalidArgument(`${name} must be a finite number of milliseconds in [0, ${MAX_MS}], got ${String(ms)}`)
  }
  return ms
}

/**
 * A clock that moves only when told to. Give it to a store (`new MemoryStore({ clock })`,
 * `RedisStore.connect({ clock })`) and every decision of that store uses its time instead of
 * the system clock or the Redis server clock.
 */
class ManualClock {
  constructor(startMs = 0) {
    this._ms = checkMs('startMs', startMs)
  }
  /** Current time, ms since the epoch. */
  now() {
    return this._ms
  }
  /** Sets the time (it may go backwards, as real clocks do). */
  set(ms) {
    this._ms = checkMs('ms', ms)
  }
  /** Moves the time forward. */
  advance(ms) {
    checkMs('ms', ms)
    this._ms = checkMs('time', this._ms + ms)
  }
  /** @internal whole microseconds, as the stores take them */
  _nowUs() {
    return Math.round(this._ms * 1000)
  }
}

module.exports = { ManualClock }
