// Public types of sluice. The native layer's generated types are in ../index.d.ts.

/** The stable error codes; `error.code` is always one of them. */
export type ErrorCode =
  | 'ERR_INVALID_CONFIG'
  | 'ERR_INVALID_ARGUMENT'
  | 'ERR_OVER_LIMIT'
  | 'ERR_STORE_UNAVAILABLE'
  | 'ERR_TIMEOUT'
  | 'ERR_STORE_OOM'
  | 'ERR_SCRIPT'
  | 'ERR_CLOSED'
  | 'ERR_ABORTED'
  | 'ERR_INTERNAL'

export declare const ErrorCodes: readonly ErrorCode[]

/** Every error sluice throws or rejects with. Match on `code`, not on the message. */
export declare class SluiceError extends Error {
  constructor(code: ErrorCode, message: string, options?: { cause?: unknown })
  readonly code: ErrorCode
}

/** Thrown by the waiting calls when over a limit. */
export declare class OverLimitError extends SluiceError {
  constructor(message: string, details: { limiter: string; retryAfterMs: number })
  readonly code: 'ERR_OVER_LIMIT'
  readonly limiter: string
  readonly retryAfterMs: number
  /** From SlidingWindowLimiter.ensure: the window that refused (the one that frees up last). */
  window?: SlidingWindow
}

/** A clock that moves only when told to; replaces a store's clock (tests, simulations). */
export declare class ManualClock {
  /** @param startMs ms since the epoch, default 0 */
  constructor(startMs?: number)
  /** Current time, ms since the epoch. */
  now(): number
  /** Sets the time (it may go backwards). */
  set(ms: number): void
  /**
   * Moves the time forward by `ms` (>= 0). Waits of sluice on this clock (`withinLimit`,
   * `acquire`, a waiter's timers) that end by then end.
   */
  advance(ms: number): void
}

export interface StoreOptions {
  /** Prefix of every key, default "sluice". No braces or newlines. */
  keyPrefix?: string
  /** Decide with this clock instead of the system clock (memory) or Redis `TIME` (Redis). */
  clock?: ManualClock
  /** Count statistics of every limiter (`stats()`, `store.limiters()`); default true. */
  stats?: boolean
}

/** Statistics of one limiter, over every process (see `stats()`). */
export interface LimiterStats {
  /** Decisions that admitted. */
  admitted: number
  /** Decisions that refused (a tryAcquire() that returned null, a job re-routed by a FairTenant...). */
  refused: number
  admittedWeight: number
  refusedWeight: number
  /** Admissions after which at most 20 % of the limit remained (a pacer's bucket 80 % full). */
  nearLimit: number
  /** Admissions that waited for their turn (withinLimit, pace), and the time they waited. */
  waited: number
  waitTimeMs: number
  /** Answers given without Redis (RedisStore `whenDown`). */
  degraded: number
  /** Jobs moved back to delayed by sluice/bullmq's limitProcessor. */
  rescheduled: number
}

/** A limiter a store has seen (`store.limiters()`). */
export interface LimiterInfo {
  kind: 'pacer' | 'bucket' | 'window' | 'leaky' | 'points' | 'concurrent' | 'sliding' | 'quota' | 'fair'
  /** The limiter's name (a pacer's key, a quota's prefix). */
  name: string
  options: Record<string, unknown>
  /** Last use, ms since the epoch (the store's clock). */
  lastUse: number
}

/** The embedded store: state in this process, synchronous native decisions, no Redis. */
export declare class MemoryStore {
  constructor(options?: StoreOptions)
  readonly keyPrefix: string
  readonly clock: ManualClock | null
  /** The limiters used through this store, most recently used first (at most 10,000). */
  limiters(): Promise<LimiterInfo[]>
  /** Statistics events forgotten (more than 10,000 limiters); 0 otherwise. */
  readonly statsDropped: number
  close(): Promise<void>
}

