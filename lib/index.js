'use strict'

const { SluiceError, OverLimitError, CODES } = require('./errors')
const { ManualClock } = require('./clock')
const { MemoryStore, RedisStore } = require('./stores')
const { DistributedPacer, PacerComposite } = require('./pacer')

module.exports = {
  SluiceError,
  OverLimitError,
  ErrorCodes: CODES,
  ManualClock,
  MemoryStore,
  RedisStore,
  DistributedPacer,
  PacerComposite,
}
