// The types of `require('sluice/express')` (lib/express.js): the middleware, its options and
// req.rateLimit. lib/express.d.mts types `import ... from 'sluice/express'`.
import type { RequestHandler, Request, Response, NextFunction } from 'express'
import type { DoorOptions, RateLimitInfo } from './http/types.js'

export type { DoorLimiter, RateLimitInfo } from './http/types.js'
export { ipKeyGenerator } from './http/types.js'

export interface Options extends DoorOptions<Request, Response> {
  /** Answers a refusal (status already set); default: send `message`. */
  handler?: (req: Request, res: Response, next: NextFunction, options: Options) => void | Promise<void>
}

export interface RateLimitRequestHandler extends RequestHandler {
  /** Forgets what was counted for `key`, in every process. */
  resetKey(key: string): Promise<void>
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
