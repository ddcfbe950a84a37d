'use strict'
// Every store key sluice writes is named here, the one owner of the layout:
//   <prefix>:<segment>[:v<version>]:{<tag>}[:<part>...]
// The segment is a kind's or an algorithm's name, or one of the store's own (statistics, the
// registry, the circuit's probe); the tag, in braces, is the Redis Cluster hash tag (every key
// of one limiter, one window group or one statistics row lives in one slot), made of names
// %-escaped so that no name can leave it; a version segment marks a layout that changed (the
// old keys expire on their own). scripts/ttl-scan.js finds sluice's keys with KEY_PATTERN.

/** The segments a key can have after its prefix. */
const SEGMENTS = Object.freeze([
  'pacer',
  'bucket',
  'window',
  'leaky',
  'points',
  'concurrent',
  'sliding',
  'sliding-counter',
  'quota',
  'fair',
  'fair-approx',
  'budget',
  'adaptive',
  'stats',
  'limiters',
  'probe',
  'rules',
])

/** A key of sluice's, whatever its prefix (a prefix holds no `:`, `{` or `}`). */
const KEY_PATTERN = new RegExp(`^[^:{}]+:(${SEGMENTS.join('|')})(:v\\d+)?:\\{`)

/** `name` as a part of a hash tag that cannot leave it or split a batch: `%`, braces and newlines %-escaped. */
function escapeKey(name) {
  return /[%{}\n]/.test(name)
    ? name.replace(/[%{}\n]/g, (c) => '%' + c.charCodeAt(0).toString(16).toUpperCase().padStart(2, '0'))
    : name
}

/**
 * The key of `name` under `segment` in `store`: `name` escaped into the hash tag; `version`
 * (a layout's version segment, none when 0) and `parts` (after the tag) as given.
 */
function storeKey(store, segment, name, version = 0, parts = undefined) {
  return taggedKey(store, segment, escapeKey(name), version, parts)
}

/** The same with a hash tag made already of escaped parts (see escapeKey). */
function taggedKey(store, segment, tag, version = 0, parts = undefined) {
  // the common key, in one template: a limiter is often made per request
  if (version === 0 && parts === undefined) return `${store.keyPrefix}:${segment}:{${tag}}`
  const v = version > 0 ? `:v${version}` : ''
  const tail = parts === undefined ? '' : `:${parts.join(':')}`
  return `${store.keyPrefix}:${segment}${v}:{${tag}}${tail}`
}

module.exports = { SEGMENTS, KEY_PATTERN, escapeKey, storeKey, taggedKey }
