// @ts-check
'use strict'
// The kind registry: every kind of call the stores run, one line each, in the order and with
// the codes of src/store/kinds/mod.rs. The stores, the store-down policy, the statistics, the
// HTTP doors, lib/doors/inspect.js (CLI, dashboard), sluice/metrics and sluice/bullmq iterate it
// instead of switching on kinds (see lib/kinds/contract.d.ts for what a kind file gives each).

/** @type {import('./contract').Kind[]} */
const KINDS = [
  require('./pacer'),
  require('./limit'),
  require('./sliding'),
  require('./quota'),
  require('./fair'),
  require('./concurrent'),
  require('./sliding-counter'),
  require('./adaptive'),
  require('./budget'),
]

/**
 * Statistics kinds of no store kind: an HTTP door (one limiter over all its clients, whose
 * counters are of its algorithm's kind). Listed by statistics and the inspecting tools only.
 */
/** @type {import('./contract').Registered[]} */
const STATS_ONLY = [require('./door')]

/** The kind of each statistics kind (`bucket` -> the limit kind, ...). */
/** @type {Map<string, import('./contract').Registered>} */
const BY_STATS_KIND = new Map([...KINDS, ...STATS_ONLY].flatMap((k) => k.statsKinds.map((s) => [s, k])))

/** Every statistics kind, as `store.limiters()` and the dashboard name them. */
const STATS_KINDS = [...BY_STATS_KIND.keys()]

const byName = Object.fromEntries(KINDS.map((k) => [k.name, k]))

/** path -> [[className, entry]] over the registry (see classEntries) */
const entriesByPath = new Map()

/**
 * Every `[className, entry]` of the section at `path` (e.g. 'bullmq', 'door.limiters') of
 * every kind, in registry order: a section maps the name of a limiter class, as the package
 * exports it (lib/classes/index.js), to what a site knows of that class.
 */
function classEntries(path) {
  let list = entriesByPath.get(path)
  if (list === undefined) {
    const at = (kind) => path.split('.').reduce((o, p) => (o === undefined ? o : o[p]), kind)
    list = KINDS.flatMap((k) => Object.entries(at(k) ?? {}))
    entriesByPath.set(path, list)
  }
  return list
}

/**
 * The entry of the section at `path` for the class `limiter` is an instance of, or undefined.
 * `classes` is the public classes by name (lib/classes/index.js), given by the site: a kind
 * file names its classes and never requires them (they require it).
 */
function classEntry(classes, limiter, path) {
  for (const [name, entry] of classEntries(path)) if (limiter instanceof classes[name]) return entry
  return undefined
}

module.exports = { KINDS, BY_STATS_KIND, STATS_KINDS, classEntries, classEntry, ...byName }