export interface RedisStoreOptions extends StoreOptions {
  /** Standalone server URL, default "redis://127.0.0.1:6379"; `rediss://` = TLS. */
  url?: string
  /** Seed node URLs of a Redis Cluster (cluster mode). */
  cluster?: string[]
  /**
   * TLS for `rediss://` URLs: PEM text (strings or Buffers). `ca`: the CAs to trust instead of
   * the system's; `cert` + `key`: a client certificate (`tls-auth-clients`);
   * `rejectUnauthorized: false` accepts any server certificate (default true). The key is kept
   * in no property and shown in no error.
   */
  tls?: {
    ca?: string | Buffer | (string | Buffer)[]
    cert?: string | Buffer
    key?: string | Buffer
    rejectUnauthorized?: boolean
  }
  /** Connections in the pool, 1..64, default 2. */
  poolSize?: number
  /** Deadline of every call, ms, default 2000: ERR_TIMEOUT past it. */
  commandTimeoutMs?: number
  /** Deadline of connect(), ms, default 5000: ERR_STORE_UNAVAILABLE past it. */
  connectTimeoutMs?: number
  /**
   * Default true: a standalone `redis://` store also opens one connection driven on the JS
   * thread (no thread hand-off per round trip) and sends its calls there while it is up; the
   * pool serves while it is down, and always for clusters and `rediss://`.
   */
  directConnection?: boolean
  /**
   * What calls get while Redis is down (default 'error'). 'error': they reject with
   * ERR_STORE_UNAVAILABLE; 'allow': admitted (fail open); 'deny': refused until the next
   * probe (fail closed; pace() rejects, it cannot refuse); 'local': decided by an embedded
   * store in this process with the same options, counting from zero when the outage began.
   * Every answer given without Redis has `degraded: true`.
   */
  whenDown?: 'error' | 'allow' | 'deny' | 'local'
  /** While Redis is down, how often a probe checks whether it is back, ms (10..600000), default 1000. */
  probeIntervalMs?: number
  /**
   * Hot-key relief: a key Redis refused with a retry hint is refused in this process until
   * then, with no round trip (check(), rateLimit(), sliding check()). Never admits more than
   * Redis would; a reset() made by another process is not seen until the hint runs out.
   * true keeps up to 100000 keys; `{ maxKeys }` sets the bound.
   */
  localDenyCache?: boolean | { maxKeys?: number }
  /** How often this process writes its statistics, ms (10..600000), default 5000; and on close(). */
  statsFlushMs?: number
  /** How long statistics and the limiter list live after their last write, ms, default 7 days. */
  statsTtlMs?: number
}

/** How a store's calls went out: `calls` in `batches` native calls, `direct` of them on the direct connection. */
export interface Batching {
  calls: number
  batches: number
  direct: number
}

/**
 * A Redis or Redis Cluster store over one native connection pool. Once a call finds Redis
 * unreachable, the circuit opens (`status` 'down', event 'down'): no call waits for Redis
 * until a probe finds it back ('up'); meanwhile `whenDown` answers.
 */
export declare class RedisStore {
  private constructor()
  /** 'down' from the call that found Redis unreachable until a probe gets an answer. */
  readonly status: 'up' | 'down'
  readonly whenDown: 'error' | 'allow' | 'deny' | 'local'
  /** Calls the local deny cache answered (refused) without a round trip. */
  readonly localDenials: number
  on(event: 'down', listener: (error: SluiceError) => void): this
  on(event: 'up', listener: () => void): this
  once(event: 'down', listener: (error: SluiceError) => void): this
  once(event: 'up', listener: () => void): this
  off(event: 'down' | 'up', listener: (...args: any[]) => void): this
  /**
   * Connects and waits until every connection is up. Redis unreachable within
   * connectTimeoutMs: ERR_STORE_UNAVAILABLE under whenDown 'error' (the default); under any
   * other policy the store is returned with `status` 'down' and keeps dialling.
   */
  static connect(options?: RedisStoreOptions | string): Promise<RedisStore>
  readonly keyPrefix: string
  readonly clock: ManualClock | null
  readonly isCluster: boolean
  /** How the calls made so far were batched (calls per native call = calls / batches). */
  readonly batching: Batching
  /** The limiters used within statsTtlMs through any store with this key prefix, most recently used first. */
  limiters(): Promise<LimiterInfo[]>
  /** Statistics events this store could not write (it closed while Redis was down). */
  readonly statsDropped: number
  /** Closes the pool; later calls reject with ERR_CLOSED. */
  close(): Promise<void>
}

