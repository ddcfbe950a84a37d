'use strict'

/** The closed list of error codes (README, "Errors"). */
const CODES = Object.freeze([
  'ERR_INVALID_CONFIG',
  'ERR_INVALID_ARGUMENT',
  'ERR_OVER_LIMIT',
  'ERR_STORE_UNAVAILABLE',
  'ERR_TIMEOUT',
  'ERR_STORE_OOM',
  'ERR_SCRIPT',
  'ERR_CLOSED',
  'ERR_ABORTED',
  'ERR_INTERNAL',
  'ERR_CONFIG_RISK',
])

/** What a store failure was (`SluiceError.detail`), sorted once by the native layer. */
const DETAILS = Object.freeze(['node-down', 'topology-change', 'outage'])

/**
 * Every error sluice throws or rejects with. `code` is stable; messages are not. A store
 * failure (`ERR_STORE_UNAVAILABLE`, `ERR_TIMEOUT`) from the native layer also says what it was
 * in `detail`: 'node-down' (one cluster node lost: only its keys' calls fail), 'topology-change'
 * (the cluster moved a slot under the call) or 'outage' (the store as a whole).
 */
/** The brand of a sluice error made as another built-in error (SluiceTypeError). */
const BRAND = Symbol.for('sluice.error')

class SluiceError extends Error {
  constructor(code, message, options) {
    super(message, options)
    this.name = 'SluiceError'
    this.code = code
    if (options && DETAILS.includes(options.detail)) this.detail = options.detail
  }

  /** `instanceof SluiceError` holds for a SluiceTypeError too (its class line is TypeError's). */
  static [Symbol.hasInstance](value) {
    if (this === SluiceError && value !== null && typeof value === 'object' && value[BRAND] === true) return true
    return Function.prototype[Symbol.hasInstance].call(this, value)
  }
}

/**
 * A SluiceError that is also a TypeError, where a peer's contract throws one (express-rate-limit's
 * invalid `logger`): `instanceof TypeError` and `instanceof SluiceError`, with its `code`.
 */
class SluiceTypeError extends TypeError {
  constructor(code, message) {
    super(message)
    this.name = 'SluiceError'
    this.code = code
    Object.defineProperty(this, BRAND, { value: true })
  }
}

/** Thrown by the waiting calls (`withinLimit`, `ensure`, `acquire`) when over a limit. */
class OverLimitError extends SluiceError {
  constructor(message, { limiter, retryAfterMs, reason = 'limit' }) {
    super('ERR_OVER_LIMIT', message)
    this.name = 'OverLimitError'
    this.limiter = limiter
    this.retryAfterMs = retryAfterMs
    /** 'limit' (over it), or 'denied' (a rule of store.rules denies the caller) */
    this.reason = reason
  }
}

/**
 * Whether `v` is a failure the native layer answered as a value (`NativeError`: a call's
 * result, a promise's): `{ code, detail, message }`, fields, not a message to parse.
 */
function isNativeError(v) {
  return v !== null && typeof v === 'object' && !(v instanceof Error) && typeof v.code === 'string' && 'detail' in v
}

/**
 * Turns a failure from the native layer into a SluiceError: a `NativeError` value, or an error
 * it threw (its stable code in `code`, set by the native layer); anything else is a bug
 * (ERR_INTERNAL).
 */
function fromNative(err) {
  if (err instanceof SluiceError) return err
  if (isNativeError(err) && CODES.includes(err.code)) {
    return new SluiceError(err.code, err.message, { detail: err.detail })
  }
  if (err instanceof Error && CODES.includes(err.code)) return new SluiceError(err.code, err.message, { cause: err })
  return new SluiceError('ERR_INTERNAL', String(err && err.message ? err.message : err), { cause: err })
}

/** `v`, a value the native layer answered, or its failure thrown (see isNativeError). */
function orThrow(v) {
  if (isNativeError(v)) throw fromNative(v)
  return v
}

const invalidConfig = (message) => new SluiceError('ERR_INVALID_CONFIG', message)
const invalidArgument = (message) => new SluiceError('ERR_INVALID_ARGUMENT', message)

/**
 * The own enumerable properties of `o` in an object with no prototype: options are read from
 * it, so a polluted Object.prototype can never set one.
 */
function ownProps(o) {
  const out = Object.create(null)
  for (const k of Object.keys(o)) out[k] = o[k]
  return out
}

