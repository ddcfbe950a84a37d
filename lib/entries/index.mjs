import sluice from './index.js'

export const {
  SluiceError,
  OverLimitError,
  ErrorCodes,
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
} = sluice
export default sluice
