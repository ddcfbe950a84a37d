// @ts-check
'use strict'
// The store's rules (../shared/DESIGN.md §9) checked before anything is written: a target is
// structured (never a packed string: names may contain any character), a rule carries only the
// fields its target's kind has, each within that kind's bounds. Every refusal is
// ERR_INVALID_ARGUMENT, with what was given (escaped: a name is hostile input).

const { invalidArgument, describeValue } = require('../../base/errors')
const { isName, MAX_NAME_BYTES } = require('../../base/names')
const { MAX_LIMIT, MAX_INTERVAL_MS, MAX_WINDOWS } = require('../bounds')

/** Most operator rules one store holds (the doors' bans have a table of their own). */
const MAX_RULES = 100_000
/** The longest note, UTF-8 bytes. */
const MAX_NOTE_BYTES = 1024
/** Most dimensions a budget rule names (a Budget has at most 8). */
const MAX_DIMENSIONS = 8

// the override fields each kind has (every kind also has mode, access, note)
const RATE = ['limit', 'intervalMs']
const FIELDS_OF_KIND = new Map([
  ['bucket', RATE],
  ['window', RATE],
  ['leaky', RATE],
  ['points', RATE],
  ['sliding-counter', [...RATE, 'windows']],
  ['sliding', ['windows']],
  ['concurrent', ['limit']],
  ['pacer', ['qps', 'maxBurst']],
  ['adaptive', ['qps', 'maxBurst']],
  ['budget', ['dimensions']],
  ['fair', []],
  ['quota', []],
])
/** The fields of a door's rules (one client key, a prefix of them, or the whole door). */
const DOOR_FIELDS = ['limit', 'intervalMs', 'windows']
/** The fields of a budget tenant's rules. */
const TENANT_FIELDS = ['dimensions']
const COMMON = ['mode', 'access', 'note']

/**
 * A target checked: `{ kind, name }`, `{ kind, prefix }` (`''`: every name of the kind),
 * `{ door }` with at most one of `key` and `keyPrefix`, or `{ budget, tenant }`; exactly those
 * fields. Returns a fresh object with the fields in a fixed order.
 * @param {unknown} target
 */
function checkTarget(target) {
  if (target === null || typeof target !== 'object' || Array.isArray(target)) {
    throw invalidArgument(`a rule's target must be an object, got ${describeValue(target)}`)
  }
  const t = /** @type {Record<string, unknown>} */ (target)
  const keys = Object.keys(t)
  const only = (allowed) => {
    const extra = keys.filter((k) => !allowed.includes(k))
    if (extra.length > 0) {
      throw invalidArgument(`a rule's target has no field ${JSON.stringify(extra[0])} (target ${describeValue(t)})`)
    }
  }
  const name = (field) => {
    if (!isName(t[field])) {
      throw invalidArgument(
        `target.${field} must be a non-empty string of at most ${MAX_NAME_BYTES} bytes (UTF-8), got ${describeValue(t[field])}`,
      )
    }
    return /** @type {string} */ (t[field])
  }
  const prefix = (field) => {
    if (t[field] === '') return ''
    return name(field)
  }
  if ('kind' in t) {
    if (typeof t.kind !== 'string' || !FIELDS_OF_KIND.has(t.kind)) {
      throw invalidArgument(
        `target.kind must be one of ${[...FIELDS_OF_KIND.keys()].join(', ')}, got ${describeValue(t.kind)}`,
      )
    }
    if ('name' in t) {
      only(['kind', 'name'])
      return { kind: t.kind, name: name('name') }
    }
    if ('prefix' in t) {
      only(['kind', 'prefix'])
      return { kind: t.kind, prefix: prefix('prefix') }
    }
    throw invalidArgument(`a { kind } target needs a name or a prefix, got ${describeValue(t)}`)
  }
  if ('door' in t) {
    only(['door', 'key', 'keyPrefix'])
    const door = name('door')
    if ('key' in t && 'keyPrefix' in t) throw invalidArgument('a door target takes key or keyPrefix, not both')
    if ('key' in t) return { door, key: name('key') }
    if ('keyPrefix' in t) return { door, keyPrefix: prefix('keyPrefix') }
    return { door }
  }
  if ('budget' in t) {
    only(['budget', 'tenant'])
    return { budget: name('budget'), tenant: name('tenant') }
  }
  throw invalidArgument(
    `a rule's target is { kind, name }, { kind, prefix }, { door, key | keyPrefix } or { budget, tenant }, got ${describeValue(t)}`,
  )
}

