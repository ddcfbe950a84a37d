'use strict'
// The bounds every value from outside is checked against, defined once, in Rust
// (src/core/bounds.rs), and read here from the addon: JS refuses what the store would, before
// anything reaches it.

const native = require('../native')

/** Largest limit, weight, count or rate (qps). */
const MAX_LIMIT = native.MAX_LIMIT
/** Longest interval, window, block, wait or TTL, µs (10 years). */
const MAX_INTERVAL_US = native.MAX_INTERVAL_US

module.exports = {
  MAX_LIMIT,
  MAX_INTERVAL_US,
  /** The same, ms. */
  MAX_INTERVAL_MS: MAX_INTERVAL_US / 1000,
  /** The same, seconds. */
  MAX_INTERVAL_S: MAX_INTERVAL_US / 1e6,
  /** Most windows one limiter (or one door's key) counts at once. */
  MAX_WINDOWS: native.MAX_WINDOWS,
}