export type Store = MemoryStore | RedisStore

export interface DistributedPacerOptions {
  /** Any non-empty string up to 512 characters; pacers with the same key share one limit. */
  key: string
  /** Target rate, weight units per second, (0, 1e9]. */
  qps: number
  /** Bucket capacity in weight units, default 0: how much may pass at once before pacing. */
  maxBurst?: number
  /** Bucket leak rate as a fraction of qps, (0, 1]; default 0.5 for pace(), 1 for rateLimit(). */
  burstAllowanceFactor?: number
}

export interface PacerOutcome {
  /** pace(): ms to wait before the call. rateLimit(): 0 = admitted, > 0 = refused, retry after. */
  delayMs: number
  /** `watermark=<W>/<maxBurst> + weight=<weight>, delayMs=<delayMs>` (for logs). */
  reason: string
  /** A single pacer: its bucket level before this call, in weight units (W of the reason). */
  watermark?: number
  /** Answered without Redis (RedisStore `whenDown`); false when Redis answered. */
  degraded: boolean
}

/**
 * How long `block()` blocks: an HTTP `Retry-After` value as the upstream sent it (a header is a
 * string): delta-seconds (`"120"`; fractions are rounded up to the ms, `"1.5"` is 1500 ms),
 * or an HTTP-date (`"Sun, 06 Nov 1994 08:49:37 GMT"`, and the obsolete rfc850 and asctime
 * forms), measured from now on the store's clock. `0`, or a date not in the future, blocks
 * nothing (block() resolves at once). Anything else, or more than 10 years:
 * ERR_INVALID_ARGUMENT.
 */
export interface BlockOptions {
  retryAfter: string | number
}

export interface Pacer {
  readonly key: string
  pace(weight?: number): Promise<PacerOutcome>
  rateLimit(weight?: number): Promise<PacerOutcome>
  /**
   * Upstream back-pressure: nobody is admitted on this pacer (every member of a composite)
   * for the next `ms` (whole ms, 1 to 10 years), or as long as `{ retryAfter }` says.
   */
  block(ms: number | BlockOptions): Promise<void>
}

/** A distributed leaky bucket + queue; cheap to construct (no round trip). */
export declare class DistributedPacer implements Pacer {
  constructor(store: Store, options: DistributedPacerOptions)
  readonly key: string
  /** Reserves a slot for a call of `weight` (default 1); resolve, then sleep `delayMs`. */
  pace(weight?: number): Promise<PacerOutcome>
  /** Admits now (`delayMs` 0, charged) or refuses (`delayMs` > 0, nothing charged). */
  rateLimit(weight?: number): Promise<PacerOutcome>
  /**
   * Upstream back-pressure: nobody is admitted on this key for the next `ms` (whole ms, 1 to
   * 10 years), or as long as `{ retryAfter }` (the upstream's `Retry-After` header) says, in
   * any process; rateLimit refuses and pace schedules after it; calls resume at qps. A
   * Retry-After of 0 or a past date blocks nothing.
   */
  block(ms: number | BlockOptions): Promise<void>
  /** Statistics over every process (a RedisStore's other processes: as of their last flush). */
  stats(): Promise<LimiterStats>
}

export interface PacerCompositeOutcome extends PacerOutcome {
  /** The member with the largest delay (first on ties), or null when no member delays. */
  pacer: Pacer | null
  /** Each member pacer's level before this call, in member order (leaves of nested composites). */
  watermarks: number[]
}