/** The override fields a checked target's rules may carry. */
function fieldsOf(target) {
  if ('kind' in target) return /** @type {string[]} */ (FIELDS_OF_KIND.get(target.kind))
  if ('door' in target) return DOOR_FIELDS
  return TENANT_FIELDS
}

/**
 * A target's identity: the same for equal targets, different for different ones, whatever
 * their names hold (JSON of a fixed-order array: no separator a name could contain).
 */
function targetId(target) {
  if ('kind' in target)
    return JSON.stringify('name' in target ? ['n', target.kind, target.name] : ['p', target.kind, target.prefix])
  if ('door' in target) {
    if ('key' in target) return JSON.stringify(['dk', target.door, target.key])
    return JSON.stringify(['dp', target.door, target.keyPrefix ?? ''])
  }
  return JSON.stringify(['t', target.budget, target.tenant])
}

const integer = (what, v, min, max) => {
  if (!Number.isInteger(v) || v < min || v > max) {
    throw invalidArgument(`${what} must be an integer in [${min}, ${max}], got ${describeValue(v)}`)
  }
  return v
}

/** `windows` checked: 1 to MAX_WINDOWS of `{ limit, intervalMs }`. */
function checkWindows(windows) {
  if (!Array.isArray(windows) || windows.length === 0 || windows.length > MAX_WINDOWS) {
    throw invalidArgument(
      `windows must be an array of 1 to ${MAX_WINDOWS} { limit, intervalMs }, got ${describeValue(windows)}`,
    )
  }
  return windows.map((w, i) => {
    if (w === null || typeof w !== 'object' || Object.keys(w).some((k) => k !== 'limit' && k !== 'intervalMs')) {
      throw invalidArgument(`windows[${i}] must be { limit, intervalMs }, got ${describeValue(w)}`)
    }
    return {
      limit: integer(`windows[${i}].limit`, w.limit, 1, MAX_LIMIT),
      intervalMs: integer(`windows[${i}].intervalMs`, w.intervalMs, 1, MAX_INTERVAL_MS),
    }
  })
}

/**
 * A rule for `target` (checked) checked: only the fields its kind has, each within bounds; at
 * least one of an override, `mode` or `access`; `access` alone or with `note` (an allowed or
 * denied client has no limit to override). Returns a fresh rule without `target`.
 * @param {object} target
 * @param {unknown} rule
 */
