// The types of `import ... from 'sluice/express'` (lib/entries/express.mjs): `rateLimit` is also the
// default export. lib/entries/express.d.ts types `require('sluice/express')`.
import { rateLimit } from './express.js'

export type {
  DoorLimiter,
  RateLimitInfo,
  Options,
  RateLimitRequestHandler,
  Logger,
  EnabledValidations,
  ClientRateLimitInfo,
} from './express.js'
export {
  rateLimit,
  ipKeyGenerator,
  MemoryStore,
  SluiceStore,
  ConsoleLogger,
  SECOND,
  MINUTE,
  HOUR,
  DAY,
} from './express.js'
export default rateLimit