/** Several pacers on one store, decided together; rateLimit() charges all members or none. */
export declare class PacerComposite implements Pacer {
  constructor(pacers: Array<DistributedPacer | PacerComposite>)
  /** Always "". */
  readonly key: string
  readonly pacers: Array<DistributedPacer | PacerComposite>
  pace(weight?: number): Promise<PacerCompositeOutcome>
  rateLimit(weight?: number): Promise<PacerCompositeOutcome>
  /**
   * Blocks every member pacer (nested composites included) as `DistributedPacer.block`
   * does, for one duration.
   */
  block(ms: number | BlockOptions): Promise<void>
}

// ---------------------------------------------------------------------------------------
// The limiter family (Sidekiq Enterprise's limiters, in Node idiom)

/** 'second' | 'minute' | 'hour' | 'day' (UTC-aligned for buckets), or whole ms. */
export type Interval = 'second' | 'minute' | 'hour' | 'day' | number

/** The answer to one limiter call. */
export interface Decision {
  /** Whether the call was admitted (and charged). */
  allowed: boolean
  /** The limiter's limit (points for PointsLimiter). */
  limit: number
  /** Units that could still be taken right now. */
  remaining: number
  /** Refused: ms until this weight would be admitted (0 when allowed). */
  retryAfterMs: number
  /** ms until the limiter is back at full capacity. */
  resetAfterMs: number
  /** Answered without Redis (RedisStore `whenDown`); false when Redis answered. */
  degraded: boolean
}

/** What withinLimit does over the limit after the wait: 'raise' an OverLimitError, or 'skip' `fn`. */
export type LimiterPolicy = 'raise' | 'skip'

/**
 * What `withinLimit` resolves with on a limiter of policy `P`: what `fn` returned, or also
 * `undefined` (skipped) when the policy may be 'skip'.
 */
export type WithinLimitResult<T, P extends LimiterPolicy> = { raise: T; skip: T | undefined }[P]

export interface LimiterOptions<P extends LimiterPolicy = LimiterPolicy> {
  /** 1..256 characters of [A-Za-z0-9_-]; limiters with the same name and kind share one limit. */
  name: string
  /** How long withinLimit / acquire may wait for capacity, ms, default 5000; 0 = fail at once. */
  waitTimeoutMs?: number
  /**
   * Over the limit after the wait: 'raise' (OverLimitError, default) or 'skip' (resolve
   * undefined). A limiter constructed without it, or with 'raise', is typed so that
   * `withinLimit` resolves with `fn`'s result (`BucketLimiter<'raise'>`); with 'skip', with
   * that or undefined.
   */
  policy?: P
  /**
   * How long a ConcurrentLimiter's keys (fencing counter, statistics) live after its last
   * acquisition, queued wait or extension, ms, default 90 days; at least lockTimeoutMs +
   * waitTimeoutMs. The time-based limiters keep their one key only while it
   * can still change a decision (the rest of the bucket or window, or until drained).
   */
  ttlMs?: number
}

export interface WithinLimitOptions {
  /** Units this call costs, integer in [0, limit], default 1. */
  weight?: number
  /** Aborts the wait: rejects with ERR_ABORTED (a leaky/points reservation is given back). */
  signal?: AbortSignal
}

/**
 * What Bucket, Window, Leaky and Points limiters share. One round trip per decision. `P`: the
 * limiter's policy (the type of any of them by default).
 */
export interface RateLimiter<P extends LimiterPolicy = LimiterPolicy> {
  readonly name: string
  readonly limit: number
  readonly intervalMs: number
  /** One decision, no waiting: charges `weight` (default 1) only if it is admitted now. */
  check(weight?: number): Promise<Decision>
  /** The decision a call of weight 1 would get now, charging nothing. */
  peek(): Promise<Decision>
  /**
   * Runs `fn` once `weight` is admitted, waiting up to waitTimeoutMs; over the limit after
   * that, OverLimitError (policy 'raise') or resolves undefined without running `fn` ('skip').
   */
  withinLimit<T>(fn: () => T | Promise<T>, options?: WithinLimitOptions): Promise<WithinLimitResult<T, P>>
  /** Forgets everything this limiter counted (and ends a block). */
  reset(): Promise<void>
  /**
   * Upstream back-pressure: nobody is admitted for the next `ms` (whole ms, 1 to 10 years), or
   * as long as `{ retryAfter }` (the upstream's `Retry-After` header) says, in any process;
   * counts are kept and a longer block is never shortened. A Retry-After of 0 or a past date
   * blocks nothing.
   */
  block(ms: number | BlockOptions): Promise<void>
  /** Statistics over every process (a RedisStore's other processes: as of their last flush). */
  stats(): Promise<LimiterStats>
}

