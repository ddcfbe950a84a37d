import type { FastifyPluginAsync, FastifyRequest, FastifyReply, onRequestHookHandler } from 'fastify'
import type { DoorOptions, RateLimitInfo } from './http.js'

export type { DoorLimiter, RateLimitInfo } from './http.js'
export { ipKeyGenerator } from './http.js'

export interface RouteOptions extends Partial<Omit<DoorOptions<FastifyRequest, FastifyReply>, 'store'>> {
  store?: DoorOptions<FastifyRequest, FastifyReply>['store']
  /** Alias of limit (@fastify/rate-limit's name). */
  max?: number | ((req: FastifyRequest, reply: FastifyReply) => number | Promise<number>)
  /** Alias of windowMs: ms or a duration such as '1 minute'. */
  timeWindow?: number | string
  /** Routes of one group share one counter. */
  groupId?: string
  /** Answers a refusal (status already set); default: a JSON error with `message`. */
  handler?: (req: FastifyRequest, reply: FastifyReply, options: RouteOptions) => unknown
}

export interface Options extends RouteOptions {
  store: DoorOptions<FastifyRequest, FastifyReply>['store']
  /** Limit every route (default true); false: only routes with config.rateLimit. */
  global?: boolean
  /** Where the limit runs (default 'onRequest'); later when the key needs authentication or the body. */
  hook?: 'onRequest' | 'preValidation' | 'preHandler'
}

declare module 'fastify' {
  interface FastifyContextConfig {
    rateLimit?: RouteOptions | false
  }
  interface FastifyInstance {
    /** A hook limiting with these options (merged over the plugin's), for a 404 handler and the like. */
    rateLimit(options?: RouteOptions): onRequestHookHandler
  }
  interface FastifyRequest {
    rateLimit?: RateLimitInfo | null
  }
}

/** Fastify 5 plugin: register it before the routes it limits. */
export declare const sluiceRateLimit: FastifyPluginAsync<Options>
export default sluiceRateLimit
