// The door-adapter contract: what an HTTP door adapter (lib/doors/express, lib/doors/fastify,
// lib/doors/http/fetch-api.js, and the next doors) supplies to the shared machinery of
// lib/doors/http/, and what it may call on the door it gets back. An adapter is framework glue
// only: it reads its framework's options into `DoorAdapter`, makes the door with
// `new Door(doorConfig(options, adapter))`, and per request calls `decide`, then `attach(o, req)`,
// `writeHeaders(o, res)`, `settleAfter(o, req, res)` and, on a refusal, answers `status(o)` in its
// framework's way (or lets `admit` of lib/doors/http/respond.js do all of it). lib/doors/http/door.js
// `Door` is checked against `HttpDoor`, and the adapters' objects against `DoorAdapter` and
// `HttpAccess`, by tsc (tsconfig.contracts.json).
//
// The machinery never touches a request or a response itself: it reaches them only through the
// adapter's `HttpAccess` (the client address, where `req.rateLimit` goes, a response header, a
// refusal, the end of a response and its status), and passes them (`Req`, `Res`: whatever the
// framework calls them) to the user's callbacks (keyGenerator, skip, cost, limit, windowMs,
// requestWasSuccessful...). Node's req/res are one framework's objects among others: Express's
// and Fastify's accessors are lib/doors/http/node-http.js's, a Fetch-API framework's (a
// `Request` in, a `Response` out) lib/doors/http/fetch-api.js's.

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
   * `ipKey(access.clientAddress(req), ipv6Subnet)`.
   */
  defaultKey?(config: DoorConfig<Req, Res>): KeyOf<Req, Res>
  /** Optional: @fastify/rate-limit's allowList: keys, or `(req, key)` => exempt. Default: none. */
  readonly allowList?: readonly string[] | ((req: Req, key: string) => boolean | Promise<boolean>)
  /** Optional: the legacy headers' other form (@fastify/rate-limit's). Default: express-rate-limit's. */
  readonly headerForm?: HeaderForm
  /** Optional: @fastify/rate-limit's continueExceeding, exponentialBackoff and ban. Default: none. */
  readonly exceeding?: Exceeding
  /**
   * The accessors over the framework's request and response. Without them the door only
   * decides (`decide`: tests, tools), and needs a `keyGenerator` (no client address to key by).
   */
  readonly access?: HttpAccess<Req, Res>
}

/**
 * How the machinery reaches a request and a response: the adapter's accessors over its
 * framework's objects. Every access the machinery makes goes through these.
 */
export interface HttpAccess<Req = any, Res = any> {
  /** The client address the default key is made from (undefined: none known; the key then fails the request). */
  clientAddress(req: Req): string | undefined
  /** Puts `info` where the app reads it: `req[name]` (Express, Fastify), a context variable, ... */
  setInfo(req: Req, name: string, info: RateLimitInfo): void
  /** Sets a response header (`append`: adds to a list field other doors may have written). */
  setHeader(res: Res, name: string, value: string, append: boolean): void
  /** Answers a refusal: its status and body (`message`, or what `handler` answered). */
  refuse(res: Res, status: number, body: unknown): unknown
  /**
   * Calls `listener` once when the response ends, for refunds (skipFailedRequests,
   * skipSuccessfulRequests): `finished` false when it ended before it was sent in full (a
   * connection closed, a handler that threw), `status` the status sent.
   */
  onEnd(res: Res, listener: (finished: boolean, status: number) => void): void
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
  /** 'enforce' or 'shadow' (lib/doors/http/types.d.ts `mode`). */
  readonly mode: 'enforce' | 'shadow'
  /** The key without keyGenerator: the adapter's `defaultKey`, or express-rate-limit's. */
  readonly defaultKey: KeyOf<Req, Res>
  readonly allowList: DoorAdapter<Req, Res>['allowList'] | null
  readonly headerForm: HeaderForm | null
  readonly exceeding: Exceeding | null
  /** The adapter's accessors (null: a door that only decides). */
  readonly access: HttpAccess<Req, Res> | null
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
  /** Writes the headers of an outcome into `res` (`access.setHeader`). */
  writeHeaders(o: DoorOutcome, res: Res): void
  /** `req.rateLimit` (or the configured property) of an outcome. */
  info(o: DoorOutcome): RateLimitInfo
  /** Puts `info(o)` on the request under the configured property (`access.setInfo`). */
  attach(o: DoorOutcome, req: Req): void
  /** The status of a refusal: `downStatusCode` when refused for want of Redis, else `statusCode`. */
  status(o: DoorOutcome): number
  /** Whether a store failure lets the request through (passOnStoreError). */
  passes(err: unknown): boolean
  /** Gives the charge of `o` back once `res` ends (`access.onEnd`), when skipFailedRequests or skipSuccessfulRequests ask. */
  settleAfter(o: DoorOutcome, req: Req, res: Res): void
  /** Forgets what was counted for `key`. */
  resetKey(key: unknown): Promise<void>
  /** What is counted for `key` (express-rate-limit's getKey). */
  getKey(key: unknown): Promise<{ totalHits: number; resetTime: Date } | undefined>
}
