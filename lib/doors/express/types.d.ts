// The types of sluice/express (lib/doors/express/index.js): the middleware, its options and
// req.rateLimit. The package entries re-export them: lib/entries/express.d.ts types
// `require('sluice/express')`, lib/entries/express.d.mts `import ... from 'sluice/express'`.
import type { RequestHandler, Request, Response, NextFunction } from 'express'
import type { DoorOptions, RateLimitInfo } from '../http/types.js'

export type { DoorLimiter, RateLimitInfo } from '../http/types.js'
export { ipKeyGenerator, SluiceStore, type ClientRateLimitInfo } from '../http/types.js'
/** sluice's MemoryStore (express-rate-limit exports its own): a `store` for one process. */
export { MemoryStore } from '../../entries/types/store.js'
/** @deprecated express-rate-limit's time constants, ms. */
export declare const SECOND: number
export declare const MINUTE: number
export declare const HOUR: number
export declare const DAY: number

/** express-rate-limit's ConsoleLogger: `warn(error, message?)` and `error(error, message?)` to the console, the message first. */
export declare const ConsoleLogger: Logger

/** express-rate-limit's logger: where `validate`'s findings go (default: the console). */
export interface Logger {
  warn(...args: unknown[]): void
  error(...args: unknown[]): void
}

/** express-rate-limit's checks by name (false: off); `default` for those not named. */
export type EnabledValidations = { [name: string]: boolean | undefined } & { default?: boolean }

export interface Options extends Omit<DoorOptions<Request, Response>, 'identifier' | 'ipv6Subnet' | 'windowMs'> {
  /** The window, ms (default 60000). */
  windowMs?: number
  /** Answers a refusal (status already set); default: send `message`. */
  handler?: (req: Request, res: Response, next: NextFunction, options: Options) => void | Promise<void>
  /** @deprecated express-rate-limit's old name of `limit`. */
  max?: number | ((req: Request, res: Response) => number | Promise<number>)
  /** @deprecated express-rate-limit's old name of `legacyHeaders`. */
  headers?: boolean
  /**
   * Names the counters and the policy (a string; see DoorOptions), or a function of the request
   * naming the draft-8/10 policy only (the counters keep the default name).
   */
  identifier?: string | ((req: Request, res: Response) => string | Promise<string>)
  /**
   * The prefix length IPv6 clients are grouped by (default 56; false: the whole address), or a
   * function of the request. A value outside 32-64 is logged (validate); one the key cannot use, 56.
   */
  ipv6Subnet?: number | false | ((req: Request, res: Response) => number | false | Promise<number | false>)
  /** express-rate-limit's checks of the setup and of the first requests: logged, never thrown (default true). */
  validate?: boolean | EnabledValidations
  /** Where the checks' findings go (default: console.warn / console.error). */
  logger?: Logger
}

export interface RateLimitRequestHandler extends RequestHandler {
  /** Forgets what was counted for `key`, in every process. */
  resetKey(key: string): Promise<void>
  /** What is counted for `key` (one window of fixed, window or leaky), or undefined when nothing is. */
  getKey(key: string): Promise<{ totalHits: number; resetTime: Date | undefined } | undefined>
}

/** Express 4 and 5 middleware: one store decision per request, headers, 429 with Retry-After. */
export declare function rateLimit(options: Options): RateLimitRequestHandler
export default rateLimit

declare global {
  namespace Express {
    interface Request {
      rateLimit?: RateLimitInfo
    }
  }
}
