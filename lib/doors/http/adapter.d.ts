// The door-adapter contract: what an HTTP door adapter (lib/doors/express, lib/doors/fastify,
// and the next doors) supplies to the shared machinery of lib/doors/http/, and what it may call
// on the door it gets back. An adapter is framework glue only: it reads its framework's
// options into `DoorAdapter`, makes the door with `new Door(doorConfig(options, adapter))`,
// and per request calls `decide`, then writes `headers(o)`, `info(o)` and, on a refusal,
// `status(o)` into its response. lib/doors/http/door.js `Door` is checked against `HttpDoor`,
// and the adapters' `DoorAdapter` objects against `DoorAdapter`, by tsc (tsconfig.contracts.json).
//
// The machinery never touches a request or a response itself: it passes them (`Req`, `Res`:
// whatever the framework calls them) to the user's callbacks (keyGenerator, skip, cost, limit,
// windowMs, requestWasSuccessful...) and to the adapter's `defaultKey`; it reads the end of a
// response only through `ResponseEnd` (for refunds), which a Fetch-API framework can supply
// without Node's `res`.

import type { Store } from '../../store/store'
import type { DoorOutcome, DoorWindow } from '../../kinds/contract'
import type { Exceeding } from './exceeding'
import type { RateLimitInfo } from './types'

export type { DoorOutcome, DoorWindow } from '../../kinds/contract'

/** The key of a request (a client IP, a user id): a string, or a promise of one. */
export type KeyOf<Req, Res> = (req: Req, res: Res) => string | Promise<string>

/**
 * The legacy headers in @fastify/rate-limit's form (lib/doors/http/headers.js): which of the
 * three `[name, index]` are shown on an admitted request and on a refusal, and whether a
 * refusal carries `Retry-After`.
 */
export interface HeaderForm {
  allowed: [string, number][]
  refused: [string, number][]
  retryAfter: boolean
}

/** What an adapter supplies to `doorConfig(options, adapter)` besides the user's options. */
export interface DoorAdapter<Req = any, Res = any> {
  /** Optional: defaults of the user's options (express: limit 5, its message; fastify: limit 1000). */
  readonly defaults?: Readonly<Record<string, unknown>>
  /** Optional: option names the adapter reads itself, accepted besides the common ones. */
  readonly extra?: readonly string[]
  /**
   * Optional: the key of a request without `keyGenerator` (the client IP in the adapter's
   * form), made once from the checked config (its `ipv6Subnet`). Default: express-rate-limit's,
   * `ipKey(req.ip, ipv6Subnet)` (a request with an `ip` string).
   */
  defaultKey?(config: DoorConfig<Req, Res>): KeyOf<Req, Res>
  /** Optional: @fastify/rate-limit's allowList: keys, or `(req, key)` => exempt. Default: none. */
  readonly allowList?: readonly string[] | ((req: Req, key: string) => boolean | Promise<boolean>)
  /** Optional: the legacy headers' other form (@fastify/rate-limit's). Default: express-rate-limit's. */
  readonly headerForm?: HeaderForm
  /** Optional: @fastify/rate-limit's continueExceeding, exponentialBackoff and ban. Default: none. */
  readonly exceeding?: Exceeding
}

/**
 * The end of a response, as a refund (skipFailedRequests, skipSuccessfulRequests) waits for it:
 * Node's `http.ServerResponse` is one (express's `res`, fastify's `reply.raw`).
 */
export interface ResponseEnd {
  /** The status sent (a response whose status is below 400 succeeded, unless `requestWasSuccessful` says). */
  readonly statusCode: number
  /** Whether the whole response was handed to the system ('close' before it: failed). */
  readonly writableFinished: boolean
  /** 'finish': sent in full; 'close': the connection ended (maybe before). */
  once(event: 'finish' | 'close', listener: () => void): unknown
}

/** A door's checked options (lib/doors/http/options.js `doorConfig`): read-only to adapters. */
export interface DoorConfig<Req = any, Res = any> {
  readonly store: Store
  /** Its counters' windows (null: `limiter(req)` decides); a null limit or windowMs comes from a function. */
  readonly windows: { limit: number | null; windowMs: number | null; name: string }[] | null
  readonly algorithm: string | null
  /** What names the counters (the identifier, or the windows' numbers). */
  readonly counter?: string
  readonly identifier: string | null
  readonly requestPropertyName: string
  readonly statusCode: number
  readonly downStatusCode: number
  readonly message: unknown
  readonly handler?: (...args: any[]) => unknown
  readonly legacyHeaders: boolean
  readonly standardHeaders: false | 'draft-6' | 'draft-7' | 'draft-8' | 'draft-10'
  readonly ipv6Subnet: number | false
  readonly skipFailedRequests: boolean
  readonly skipSuccessfulRequests: boolean
  /** skipFailedRequests or skipSuccessfulRequests. */
  readonly refunds: boolean
  readonly passOnStoreError: boolean
  readonly cacheBytes: number
  /** The key without keyGenerator: the adapter's `defaultKey`, or express-rate-limit's. */
  readonly defaultKey: KeyOf<Req, Res>
  readonly allowList: DoorAdapter<Req, Res>['allowList'] | null
  readonly headerForm: HeaderForm | null
  readonly exceeding: Exceeding | null
  [option: string]: unknown
}

/** What an adapter calls on its door (lib/doors/http/door.js `Door`). */
export interface HttpDoor<Req = any, Res = any> {
  readonly config: DoorConfig<Req, Res>
  /**
   * Decides a request: its outcome, or null when it is skipped (skip, allowList). Rejects on a
   * store failure (see `passes`) or a bad key, cost or limit (ERR_INVALID_ARGUMENT). `known`: the
   * key, already known (skip and allowList not asked); `charge` false: nothing charged;
   * `every`: count every call, refusals too (fastify's createRateLimit).
   */
  decide(req: Req, res: Res, known?: string | null, charge?: boolean, every?: boolean): Promise<DoorOutcome | null>
  /** The key of a request: keyGenerator's, or the adapter's `defaultKey`. */
  keyOf(req: Req, res: Res): string | Promise<string>
  /** Whether the allowList exempts the request. */
  allowListed(req: Req, key: string): Promise<boolean>
  /** The response headers of an outcome, as `[name, value, append]` (append: a list field). */
  headers(o: DoorOutcome): [string, string, boolean][]
  /** `req.rateLimit` (or the configured property) of an outcome. */
  info(o: DoorOutcome): RateLimitInfo
  /** The status of a refusal: `downStatusCode` when refused for want of Redis, else `statusCode`. */
  status(o: DoorOutcome): number
  /** Whether a store failure lets the request through (passOnStoreError). */
  passes(err: unknown): boolean
  /** Gives the charge of `o` back once `end` ends, when skipFailedRequests or skipSuccessfulRequests ask. */
  settleAfter(o: DoorOutcome, req: Req, res: Res, end: ResponseEnd): void
  /** Forgets what was counted for `key`. */
  resetKey(key: unknown): Promise<void>
  /** What is counted for `key` (express-rate-limit's getKey). */
  getKey(key: unknown): Promise<{ totalHits: number; resetTime: Date } | undefined>
}
