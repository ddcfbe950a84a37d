// The types of sluice/fastify (lib/doors/fastify/index.js, a CommonJS module: `module.exports`
// is the plugin, with `default`, `sluiceRateLimit` and `ipKeyGenerator` on it). The package
// entries re-export them: lib/entries/fastify.d.ts types `require('sluice/fastify')`,
// lib/entries/fastify.d.mts `import ... from 'sluice/fastify'`.
import type { FastifyPluginAsync, FastifyRequest, FastifyReply, onRequestHookHandler } from 'fastify'
import type {
  DoorOptions,
  DoorLimiter as HttpDoorLimiter,
  RateLimitInfo as HttpRateLimitInfo,
  ipKeyGenerator as httpIpKeyGenerator,
  normalizeIP as httpNormalizeIP,
} from '../http/types.js'

type SluiceRateLimit = FastifyPluginAsync<sluiceRateLimit.Options>

declare namespace sluiceRateLimit {
  export type DoorLimiter = HttpDoorLimiter
  export type RateLimitInfo = HttpRateLimitInfo

  /** What `errorResponseBuilder` is told about a refusal (@fastify/rate-limit's). */
  export interface ErrorResponseContext {
    /** 429, 403 when it is a ban, 503 when refused for want of Redis (whenDown 'deny') */
    statusCode: number
    ban: boolean
    /** e.g. '8 seconds', '1 minute' */
    after: string
    max: number
    /** ms until the request would be admitted */
    ttl: number
  }

  /** What a `createRateLimit()` check answers (@fastify/rate-limit's). */
  export type CheckResult =
    | { isAllowed: true; key: string }
    | {
        isAllowed: false
        key: string
        max: number
        timeWindow: number
        remaining: number
        ttl: number
        ttlInSeconds: number
        isExceeded: boolean
        isBanned: boolean
      }

  type PerRequest<T> = T | ((req: FastifyRequest, key: string) => T | Promise<T>)
  type HeaderFlags = { [name: string]: boolean | undefined }

  export interface RouteOptions extends Partial<
    Omit<DoorOptions<FastifyRequest, FastifyReply>, 'store' | 'ipv6Subnet' | 'ban'>
  > {
    store?: DoorOptions<FastifyRequest, FastifyReply>['store']
    /** Alias of limit (@fastify/rate-limit's name), or `(req, key)`; a value it cannot use: 1000. */
    max?: PerRequest<number>
    /** Alias of windowMs: ms, a duration such as '1 minute', or `(req, key)`; a value it cannot use: 1 minute. */
    timeWindow?: PerRequest<number> | string
    /** Routes of one group share one counter. */
    groupId?: string
    /** Where this route's limit runs (default: the plugin's). */
    hook?: 'onRequest' | 'preParsing' | 'preValidation' | 'preHandler'
    /** Keys (or `(req, key)` => truthy) that are not limited. */
    allowList?: string[] | ((req: FastifyRequest, key: string) => boolean | Promise<boolean>)
    /**
     * A number: after this many refusals in a row (within a window), 403 instead of 429 (the
     * peer's; default -1: never). `{ after, withinMs, forMs }`: sluice's fleet-wide ban
     * (DoorOptions `ban`), kept in store.rules for `forMs` by every process.
     */
    ban?: number | DoorOptions<FastifyRequest, FastifyReply>['ban']
    /** Every refused request restarts the window. */
    continueExceeding?: boolean
    /** The nth refused request in a row blocks the key for timeWindow * 2^(n-1). */
    exponentialBackoff?: boolean
    /** Headers of a refusal by name (x-ratelimit-limit, -remaining, -reset, retry-after): false hides one. */
    addHeaders?: HeaderFlags
    /** Headers of an admitted request by name: false hides one. */
    addHeadersOnExceeding?: HeaderFlags
    /** ratelimit-limit, -remaining, -reset instead of the x-ratelimit-* names. */
    enableDraftSpec?: boolean
    /** Let requests through when the store fails (alias of passOnStoreError). */
    skipOnError?: boolean
    /** Called on every admitted request. */
    onExceeding?: (req: FastifyRequest, key: string) => void
    /** Called on every refused request. */
    onExceeded?: (req: FastifyRequest, key: string) => void
    /** Called when a refusal is a ban. */
    onBanReach?: (req: FastifyRequest, key: string) => void
    /** Names this door's counters apart from other doors' (a prefix of the identifier). */
    nameSpace?: string
    /** What a refusal throws to Fastify's error handler (default: an Error with statusCode). */
    errorResponseBuilder?: (req: FastifyRequest, context: ErrorResponseContext) => unknown
    /** The prefix length IPv6 clients are grouped by (default 64); out of 0-128: 64. */
    ipv6Subnet?: number
    /** @fastify/rate-limit's in-memory LRU size: taken and ignored (the sluice store keeps its own). */
    cache?: number
    /** @fastify/rate-limit's ioredis client: taken and ignored (the sluice store is the `store`). */
    redis?: unknown
    /** Answers a refusal (status already set) instead of errorResponseBuilder. */
    handler?: (req: FastifyRequest, reply: FastifyReply, options: RouteOptions) => unknown
  }

  export interface Options extends RouteOptions {
    store: DoorOptions<FastifyRequest, FastifyReply>['store']
    /** Limit every route (default true); false: only routes with config.rateLimit. */
    global?: boolean
  }

  /** Fastify 5 plugin: register it before the routes it limits. */
  export const sluiceRateLimit: SluiceRateLimit
  export { sluiceRateLimit as default, sluiceRateLimit as fastifyRateLimit }
  /** express-rate-limit's default key (see lib/doors/http/types.d.ts). */
  export const ipKeyGenerator: typeof httpIpKeyGenerator
  /** @fastify/rate-limit's default key: IPv6 masked to /64 (no length), IPv4-mapped as IPv4. */
  export const normalizeIP: typeof httpNormalizeIP
}

declare module 'fastify' {
  interface FastifyContextConfig {
    rateLimit?: sluiceRateLimit.RouteOptions | false
  }
  interface FastifyInstance {
    /** A hook limiting with these options (merged over the plugin's), for a 404 handler and the like. */
    rateLimit(options?: sluiceRateLimit.RouteOptions): onRequestHookHandler
    /** A check to call (GraphQL, tRPC): `{ increment: false }` reads without charging. */
    createRateLimit(
      options?: sluiceRateLimit.RouteOptions,
    ): (req: FastifyRequest, options?: { increment?: boolean }) => Promise<sluiceRateLimit.CheckResult>
  }
  interface FastifyRequest {
    rateLimit?: HttpRateLimitInfo | null
  }
}

/** Fastify 5 plugin: register it before the routes it limits. */
declare function sluiceRateLimit(...params: Parameters<SluiceRateLimit>): ReturnType<SluiceRateLimit>
export = sluiceRateLimit
