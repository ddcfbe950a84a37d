// The types sluice/express and sluice/fastify share (lib/doors/express/types.d.ts, lib/doors/fastify/types.d.ts):
// the options of a door, the limiters limiter(req) may return, req.rateLimit, the default key.
// Types only: the door's code is lib/doors/http/*.js.
import type { Store } from '../../entries/types/store.js'
import type {
  BucketLimiter,
  WindowLimiter,
  LeakyLimiter,
  PointsLimiter,
  SlidingWindowLimiter,
  SlidingCounterLimiter,
  LeaseOption,
} from '../../entries/types/limiters.js'
import type { DistributedPacer, PacerComposite } from '../../entries/types/pacer.js'

/** A limiter `limiter(req)` may return (null: this request is not limited). */
export type DoorLimiter =
  | BucketLimiter
  | WindowLimiter
  | LeakyLimiter
  | PointsLimiter
  | SlidingWindowLimiter
  | SlidingCounterLimiter
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
  /** @deprecated express-rate-limit's old name of `used` (not enumerable: not in JSON). */
  readonly current?: number
}

export interface DoorOptions<Req, Res> {
  /** A sluice MemoryStore or RedisStore (its whenDown and localDenyCache apply). */
  store: Store
  /**
   * Requests per window (express default 5, fastify 1000), or a function of the request; 0
   * refuses every request.
   */
  limit?: number | ((req: Req, res: Res) => number | Promise<number>)
  /** The window, ms (default 60000), or a function of the request. */
  windowMs?: number | ((req: Req, res: Res) => number | Promise<number>)
  /**
   * 'window' (default): each client's window starts at its first request, as in
   * express-rate-limit and @fastify/rate-limit; 'fixed': BucketLimiter, calendar-aligned
   * windows; 'sliding': an exact sliding window; 'leaky': a burst of `limit`, then one per
   * windowMs / limit; 'gcra': DistributedPacer.rateLimit, qps = limit / windowMs, maxBurst = limit;
   * 'sliding-counter': an approximate sliding window, two counters per window (SlidingCounterLimiter).
   */
  algorithm?: 'fixed' | 'window' | 'sliding' | 'leaky' | 'gcra' | 'sliding-counter'
  /** Several windows, all or nothing (instead of limit and windowMs). */
  limits?: { limit: number; windowMs: number }[]
  /**
   * Any sluice limiter per request, for full control (instead of limit/windowMs/limits/algorithm).
   * Its policies are named by `identifier`, or by their numbers (`10-per-60s`): never by the
   * limiter's own name or key, which a header does not show.
   */
  limiter?: (req: Req, res: Res) => DoorLimiter | Promise<DoorLimiter>
  /**
   * Default: the client IP, IPv6 masked to /ipv6Subnet. A key of more than 64 UTF-8 bytes is
   * known by its SHA-256 (in the cache and in the store); one of more than 1 MiB fails its
   * request with ERR_INVALID_ARGUMENT, through the framework's error handler.
   */
  keyGenerator?: (req: Req, res: Res) => string | number | Promise<string | number>
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
  /**
   * Names the counters (and the policy): the same identifier and key share a counter in every
   * process and door on the same Redis and keyPrefix. The default comes from the numbers only
   * (`100-per-60s`): two apps on one Redis must set their own identifier or keyPrefix. Two doors
   * of one process naming their counters alike with other options warn (SLUICE_IDENTIFIER_REUSED).
   */
  identifier?: string
  /**
   * Bytes of limiters the door keeps, one per key in use (default 4 MiB, about 4,000 keys of
   * one window; the oldest are dropped first and remade when needed; 0: none kept).
   */
  cacheBytes?: number
  /**
   * Lease mode for each client's counter (DESIGN §11, see LeaseOption): a client's requests are
   * decided from a run of tokens this process took in one store call, with no round trip; never
   * more than the limit. For a door of one window of algorithm 'fixed', 'window' or 'leaky',
   * without `ban`; a counter dropped from the cache (cacheBytes) gives back what it holds.
   */
  lease?: LeaseOption
  /**
   * 'shadow': every request decided and counted as if enforced, but a would-be refusal goes
   * through (its headers as usual, no 429; counted in the door's `shadowRefused`); default
   * 'enforce'. A rule of `store.rules` for the door (`{ door: identifier }`) or a key wins.
   */
  mode?: 'enforce' | 'shadow'
  /**
   * A client refused `after` times within `withinMs` (counted fleet-wide, in the decision's own
   * script call on the fixed, window and leaky algorithms; one more call per refusal on the
   * others) is denied, 403 with no store call, for `forMs` by every process (store.rules; in
   * force elsewhere within a second). Each `after`-th refusal bans again. Bans live in their own
   * bounded table (`store.rules.bans()`, `unban`), never among the operators' rules. Not with
   * `limiter(req)`; a door in shadow mode never bans. On sluice/fastify a number is the peer's
   * `ban` (a 403 past that many refusals in the window, nothing kept).
   */
  ban?: { after: number; withinMs: number; forMs: number }
  /** Give the charge back when the response fails (status >= 400 by default). fixed, window, leaky only. */
  skipFailedRequests?: boolean
  /** Give the charge back when the response succeeds. fixed, window, leaky only. */
  skipSuccessfulRequests?: boolean
  requestWasSuccessful?: (req: Req, res: Res) => boolean | Promise<boolean>
  /** Let requests through when the store fails (ERR_STORE_UNAVAILABLE, ERR_TIMEOUT); default false: the error handler. */
  passOnStoreError?: boolean
}