// The limiter classes are generic in their policy `P`. Constructed, `P` is the `policy`
// option given ('raise' when there is none, as the default); as a type annotation,
// `BucketLimiter` alone means any policy (`BucketLimiter<'raise'>`: one that raises).

/** Options of Bucket, Window and Leaky limiters. */
export type CountLimiterOptions<P extends LimiterPolicy = LimiterPolicy> = LimiterOptions<P> & {
  limit: number
  interval: Interval
}

/** At most `limit` per calendar-aligned interval: 5/second admits 5 at :51.999 and 5 at :52.000. */
export interface BucketLimiter<P extends LimiterPolicy = LimiterPolicy> extends RateLimiter<P> {}
/** At most `limit` per calendar-aligned interval: 5/second admits 5 at :51.999 and 5 at :52.000. */
export declare const BucketLimiter: {
  new <P extends LimiterPolicy = 'raise'>(store: Store, options: CountLimiterOptions<P>): BucketLimiter<P>
  readonly prototype: BucketLimiter
}

/** At most `limit` per interval that starts at the first call after the previous one ended. */
export interface WindowLimiter<P extends LimiterPolicy = LimiterPolicy> extends RateLimiter<P> {}
/** At most `limit` per interval that starts at the first call after the previous one ended. */
export declare const WindowLimiter: {
  new <P extends LimiterPolicy = 'raise'>(store: Store, options: CountLimiterOptions<P>): WindowLimiter<P>
  readonly prototype: WindowLimiter
}

/**
 * A burst of `limit`, then one every `interval / limit`, exactly. withinLimit reserves the
 * caller's own future slot (arrival order), so waiters never race for the same drip.
 */
export interface LeakyLimiter<P extends LimiterPolicy = LimiterPolicy> extends RateLimiter<P> {}
/**
 * A burst of `limit`, then one every `interval / limit`, exactly. withinLimit reserves the
 * caller's own future slot (arrival order), so waiters never race for the same drip.
 */
export declare const LeakyLimiter: {
  new <P extends LimiterPolicy = 'raise'>(store: Store, options: CountLimiterOptions<P>): LeakyLimiter<P>
  readonly prototype: LeakyLimiter
}

/** Handed to PointsLimiter.withinLimit's function: report what the call really cost. */
export interface PointsHandle {
  /** The real cost; the difference to the estimate is refunded or charged after fn. */
  pointsUsed(actual: number): void
}

/** A budget of `points`, refilled continuously at `points` per interval (GraphQL-style costs). */
export interface PointsLimiter<P extends LimiterPolicy = LimiterPolicy> extends RateLimiter<P> {
  readonly points: number
  /** Charges `estimate` (default 1) up front, runs fn(handle), settles the reported actual use. */
  withinLimit<T>(
    fn: (handle: PointsHandle) => T | Promise<T>,
    options?: { estimate?: number; weight?: number; signal?: AbortSignal },
  ): Promise<WithinLimitResult<T, P>>
}
/** A budget of `points`, refilled continuously at `points` per interval (GraphQL-style costs). */
export declare const PointsLimiter: {
  new <P extends LimiterPolicy = 'raise'>(
    store: Store,
    options: LimiterOptions<P> & { points: number; interval: Interval },
  ): PointsLimiter<P>
  readonly prototype: PointsLimiter
}

