// @ts-check
'use strict'

// Looking at the limiters a store has seen, for operators (the CLI and sluice/dashboard): a
// limiter object made from a registry entry, its statistics and its live state, read without
// charging anything, and its limit and state in words. What each kind gives is its `inspect`
// section (lib/kinds/<kind>.js), found through the registry.

const classes = require('../classes')
const { STATS_KINDS, BY_STATS_KIND } = require('../kinds')
const { ALGORITHMS } = require('./http/options')
const { nameOf, keyId } = require('./http/key')
const { count, ms, interval, termText } = require('./words')

/** What the door kind builds a client's counter from (lib/kinds/door.js `keyLimiter`). */
const HTTP_DOOR = { algorithms: ALGORITHMS, counterName: (name, key) => nameOf(name, keyId(String(key))) }

/** Every statistics kind (what `store.limiters()` names each entry's kind). */
const KINDS = STATS_KINDS

/** What the kind of a statistics kind tells these tools (its `inspect` section), or {}. */
/** @type {(kind: string) => Partial<import('../kinds/contract').InspectSection>} */
const inspectOf = (kind) => BY_STATS_KIND.get(kind)?.inspect ?? {}

/** The kinds whose counts `reset()` forgets. */
const RESETTABLE = STATS_KINDS.filter((kind) => inspectOf(kind).resettable === true)

/** A limiter object for a registry entry `{ kind, name, options }` (null when the kind has none, e.g. a quota prefix). */
function limiterOf(store, info) {
  const make = inspectOf(info.kind).limiter
  return make ? make(classes, store, info) : null
}

/**
 * The counter of one client of an HTTP door's registry entry, by the client's key (for a
 * reset), or null when the entry is no door or its options do not name its counters.
 */
function keyLimiterOf(store, info, key) {
  const make = inspectOf(info.kind).keyLimiter
  return make ? make(classes, store, info, key, HTTP_DOOR) : null
}

/** The statistics of a registry entry, over every process. */
async function statsOf(store, info) {
  const own = inspectOf(info.kind).stats
  if (own) return own(classes, store, info)
  return limiterOf(store, info).stats()
}

/**
 * What the limiter holds now, read without charging: remaining per limit, leases held and
 * waiters, the pacer's backlog. `fill` is how full it is, 0..1 (null when a kind has no
 * single fill: quotas, fair tenants).
 */
async function stateOf(store, info) {
  const limiter = limiterOf(store, info)
  const state = inspectOf(info.kind).state
  return state ? state(limiter, info) : { fill: null }
}

/** A short text of a limiter's limit, from its registry options. */
function limitText(info) {
  const text = inspectOf(info.kind).limitText
  return text ? text(info.options || {}, interval, info) : ''
}

/** Words for numbers and durations in a state's text (as the dashboard page shows them). */
const WORDS = { count, ms, interval }

/** What a limiter's live state (stateOf's) says, in words ('' when its kind has none). */
function stateWords(info, state) {
  const words = inspectOf(info.kind).words
  return words ? words(state, WORDS) : ''
}

// --- showing names to people --------------------------------------------------------------

/** `s` in double quotes, escaped for a terminal (`"` inside as `\"`). */
function quoted(s) {
  return `"${termText(s).replaceAll('"', '\\"')}"`
}

/**
 * JSON text made safe for a terminal without changing what it parses to: JSON.stringify
 * already escapes C0 controls and lone surrogates; this escapes DEL, C1 controls, bidi
 * controls and line separators as `\uXXXX` too.
 */
function jsonText(value, indent) {
  return JSON.stringify(value, null, indent).replace(
    /[\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g,
    (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`,
  )
}

/**
 * A Redis URL with its whole userinfo masked: `redis://***@host:6379/0`. The userinfo is taken
 * to end at the LAST `@` after `//` (a password may hold `@`, `/`, `?` or `#`): a URL with an
 * `@` in its path or query is masked up to there too, never less. No `@`: the URL as given.
 */
function maskUrl(url) {
  const s = String(url)
  const slashes = s.indexOf('//')
  const start = slashes < 0 ? 0 : slashes + 2
  const at = s.lastIndexOf('@')
  if (at < start) return s
  return `${s.slice(0, start)}***${s.slice(at)}`
}

/**
 * `text` with the secrets of `url` (its whole userinfo, as maskUrl takes it, and the part
 * after its first `:`) replaced by `***`, also as they appear inside a quoted string: for
 * messages of dependencies that may quote the URL as given.
 */
function redactIn(text, url) {
  const s = String(url)
  const slashes = s.indexOf('//')
  const start = slashes < 0 ? 0 : slashes + 2
  const at = s.lastIndexOf('@')
  if (at < start) return String(text)
  const userinfo = s.slice(start, at)
  const colon = userinfo.indexOf(':')
  const secrets = [userinfo, colon < 0 ? '' : userinfo.slice(colon + 1)].filter((x) => x.length > 0)
  let out = String(text)
  for (const secret of secrets) {
    for (const form of new Set([secret, JSON.stringify(secret).slice(1, -1)])) out = out.split(form).join('***')
  }
  return out
}

module.exports = {
  KINDS,
  RESETTABLE,
  limiterOf,
  keyLimiterOf,
  statsOf,
  stateOf,
  limitText,
  stateWords,
  termText,
  quoted,
  jsonText,
  maskUrl,
  redactIn,
}
