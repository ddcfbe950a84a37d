'use strict'

const { invalidArgument, describeValue } = require('./errors')

const MAX_MS = 9e12 // ~2255 AD; keeps µs arithmetic exact in a double

function checkMs(name, ms) {
  if (typeof ms !== 'number' || !Number.isFinite(ms) || ms < 0 || ms > MAX_MS) {
    throw invalidArgument(`${name} must be a finite number of milliseconds in [0, ${MAX_MS}], got ${describeValue(ms)}`)
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
    this._timers = [] // { at, fire } waiting for the clock to reach `at`
  }
  /** Current time, ms since the epoch. */
  now() {
    return this._ms
  }
  /** Sets the time (it may go backwards, as real clocks do). */
  set(ms) {
    this._ms = checkMs('ms', ms)
    this._fire()
  }
  /** Moves the time forward; waits of sluice that end by then (withinLimit, acquire) end. */
  advance(ms) {
    checkMs('ms', ms)
    this._ms = checkMs('time', this._ms + ms)
    this._fire()
  }
  _fire() {
    if (this._timers.length === 0) return
    const due = this._timers.filter((t) => t.at <= this._ms)
    this._timers = this._timers.filter((t) => t.at > this._ms)
    for (const t of due.sort((a, b) => a.at - b.at)) t.fire()
  }
  /** @internal calls `fire` once the clock reaches now + ms; returns a cancel function */
  _schedule(ms, fire) {
    const timer = { at: this._ms + ms, fire }
    if (timer.at <= this._ms) {
      fire()
      return () => {}
    }
    this._timers.push(timer)
    return () => {
      this._timers = this._timers.filter((t) => t !== timer)
    }
  }
  /** @internal whole microseconds, as the stores take them */
  _nowUs() {
    return Math.round(this._ms * 1000)
  }
}

module.exports = { ManualClock }
