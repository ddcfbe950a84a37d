// The types of sluice/koa (lib/doors/koa/index.js): the middleware, its options (with
// koa-ratelimit's names) and ctx.state.rateLimit. lib/entries/koa.d.ts re-exports them.
import type { Middleware, ParameterizedContext } from 'koa'
import type { DoorKeys, DoorOptions, RateLimitInfo } from '../http/types.js'

export type { DoorLimiter, RateLimitInfo } from '../http/types.js'

type Ctx = ParameterizedContext

export interface Options extends Omit<DoorOptions<Ctx, Ctx>, 'store'> {
  store: DoorOptions<Ctx, Ctx>['store']
  /** The body of a refusal (status already set), instead of `message`. */
  handler?: (ctx: Ctx) => unknown | Promise<unknown>
  /** koa-ratelimit's name of `windowMs`, ms (default one hour). */
  duration?: number
  /** koa-ratelimit's name of `limit` (default 2,500). */
  max?: number | ((ctx: Ctx, res: Ctx) => number | Promise<number>)
  /** koa-ratelimit's name of `keyGenerator` (default: ctx.ip). */
  id?: (ctx: Ctx) => string | number | Promise<string | number>
  /** Requests not limited, not counted (koa-ratelimit's). */
  whitelist?: (ctx: Ctx) => boolean | Promise<boolean>
  /** Requests refused with 403, not counted (koa-ratelimit's). */
  blacklist?: (ctx: Ctx) => boolean | Promise<boolean>
  /** koa-ratelimit's name of `message`. */
  errorMessage?: unknown
  /** A refusal is `ctx.throw(status, message)` (the app's error handling answers it, the headers kept). */
  throw?: boolean
}

/** The middleware, and its clients' counters (`resetKey`, `getKey`). */
export interface RateLimitMiddleware extends Middleware, DoorKeys {}

/**
 * Koa 2 and 3 middleware: one store decision per request, headers, `ctx.state.rateLimit`, 429
 * with Retry-After over the limit. Defaults: 2,500 requests an hour per client (koa-ratelimit's).
 */
export declare function rateLimit(options: Options): RateLimitMiddleware

declare module 'koa' {
  interface DefaultState {
    rateLimit?: RateLimitInfo
  }
}