/** A slot of a ConcurrentLimiter. */
export declare class Lease {
  private constructor()
  /** Fencing token: strictly increasing per limiter; pass it to the resource you protect. */
  readonly token: number
  /** Gives the slot back; true if the lease was still valid (not expired). */
  release(): Promise<boolean>
  /** Extends the lease to `ms` (default lockTimeoutMs) from now; false if it had expired. */
  extend(ms?: number): Promise<boolean>
  /** Granted without Redis (RedisStore `whenDown`); its token fences nothing. */
  readonly degraded: boolean
}

export interface ConcurrentStats extends LimiterStats {
  /** Leases handed out. */
  held: number
  /** Total time leases were held, ms. */
  heldTimeMs: number
  /** Leases taken without waiting. */
  immediate: number
  /** Leases taken after waiting in the queue (counted by Redis, over every process). */
  waited: number
  /** Total time those waited, ms. */
  waitTimeMs: number
  /** Leases that outlived lockTimeoutMs (reclaimed, or released late). */
  overages: number
  /** Expired leases taken back. */
  reclaimed: number
  /** Leases held now. */
  current: number
  /** Waiters queued now. */
  waiting: number
}

export type ConcurrentLimiterOptions<P extends LimiterPolicy = LimiterPolicy> = LimiterOptions<P> & {
  limit: number
  lockTimeoutMs?: number
  /**
   * Waiters this process queues on this name at most (default: no bound; each costs a few
   * KB). Beyond it, an acquire that cannot be granted at once is refused at once
   * (OverLimitError, ERR_OVER_LIMIT; `withinLimit` under policy 'skip' skips).
   */
  maxWaiters?: number
}

/**
 * A distributed semaphore of `limit` slots (1 = a distributed mutex). Waiters queue first
 * come, first served across processes and are woken by a release (pushed; no polling, no
 * blocked connection); a holder that crashed loses its slot after lockTimeoutMs.
 */
export interface ConcurrentLimiter<P extends LimiterPolicy = LimiterPolicy> {
  readonly name: string
  readonly limit: number
  /** A lease, waiting up to waitTimeoutMs; then OverLimitError (whatever the policy). */
  acquire(options?: { signal?: AbortSignal }): Promise<Lease>
  /** A lease if a slot is free now and nobody waits; otherwise null. */
  tryAcquire(): Promise<Lease | null>
  /**
   * Runs fn(lease) holding a slot; releases it in every outcome. Over the limit after
   * waitTimeoutMs: OverLimitError (policy 'raise') or undefined without running fn ('skip').
   */
  withinLimit<T>(
    fn: (lease: Lease) => T | Promise<T>,
    options?: { signal?: AbortSignal },
  ): Promise<WithinLimitResult<T, P>>
  stats(): Promise<ConcurrentStats>
}
/**
 * A distributed semaphore of `limit` slots (1 = a distributed mutex). Waiters queue first
 * come, first served across processes and are woken by a release (pushed; no polling, no
 * blocked connection); a holder that crashed loses its slot after lockTimeoutMs.
 */
export declare const ConcurrentLimiter: {
  new <P extends LimiterPolicy = 'raise'>(store: Store, options: ConcurrentLimiterOptions<P>): ConcurrentLimiter<P>
  readonly prototype: ConcurrentLimiter
}

/** Never limits: accepts any options, always runs the function (tests, switched-off limits). */
export declare class UnlimitedLimiter {
  constructor(...options: unknown[])
  readonly name: string
  check(weight?: number): Promise<Decision>
  peek(): Promise<Decision>
  reset(): Promise<void>
  withinLimit<T>(fn: (handle: PointsHandle & Lease) => T | Promise<T>, options?: object): Promise<T>
  acquire(options?: object): Promise<Lease>
  tryAcquire(): Promise<Lease>
  stats(): Promise<ConcurrentStats>
}

/** One window of a SlidingWindowLimiter: `limit` per `intervalMs`. */
export interface SlidingWindow {
  limit: number
  intervalMs: number
}

/** A SlidingWindowLimiter's answer, with every window's own. */
export interface SlidingDecision {
  allowed: boolean
  /** Answered without Redis (RedisStore `whenDown`); false when Redis answered. */
  degraded: boolean
  /** Until every window has room for the weight, ms (0 when allowed). */
  retryAfterMs: number
  windows: { limit: number; intervalMs: number; remaining: number; retryAfterMs: number }[]
}

