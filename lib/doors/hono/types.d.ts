// The types of sluice/hono (lib/doors/hono/index.js): the middleware, its options and the
// context variable. lib/entries/hono.d.ts re-exports them for `require` and `import`.
import type { Context, MiddlewareHandler } from 'hono'
import type { DoorKeys, DoorOptions, RateLimitInfo } from '../http/types.js'

export type { DoorLimiter, RateLimitInfo } from '../http/types.js'
export { SluiceStore, type ClientRateLimitInfo } from '../http/types.js'

/** A reply the door builds its answer in; callbacks receive it as their second argument. */
export interface HonoReply {
  readonly headers: [string, string, boolean][]
}

export interface Options extends DoorOptions<Context, HonoReply> {
  /**
   * The body of a refusal: a Response (sent as it is, with the door's headers), text, bytes or
   * a JSON value; instead of `message`.
   */
  handler?: (c: Context) => unknown | Promise<unknown>
}

/** The middleware, and its clients' counters (`resetKey`, `getKey`). */
export interface RateLimiterMiddleware extends MiddlewareHandler, DoorKeys {}

/**
 * Hono 4 middleware: one store decision per request, headers on the response, `c.get('rateLimit')`,
 * 429 with Retry-After over the limit. Default key: the client address on @hono/node-server and
 * Bun; elsewhere give a keyGenerator. Defaults: 5 requests a minute (hono-rate-limiter's).
 */
export declare function rateLimiter(options: Options): RateLimiterMiddleware

declare module 'hono' {
  interface ContextVariableMap {
    rateLimit: RateLimitInfo
  }
}
