// @ts-check
'use strict'
// The errors a store makes itself (closed, statistics off or unwritable, Redis found down),
// which native failures say that Redis is unreachable, and those failures naming the server.

const { SluiceError } = require('../base/errors')

/** Errors that say Redis itself is unreachable or too slow (they open the circuit). */
const STORE_FAILURES = new Set(['ERR_STORE_UNAVAILABLE', 'ERR_TIMEOUT'])

const closedError = () => new SluiceError('ERR_CLOSED', 'the store is closed')

const statsOffError = () =>
  new SluiceError('ERR_INVALID_CONFIG', 'statistics are off for this store (it was made with stats: false)')

/** A statistics operation's reply saying one of its keys holds another type (lua/stats.lua). */
const isWrongTypeReply = (r) => Array.isArray(r) && r.length === 1 && r[0] === 'WRONGTYPE'

const statsWrongTypeError = (what) =>
  new SluiceError(
    'ERR_SCRIPT',
    `a key of the ${what} holds a value of another type: another writer uses this store's key prefix`,
  )

/**
 * `error` naming the server when it says Redis is unreachable or too slow (a STORE_FAILURES
 * code): ` (Redis at 127.0.0.1:6379)` added to its message, once. `server` comes from
 * lib/store/options.js serverOf: host:port, never a user name or password. An error that
 * names its server already (a cluster call's: `(Redis at cluster node host:port)`, the master
 * of its slot, src/store/redis/script.rs) keeps that name rather than the seeds. Returns `error`.
 */
function atServer(error, server) {
  if (server && error instanceof Error && STORE_FAILURES.has(/** @type {any} */ (error).code)) {
    if (!error.message.includes('(Redis at ')) error.message = `${error.message} (Redis at ${server})`
  }
  return error
}

module.exports = { STORE_FAILURES, atServer, closedError, statsOffError, isWrongTypeReply, statsWrongTypeError }