/**
 * A value as an error shows it, with its type: `the string "10"` (cut at 40 characters),
 * `the number 5`, `the boolean true`, `an object`, `an array`, `a function`, `null`,
 * `undefined`.
 */
function describeValue(v) {
  if (typeof v === 'string') {
    const shown = v.length > 40 ? `${v.slice(0, 40)}...` : v
    return `the string ${JSON.stringify(shown)}${v.length > 40 ? ` (${Buffer.byteLength(v)} bytes)` : ''}`
  }
  if (v === null || v === undefined) return String(v)
  if (Array.isArray(v)) return 'an array'
  if (typeof v === 'function') return 'a function'
  if (typeof v === 'object') return 'an object'
  return `the ${typeof v} ${String(v)}`
}

/**
 * The edit distance of `a` and `b` (optimal string alignment: an insertion, a deletion, a
 * substitution or a swap of two neighbours costs 1).
 */
function editDistance(a, b) {
  let before = null
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j)
  for (let i = 1; i <= a.length; i++) {
    const row = [i]
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1
      let d = Math.min(prev[j] + 1, row[j - 1] + 1, prev[j - 1] + cost)
      if (before !== null && i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) {
        d = Math.min(d, before[j - 2] + 1)
      }
      row.push(d)
    }
    before = prev
    prev = row
  }
  return prev[b.length]
}

/** A name compared loosely: case, `_` and `-` aside (`max_burst`, `MaxBurst`: `maxburst`). */
const loose = (name) => name.toLowerCase().replace(/[_-]/g, '')

/**
 * The name of `known` closest to `name` (`windowMS`: `windowMs`, `intervall`: `interval`,
 * `max_burst`: `maxBurst`), or null when none is close: at most max(2, a third of its
 * length) edits away, ignoring case, `_` and `-`, and fewer edits than `name` has characters.
 * Names longer than 100 characters are not compared.
 */
function closestName(name, known) {
  if (typeof name !== 'string' || name.length === 0 || name.length > 100) return null
  const typed = loose(name)
  let best = null
  let bestScore = Infinity
  for (const candidate of known) {
    if (candidate === name) continue
    const d = editDistance(typed, loose(candidate))
    const bound = Math.max(2, Math.floor(candidate.length / 3))
    if (d > bound || d >= Math.max(typed.length, 1)) continue
    // ties go to the candidate closer as written (case and separators counted)
    const score = d * 1000 + editDistance(name, candidate)
    if (score < bestScore) {
      best = candidate
      bestScore = score
    }
  }
  return best
}

/**
 * What an error about an unknown `name` adds after it: ` (did you mean "windowMs"?)` when one
 * of `known` is close, else ` (known: a, b, c)` when there are at most 20, else nothing.
 */
function suggestion(name, known) {
  const close = closestName(name, known)
  if (close !== null) return ` (did you mean ${JSON.stringify(close)}?)`
  return known.length <= 20 ? ` (known: ${known.join(', ')})` : ''
}

/**
 * The error for option `name` not among `known`: `unknown <what> option "windowMS"<where>
 * (did you mean "windowMs"?)`. `where`: ` in windows[0]` or ''; `make`: invalidConfig
 * (default) or invalidArgument.
 */
function unknownOption(name, known, what, { where = '', make = invalidConfig } = {}) {
  const shown = what ? `${what} option` : 'option'
  return make(`unknown ${shown} ${JSON.stringify(name)}${where}${suggestion(name, known)}`)
}

/**
 * What an error says of a value that is none of `allowed` (names): `got the string "minutes"
 * (did you mean "minute"?)`, the suggestion for a string close to one of them.
 */
function gotValue(value, allowed = []) {
  const close = typeof value === 'string' ? closestName(value, allowed) : null
  return `got ${describeValue(value)}${close === null ? '' : ` (did you mean ${JSON.stringify(close)}?)`}`
}

/** Throws `unknownOption` for the first own key of `o` not among `known` (see there). */
function knownOptions(o, known, what, how) {
  for (const key of Object.keys(o)) {
    if (!known.includes(key)) throw unknownOption(key, known, what, how)
  }
}

module.exports = {
  CODES,
  DETAILS,
  SluiceError,
  SluiceTypeError,
  OverLimitError,
  fromNative,
  isNativeError,
  orThrow,
  invalidConfig,
  invalidArgument,
  ownProps,
  describeValue,
  gotValue,
  closestName,
  suggestion,
  unknownOption,
  knownOptions,
}