/**
 * Several exact sliding windows on one name (say 25 per 5 s and 300 per 60 s), decided and
 * charged together: a call is admitted only if every window has room and is then charged
 * to all of them; a refused call charges none. Memory: one log entry per admitted call of
 * the longest window (at most its limit), trimmed on every call.
 */
export declare class SlidingWindowLimiter {
  constructor(store: Store, options: { name: string; windows: SlidingWindow[] })
  readonly name: string
  readonly windows: readonly Readonly<SlidingWindow>[]
  /** Charges weight (default 1) to every window if all have room now; otherwise nothing. */
  check(weight?: number): Promise<SlidingDecision>
  /** What check(weight) would answer now, charging nothing. */
  peek(weight?: number): Promise<SlidingDecision>
  /** Forgets every logged call. */
  reset(): Promise<void>
  /**
   * Upstream back-pressure: nobody is admitted for the next `ms` (whole ms, 1 to 10 years),
   * or as long as `{ retryAfter }` (the upstream's `Retry-After` header) says, in any
   * process. A Retry-After of 0 or a past date blocks nothing.
   */
  block(ms: number | BlockOptions): Promise<void>
  /** Statistics over every process (a RedisStore's other processes: as of their last flush). */
  stats(): Promise<LimiterStats>
  /** Runs fn if admitted now; otherwise OverLimitError naming the window that refused. */
  ensure<T>(fn: () => T | Promise<T>, options?: { weight?: number }): Promise<T>
}

/** A SlidingCounterLimiter's answer: the most restrictive window's, plus every window's own. */
export interface SlidingCounterDecision extends Decision {
  windows: { limit: number; intervalMs: number; remaining: number; retryAfterMs: number; resetAfterMs: number }[]
}

/**
 * An approximate sliding window per window of `windows` (Cloudflare's estimate: two counters
 * per window, whatever the limit), decided and charged together: the weight in the window
 * ending now is the previous calendar window's weight times the share of it still covered,
 * plus the current one's. A calendar window never admits more than its limit; over a sliding
 * window it can admit more (or less) when the previous window's calls were bunched.
 */
export interface SlidingCounterLimiter<P extends LimiterPolicy = LimiterPolicy>
  extends Omit<RateLimiter<P>, 'intervalMs' | 'check' | 'peek'> {
  /** The smallest window's limit: the largest weight that can ever be admitted. */
  readonly limit: number
  readonly windows: readonly Readonly<SlidingWindow>[]
  /** Charges weight (default 1) to every window if all have room now; otherwise nothing. */
  check(weight?: number): Promise<SlidingCounterDecision>
  /** The decision a call of weight 1 would get now, charging nothing. */
  peek(): Promise<SlidingCounterDecision>
}
/** An approximate sliding window per window of `windows`, decided and charged together. */
export declare const SlidingCounterLimiter: {
  new <P extends LimiterPolicy = 'raise'>(
    store: Store,
    options: LimiterOptions<P> & { windows: SlidingWindow[] },
  ): SlidingCounterLimiter<P>
  readonly prototype: SlidingCounterLimiter
}

/** Sentry's Quota: `limit` per `windowSeconds`, counted in granules of `granularitySeconds` (which must divide the window). */
export interface Quota {
  windowSeconds: number
  granularitySeconds: number
  /** Integer >= 0; 0 is an empty quota that grants nothing (as Sentry). */
  limit: number
  /** Counts under this prefix instead of the request's: a quota shared by many requests. */
  prefixOverride?: string
}

export interface RequestedQuota {
  prefix: string
  requested: number
  quotas: Quota[]
}

export interface GrantedQuota {
  /** The request's prefix (never the override). */
  prefix: string
  granted: number
  /** The quotas that lowered the grant, in the request's order (the same objects). */
  reachedQuotas: Quota[]
  /** Answered without Redis (RedisStore `whenDown`); false when Redis answered. */
  degraded: boolean
}