function checkRule(target, rule) {
  if (rule === null || typeof rule !== 'object' || Array.isArray(rule)) {
    throw invalidArgument(`a rule must be an object, got ${describeValue(rule)}`)
  }
  const r = /** @type {Record<string, unknown>} */ (rule)
  const fields = fieldsOf(target)
  for (const k of Object.keys(r)) {
    if (r[k] === undefined) continue
    if (!fields.includes(k) && !COMMON.includes(k)) {
      const where = 'kind' in target ? `a ${target.kind} rule` : 'door' in target ? "a door's rule" : "a tenant's rule"
      throw invalidArgument(
        `${where} has no field ${JSON.stringify(k)} (it takes ${[...fields, ...COMMON].join(', ')})`,
      )
    }
  }
  /** @type {Record<string, any>} */
  const out = {}
  if (r.limit !== undefined) out.limit = integer('limit', r.limit, 1, MAX_LIMIT)
  if (r.intervalMs !== undefined) out.intervalMs = integer('intervalMs', r.intervalMs, 1, MAX_INTERVAL_MS)
  if (r.windows !== undefined) out.windows = checkWindows(r.windows)
  if (r.qps !== undefined) {
    if (typeof r.qps !== 'number' || !(r.qps > 0) || r.qps > MAX_LIMIT) {
      throw invalidArgument(`qps must be a number in (0, ${MAX_LIMIT}], got ${describeValue(r.qps)}`)
    }
    out.qps = r.qps
  }
  if (r.maxBurst !== undefined) out.maxBurst = integer('maxBurst', r.maxBurst, 0, MAX_LIMIT)
  if (r.dimensions !== undefined) out.dimensions = checkDimensions(r.dimensions)
  if (r.mode !== undefined) {
    if (r.mode !== 'enforce' && r.mode !== 'shadow') {
      throw invalidArgument(`mode must be 'enforce' or 'shadow', got ${describeValue(r.mode)}`)
    }
    out.mode = r.mode
  }
  if (r.access !== undefined) {
    if (r.access !== 'allow' && r.access !== 'deny') {
      throw invalidArgument(`access must be 'allow' or 'deny', got ${describeValue(r.access)}`)
    }
    out.access = r.access
  }
  const overrides = Object.keys(out).filter((k) => k !== 'mode' && k !== 'access')
  if (out.access !== undefined && (overrides.length > 0 || out.mode !== undefined)) {
    throw invalidArgument(
      `a rule with access '${out.access}' takes no limit nor mode (it has ${[...overrides, ...(out.mode ? ['mode'] : [])].join(', ')})`,
    )
  }
  if (Object.keys(out).length === 0) {
    throw invalidArgument(
      `a rule needs an override (${fields.join(', ') || 'none for this kind'}), a mode or an access`,
    )
  }
  if (r.note !== undefined) {
    if (typeof r.note !== 'string' || !r.note.isWellFormed() || Buffer.byteLength(r.note) > MAX_NOTE_BYTES) {
      throw invalidArgument(
        `note must be a string of at most ${MAX_NOTE_BYTES} bytes (UTF-8), got ${describeValue(r.note)}`,
      )
    }
    out.note = r.note
  }
  return out
}

/** A budget rule's `dimensions`: 1 to MAX_DIMENSIONS names, each `{ limit }`. */
function checkDimensions(dimensions) {
  if (dimensions === null || typeof dimensions !== 'object' || Array.isArray(dimensions)) {
    throw invalidArgument(`dimensions must be an object of { limit } by dimension, got ${describeValue(dimensions)}`)
  }
  const names = Object.keys(dimensions)
  if (names.length === 0 || names.length > MAX_DIMENSIONS) {
    throw invalidArgument(`dimensions must name 1 to ${MAX_DIMENSIONS} dimensions, got ${names.length}`)
  }
  /** @type {Record<string, { limit: number }>} */
  const out = {}
  for (const d of names) {
    if (!isName(d)) throw invalidArgument(`a dimension's name must be a name, got ${describeValue(d)}`)
    const v = dimensions[d]
    if (v === null || typeof v !== 'object' || Object.keys(v).some((k) => k !== 'limit')) {
      throw invalidArgument(`dimensions[${JSON.stringify(d)}] must be { limit }, got ${describeValue(v)}`)
    }
    out[d] = { limit: integer(`dimensions[${JSON.stringify(d)}].limit`, v.limit, 1, MAX_LIMIT) }
  }
  return out
}

/** A rule's `ttlMs` option: a whole number of ms in [1, MAX_INTERVAL_MS], or none. */
function checkTtl(options) {
  if (options === undefined) return undefined
  if (options === null || typeof options !== 'object') {
    throw invalidArgument(`options must be { ttlMs }, got ${describeValue(options)}`)
  }
  const extra = Object.keys(options).filter((k) => k !== 'ttlMs')
  if (extra.length > 0) throw invalidArgument(`set() takes { ttlMs }, got a field ${JSON.stringify(extra[0])}`)
  if (options.ttlMs === undefined) return undefined
  return integer('ttlMs', options.ttlMs, 1, MAX_INTERVAL_MS)
}

module.exports = { MAX_RULES, MAX_NOTE_BYTES, checkTarget, checkRule, checkTtl, targetId, fieldsOf }
