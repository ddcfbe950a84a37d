// Options shared by sluice/express and sluice/fastify.
import type {
  Store,
  BucketLimiter,
  WindowLimiter,
  LeakyLimiter,
  PointsLimiter,
  SlidingWindowLimiter,
  DistributedPacer,
  PacerComposite,
} from './index.js'

/** A limiter `limiter(req)` may return (null: this request is not limited). */
export type DoorLimiter =
  | BucketLimiter
  | WindowLimiter
  | LeakyLimiter
  | PointsLimiter
  | SlidingWindowLimiter
  | DistributedPacer
  | PacerComposite
  | null
  | undefined

/** `req.rateLimit`: the window the single-window headers describe (the one with fewest remaining). */
export interface RateLimitInfo {
  limit: number
  used: number
  remaining: number
  /** When this window is full again (refused: when the request would be admitted). */
  resetTime: Date
  /** Decided without Redis (the store's whenDown policy). */
  degraded: boolean
  /** The key the request was counted under. */
  key: string
}

export interface DoorOptions<Req, Res> {
  /** A sluice MemoryStore or RedisStore (its whenDown and localDenyCache apply). */
  store: Store
  /** Requests per window (express default 5, fastify 1000), or a function of the request. */
  limit?: number | ((req: Req, res: Res) => number | Promise<number>)
  /** The window, ms (default 60000). */
  windowMs?: number
  /**
   * 'fixed' (default): BucketLimiter, calendar-aligned windows; 'window': starts at the first
   * request; 'sliding': an exact sliding window; 'leaky': a burst of `limit`, then one per
   * windowMs / limit; 'gcra': DistributedPacer.rateLimit, qps = limit / windowMs, maxBurst = limit.
   */
  algorithm?: 'fixed' | 'window' | 'sliding' | 'leaky' | 'gcra'
  /** Several windows, all or nothing (instead of limit and windowMs). */
  limits?: { limit: number; windowMs: number }[]
  /** Any sluice limiter per request, for full control (instead of limit/windowMs/limits/algorithm). */
  limiter?: (req: Req, res: Res) => DoorLimiter | Promise<DoorLimiter>
  /** Default: the client IP, IPv6 masked to /ipv6Subnet. */
  keyGenerator?: (req: Req, res: Res) => string | Promise<string>
  /** The prefix length IPv6 clients are grouped by (default 56; false: the whole address). */
  ipv6Subnet?: number | false
  /** A request's weight (default 1; 0 = free). */
  cost?: (req: Req, res: Res) => number | Promise<number>
  /** true: not counted, no headers. */
  skip?: (req: Req, res: Res) => boolean | Promise<boolean>
  /** Status of a refusal (default 429). */
  statusCode?: number
  /** Status of a refusal decided without Redis, whenDown 'deny' (default 503). */
  downStatusCode?: number
  /** The body of a refusal (or a function of the request). */
  message?: unknown
  /** false (default), true = 'draft-6', 'draft-7', 'draft-8' or 'draft-10' (RateLimit + RateLimit-Policy lists). */
  standardHeaders?: boolean | 'draft-6' | 'draft-7' | 'draft-8' | 'draft-10'
  /** X-RateLimit-Limit, -Remaining, -Reset (epoch seconds); default true. */
  legacyHeaders?: boolean
  /** Where RateLimitInfo goes on the request (default 'rateLimit'). */
  requestPropertyName?: string
  /** Names the counters (and the policy): the same identifier and key share a counter in every process. */
  identifier?: string
  /** Give the charge back when the response fails (status >= 400 by default). fixed, window, leaky only. */
  skipFailedRequests?: boolean
  /** Give the charge back when the response succeeds. fixed, window, leaky only. */
  skipSuccessfulRequests?: boolean
  requestWasSuccessful?: (req: Req, res: Res) => boolean
  /** Let requests through when the store fails (ERR_STORE_UNAVAILABLE, ERR_TIMEOUT); default false: the error handler. */
  passOnStoreError?: boolean
}

/** The default key: the IP, an IPv6 address masked to its /subnet network, IPv4-mapped as IPv4. */
export declare function ipKeyGenerator(ip: string, ipv6Subnet?: number | false): string
