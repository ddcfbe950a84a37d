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
class SluiceError extends Error {
  constructor(code, message, options) {
    super(message, options)
    this.name = 'SluiceError'
    this.code = code
    if (options && DETAILS.includes(options.detail)) this.detail = options.detail
  }
}

/** Thrown by the waiting calls (`withinLimit`, `ensure`, `acquire`) when over a limit. */
class OverLimitError extends SluiceError {
  constructor(message, { limiter, retryAfterMs }) {
    super('ERR_OVER_LIMIT', message)
    this.name = 'OverLimitError'
    this.limiter = limiter
    this.retryAfterMs = retryAfterMs
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

module.exports = {
  CODES,
  DETAILS,
  SluiceError,
  OverLimitError,
  fromNative,
  isNativeError,
  orThrow,
  invalidConfig,
  invalidArgument,
  ownProps,
}
