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
} = sluice
export default sluice
