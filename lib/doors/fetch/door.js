'use strict'
// The gates of one pacedFetch or interceptor (lib/doors/fetch/gate.js: one per key), made on first
// use, at most MAX_GATES of them; a call's key (checked) and whether an answer is retried.

const ADAPTIVE = require('../../kinds/adaptive')
const { SluiceError } = require('../../base/errors')
const { keyLimits } = require('./options')
const { Gate, MAX_GATES } = require('./gate')

const MAX_KEY_LENGTH = 500
/** Without Retry-After, a retry waits this long (doubling per attempt, capped by maxBlockMs) in this process. */
const BACKOFF_MS = 250

/** The gates of one pacedFetch or interceptor, by key. */
class FetchDoor {
  constructor(config) {
    this.config = config
    this.store = config.store
    this.gates = new Map()
    ADAPTIVE.addDoor(this.store, this) // for sluice/metrics' rate gauges
  }

  /** The key of a call (`key(url, init)` or the origin), checked: a bad one fails the call. */
  keyOf(url, init) {
    const key = this.config.key === null ? url.origin : this.config.key(url, init)
    if (typeof key !== 'string' || key.length === 0 || key.length > MAX_KEY_LENGTH || !key.isWellFormed()) {
      throw new SluiceError(
        'ERR_INVALID_ARGUMENT',
        `key(url, init) must return a non-empty string of at most ${MAX_KEY_LENGTH} characters, with no lone surrogate`,
      )
    }
    return key
  }

  /** The gate of `key`, made on first use (`limits(key)` asked then). */
  async gate(key) {
    let g = this.gates.get(key)
    if (g !== undefined) return g
    const make = (m) => new SluiceError('ERR_INVALID_ARGUMENT', m)
    const limits = this.config.limits === null ? null : keyLimits(await this.config.limits(key), make)
    g = this.gates.get(key) // made by another call meanwhile
    if (g !== undefined) return g
    if (this.gates.size >= MAX_GATES) this.gates.delete(this.gates.keys().next().value)
    g = new Gate(this, key, limits)
    this.gates.set(key, g)
    return g
  }

  /**
   * ms a retry waits in this process beyond the key's pacing, after an answer that asked
   * `seen` (observe()): none when the key's block makes it wait; the Retry-After of a status
   * that does not block the fleet; else a doubling backoff (not with the adaptive rate).
   */
  backoffMs(attempt, seen) {
    if (seen.blockMs > 0) return 0
    if (seen.retryAfterMs > 0) return seen.retryAfterMs
    if (this.config.adaptive !== null) return 0
    return Math.min(BACKOFF_MS * 2 ** attempt, this.config.maxBlockMs)
  }

  /** Whether a call answered `status` with `method` may be retried, as attempt `attempt` (0-based). */
  retries(status, method, attempt) {
    const r = this.config.retry
    return r !== null && attempt < r.maxRetries && r.statuses.has(status) && r.methods.has(method)
  }

  async stats(key) {
    if (key !== undefined) {
      const g = this.gates.get(key)
      return g === undefined ? [] : [g.stats()]
    }
    return [...this.gates.values()].map((g) => g.stats())
  }
}

module.exports = { FetchDoor }
