// @ts-check
'use strict'
// What a name is: of a limiter, a sliding window, a fair tenant, a budget (and its dimensions),
// and of the targets of the store's rules. Any text users name things by, bounded in bytes.

/** The longest name, UTF-8 bytes. */
const MAX_NAME_BYTES = 256

/**
 * Whether `name` can name a limiter: any non-empty string of at most MAX_NAME_BYTES UTF-8
 * bytes with no lone surrogate (it would reach the store as U+FFFD, so two names could share a
 * key). Store keys escape it (lib/store/keys.js), so `.`, `:`, `@`, spaces, `/`, `%`, braces or
 * any script are names like others, and a name of `[A-Za-z0-9_-]` keeps the key it always had.
 * @param {unknown} name
 * @returns {name is string}
 */
function isName(name) {
  if (typeof name !== 'string' || name.length === 0 || name.length > MAX_NAME_BYTES || !name.isWellFormed())
    return false
  // a UTF-16 code unit is at most 3 UTF-8 bytes: a short name needs no count (the common case)
  return name.length * 3 <= MAX_NAME_BYTES || Buffer.byteLength(name) <= MAX_NAME_BYTES
}

module.exports = { MAX_NAME_BYTES, isName }
