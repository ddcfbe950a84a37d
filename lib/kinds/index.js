'use strict'
// The kind registry: every kind of call the stores run, one line each, in the order and with
// the codes of src/store/kinds/mod.rs. The stores, the store-down policy and the statistics
// iterate it instead of switching on kinds.

const KINDS = [
  require('./pacer'),
  require('./limit'),
  require('./sliding'),
  require('./quota'),
  require('./fair'),
  require('./concurrent'),
]

/** The kind of each statistics kind (`bucket` -> the limit kind, ...). */
const BY_STATS_KIND = new Map(KINDS.flatMap((k) => k.statsKinds.map((s) => [s, k])))

/** Every statistics kind, as `store.limiters()` and the dashboard name them. */
const STATS_KINDS = [...BY_STATS_KIND.keys()]

const byName = Object.fromEntries(KINDS.map((k) => [k.name, k]))

module.exports = { KINDS, BY_STATS_KIND, STATS_KINDS, ...byName }
