'use strict'

const { SluiceError, OverLimitError, CODES } = require('./errors')
const { ManualClock } = require('./clock')
const { MemoryStore, RedisStore } = require('./store')
const { DistributedPacer, PacerComposite } = require('./pacer')
const { BucketLimiter, WindowLimiter, LeakyLimiter, PointsLimiter, UnlimitedLimiter } = require('./limiters')
const { ConcurrentLimiter, Lease } = require('./concurrent')
const { SlidingWindowLimiter, QuotaLimiter } = require('./windows')
const { FairTenant } = require('./fair')
const { Limiter: SlidingCounterLimiter } = require('./kinds/sliding-counter')
const { Budget } = require('./budget')

module.exports = {
  SluiceError,
  OverLimitError,
  ErrorCodes: CODES,
  ManualClock,
  MemoryStore,
  RedisStore,
  DistributedPacer,
  PacerComposite,
  BucketLimiter,
  WindowLimiter,
  LeakyLimiter,
  PointsLimiter,
  UnlimitedLimiter,
  ConcurrentLimiter,
  Lease,
  SlidingWindowLimiter,
  SlidingCounterLimiter,
  QuotaLimiter,
  FairTenant,
  Budget,
}
