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

/** Every error sluice throws or rejects with. `code` is stable; messages are not. */
class SluiceError extends Error {
  constructor(code, message, options) {
    super(message, options)
    this.name = 'SluiceError'
    this.code = code
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

const NATIVE_CODE = /^(ERR_[A-Z_]+): ([\s\S]*)$/

/** Turns an error from the native layer into a SluiceError with its code. */
function fromNative(err) {
  if (err instanceof SluiceError) return err
  const match = err && typeof err.message === 'string' ? NATIVE_CODE.exec(err.message) : null
  if (match && CODES.includes(match[1])) return new SluiceError(match[1], match[2], { cause: err })
  return new SluiceError('ERR_INTERNAL', String(err && err.message ? err.message : err), { cause: err })
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

module.exports = { CODES, SluiceError, OverLimitError, fromNative, invalidConfig, invalidArgument, ownProps }
