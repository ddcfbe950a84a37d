// @ts-check
'use strict'
// The errors a store makes itself (closed, statistics off or unwritable, Redis found down),
// and which native failures say that Redis is unreachable.

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

module.exports = { STORE_FAILURES, closedError, statsOffError, isWrongTypeReply, statsWrongTypeError }
