// The types of `require('sluice/fastify')` (a CommonJS module: `module.exports` is the plugin,
// with `default`, `sluiceRateLimit` and `ipKeyGenerator` on it). lib/fastify.d.mts types
// `import ... from 'sluice/fastify'`.
import type { FastifyPluginAsync, FastifyRequest, FastifyReply, onRequestHookHandler } from 'fastify'
import type {
  DoorOptions,
  DoorLimiter as HttpDoorLimiter,
  RateLimitInfo as HttpRateLimitInfo,
  ipKeyGenerator as httpIpKeyGenerator,
} from './http/types.js'

type SluiceRateLimit = FastifyPluginAsync<sluiceRateLimit.Options>

declare namespace sluiceRateLimit {
  export type DoorLimiter = HttpDoorLimiter
  export type RateLimitInfo = HttpRateLimitInfo

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

  /** Fastify 5 plugin: register it before the routes it limits. */
  export const sluiceRateLimit: SluiceRateLimit
  export { sluiceRateLimit as default }
  /** The default key: the IP, an IPv6 address masked to its /subnet network, IPv4-mapped as IPv4. */
  export const ipKeyGenerator: typeof httpIpKeyGenerator
}

declare module 'fastify' {
  interface FastifyContextConfig {
    rateLimit?: sluiceRateLimit.RouteOptions | false
  }
  interface FastifyInstance {
    /** A hook limiting with these options (merged over the plugin's), for a 404 handler and the like. */
    rateLimit(options?: sluiceRateLimit.RouteOptions): onRequestHookHandler
  }
  interface FastifyRequest {
    rateLimit?: HttpRateLimitInfo | null
  }
}

/** Fastify 5 plugin: register it before the routes it limits. */
declare function sluiceRateLimit(...params: Parameters<SluiceRateLimit>): ReturnType<SluiceRateLimit>
export = sluiceRateLimit
