'use strict'
// The package entry `sluice` (CJS): the errors, the clock, the stores and every public class
// (lib/classes/index.js, in the order the package has always listed them). Written as an object
// of names and a spread `require` so that Node's CommonJS lexer finds every name: index.mjs
// re-exports them from here by `export *` (the one list of the package's exports).

const { SluiceError, OverLimitError, CODES } = require('../base/errors')
const { ManualClock } = require('../base/clock')
const { MemoryStore, RedisStore } = require('../store')

module.exports = {
  SluiceError,
  OverLimitError,
  ErrorCodes: CODES,
  ManualClock,
  MemoryStore,
  RedisStore,
  ...require('../classes'),
}
