'use strict'
// The package entry `sluice` (CJS): the errors, the clock, the stores and every public class
// (lib/classes/index.js, in the order the package has always listed them).

const { SluiceError, OverLimitError, CODES } = require('../base/errors')
const { ManualClock } = require('../base/clock')
const { MemoryStore, RedisStore } = require('../store')
const classes = require('../classes')

module.exports = {
  SluiceError,
  OverLimitError,
  ErrorCodes: CODES,
  ManualClock,
  MemoryStore,
  RedisStore,
  ...classes,
}
