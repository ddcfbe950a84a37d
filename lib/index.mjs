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
  QuotaLimiter,
  FairTenant,
} = sluice
export default sluice
