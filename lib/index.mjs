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
} = sluice
export default sluice