/**
 * express-rate-limit's default key: an IPv4 address as it is; an IPv6 one as its /subnet network
 * in CIDR form (default 56), or unchanged with false; an IPv4-mapped (`::ffff:1.2.3.4`, any
 * notation) or IPv4-compatible (`::1.2.3.4`) address as that IPv4 address; any other IPv6
 * address by its network, even one that ends in a dotted quad (express-rate-limit 8.6's).
 */
export declare function ipKeyGenerator(ip: string, ipv6Subnet?: number | false): string

/**
 * @fastify/rate-limit's default key: an IPv4 address in lower case; an IPv6 one as the first
 * address of its /subnet network (default 64), without the length; one standing for an IPv4
 * client as that IPv4 address.
 */
export declare function normalizeIP(ip: string, ipv6Subnet?: number): string

/** What SluiceStore answers for a client: its hits in the window, and when the window ends. */
export interface ClientRateLimitInfo {
  totalHits: number
  resetTime: Date | undefined
}

/**
 * A sluice store behind the peers' own middleware: express-rate-limit's `store` option and
 * hono-rate-limiter's (the same `Store` interface). Each `increment` is one atomic store call,
 * counted by every process of the fleet (Redis, a cluster), with the store's whenDown and TTLs.
 */
export declare class SluiceStore {
  /** `prefix` names this limiter's counters (default 'erl'): one per limiter sharing a store. */
  constructor(options: { store: Store; prefix?: string })
  readonly prefix: string
  /** false: a key counted here is counted in every process. */
  readonly localKeys: false
  /** The peer's options: `windowMs`, each client's window (opened at its first request). */
  init(options: { windowMs: number }): void
  increment(key: string): Promise<ClientRateLimitInfo>
  decrement(key: string): Promise<void>
  get(key: string): Promise<ClientRateLimitInfo | undefined>
  resetKey(key: string): Promise<void>
}

/** What a door's middleware answers of one client's counters, in every process. */
export interface DoorKeys {
  /** Forgets what was counted for `key`. */
  resetKey(key: string): Promise<void>
  /** What is counted for `key` (one window of fixed, window or leaky), or undefined when nothing is. */
  getKey(key: string): Promise<{ totalHits: number; resetTime: Date | undefined } | undefined>
}