/**
 * Sentry's sliding-window quotas with the same granule arithmetic and results, an atomic
 * checkAndUseQuotas, validated quotas (ERR_INVALID_CONFIG) and two reads per counter
 * whatever windowSeconds / granularitySeconds is. Timestamps are whole seconds.
 */
export declare class QuotaLimiter {
  constructor(store: Store)
  /** What each request would be granted (in order, seeing earlier grants), reading only. */
  checkWithinQuotas(
    requests: RequestedQuota[],
    timestamp?: number,
  ): Promise<{ timestamp: number; grants: GrantedQuota[] }>
  /** Charges each grant to its request's quotas, unconditionally (check, work, then use). */
  useQuotas(requests: RequestedQuota[], grants: Array<Omit<GrantedQuota, 'degraded'> & { degraded?: boolean }>, timestamp: number): Promise<void>
  /** Checks and charges atomically: concurrent callers cannot over-spend. */
  checkAndUseQuotas(requests: RequestedQuota[], timestamp?: number): Promise<GrantedQuota[]>
  /** Statistics of the requests made under `prefix` (admitted: granted in full). */
  stats(prefix: string): Promise<LimiterStats>
}

/** A routing rule: more than `threshold` jobs of a tenant within `perMs` send its jobs to `queue`. */
export interface FairRule {
  queue: string
  /** Jobs a tenant may enqueue within the window before it is re-routed (integer >= 0). */
  threshold: number
  /** The sliding window, ms; default `maxWindowMs`; at most `maxWindowMs`. */
  perMs?: number
}

export interface FairTenantOptions {
  /** 1..256 characters of [A-Za-z0-9_-]. */
  name: string
  /** 1..64 rules; the last matching one wins: order them from least to most restrictive. */
  rules: FairRule[]
  /** Longest window and default `perMs`, ms; default 1 day. */
  maxWindowMs?: number
  /**
   * `'exact'` (default): a log of job ids per tenant; a re-registered id never counts twice;
   * memory grows with jobs per window. `'approximate'`: counters per granule; memory is
   * bounded by the granules (about 61 per rule); a count may miss up to two granules' jobs
   * at the window's old edge, and a re-added id counts again.
   */
  mode?: 'exact' | 'approximate'
  /**
   * One granule length for every rule in `'approximate'` mode, ms, at most the shortest rule
   * window; by default each rule's window is counted in 60 granules of its own (`perMs / 60`).
   */
  granularityMs?: number
}

export interface FairRoute {
  /** The queue the job goes to. */
  queue: string
  /** Index of the rule that matched (the last one whose threshold was exceeded), -1 for none. */
  rule: number
  /** The tenant's jobs in each rule's window, this job included. */
  counts: number[]
  /** Counted without Redis (RedisStore `whenDown`): 'local' counts in process, others count nothing. */
  degraded: boolean
}

/**
 * Fair multi-tenant routing (sidekiq-fair_tenant): registers each job of a tenant by id and
 * routes tenants that enqueue too much to slower queues. One atomic round trip per job.
 */
export declare class FairTenant {
  constructor(store: Store, options: FairTenantOptions)
  readonly name: string
  /** The rules with `perMs` filled in (and each rule's `granularityMs` in 'approximate' mode). */
  readonly rules: ReadonlyArray<Required<FairRule> & { granularityMs?: number }>
  readonly mode: 'exact' | 'approximate'
  /** The finest granule length in `'approximate'` mode, ms; 0 in `'exact'` mode. */
  readonly granularityMs: number
  /** Registers the job and resolves with the queue it goes to. */
  assign(tenant: string | number, jobId: string | number, defaultQueue: string): Promise<string>
  /** Registers the job and resolves with the queue, the matching rule and the counts. */
  route(tenant: string | number, jobId: string | number, defaultQueue: string): Promise<FairRoute>
  /** Statistics: `admitted` jobs kept their default queue, `refused` ones were re-routed. */
  stats(): Promise<LimiterStats>
}
