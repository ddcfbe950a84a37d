// Public types of the limiter family (bucket, window, leaky, points, concurrent, sliding, sliding counter).

import type { BlockOptions } from './pacer'
import type { LimiterStats, Store } from './store'

// ---------------------------------------------------------------------------------------
// The limiter family (Sidekiq Enterprise's limiters, in Node idiom)

/** 'second' | 'minute' | 'hour' | 'day' (UTC-aligned for buckets), or whole ms. */
export type Interval = 'second' | 'minute' | 'hour' | 'day' | number

/**
 * How a limiter decides (DESIGN §9): 'enforce' (the default), or 'shadow': every decision is
 * made and counted as if enforced, and a call that would have been refused is admitted at once
 * (never waits, never reserves a slot, charged nothing) with `reason: 'shadow'`, counted in
 * `stats().shadowRefused`. A rule of `store.rules` with a mode wins over this option.
 */
export type LimiterMode = 'enforce' | 'shadow'

/**
 * Why a decision was answered as it was when a rule or shadow mode answered it: 'denied' (a
 * `deny` rule of `store.rules`: refused with no round trip), 'shadow' (it would have been
 * refused; `allowed` is true). Absent otherwise.
 */
export type DecisionReason = 'denied' | 'shadow'

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
  /** Set when a rule of `store.rules` or shadow mode answered (see DecisionReason). */
  reason?: DecisionReason
}

/** What withinLimit does over the limit after the wait: 'raise' an OverLimitError, or 'skip' `fn`. */
export type LimiterPolicy = 'raise' | 'skip'

/**
 * What `withinLimit` resolves with on a limiter of policy `P`: what `fn` returned, or also
 * `undefined` (skipped) when the policy may be 'skip'.
 */
export type WithinLimitResult<T, P extends LimiterPolicy> = { raise: T; skip: T | undefined }[P]

export interface LimiterOptions<P extends LimiterPolicy = LimiterPolicy> {
  /** Any text of 1..256 UTF-8 bytes (no lone surrogate): `ip-1.2.3.4`, `user@example.com`, `user:42`; limiters with the same name and kind share one limit. */
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
  /** 'enforce' (default) or 'shadow' (see LimiterMode); a rule's mode wins. */
  mode?: LimiterMode
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

/**
 * Lease mode (DESIGN §11): this process takes a run of tokens in one store call (charged in the
 * store at once) and admits from it with no round trip; what is left goes back when the lease
 * ends (`maxAgeMs`, its window ending, `close()`, a rule, `reset()`, `block()`). Never admits more
 * than the limit; the cost is refusals in one process while another holds unused tokens (at
 * most `stats().leasedOutstanding`). `true`: the adaptive size (what this process asks in
 * `maxAgeMs`, at most a quarter of the limit) and `maxAgeMs` 50. A no-op on a MemoryStore.
 * `withinLimit` of a Leaky or Points limiter, whose waits reserve a later slot, does not lease.
 */
export type LeaseOption =
  | boolean
  | {
      /** The size of every lease, in [1, limit] (default: adaptive). */
      maxTokens?: number
      /** How long a lease's tokens are admitted from before what is left goes back, ms in [1, 60000], default 50. */
      maxAgeMs?: number
    }

/** Options of Bucket, Window and Leaky limiters. */
export type CountLimiterOptions<P extends LimiterPolicy = LimiterPolicy> = LimiterOptions<P> & {
  limit: number
  interval: Interval
  /** Lease mode (see LeaseOption); default off. */
  lease?: LeaseOption
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
    options: LimiterOptions<P> & { points: number; interval: Interval; lease?: LeaseOption },
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
  /**
   * 'shadow': granted by shadow mode when no slot was free (it holds none, its token 0 fences
   * nothing; release and extend answer true). A lease an `allow` rule grants holds none either.
   */
  readonly reason?: 'shadow'
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
  /**
   * A lease, waiting up to waitTimeoutMs; then OverLimitError (whatever the policy). A `deny`
   * rule rejects at once (OverLimitError, reason 'denied'); in shadow mode it never waits.
   */
  acquire(options?: { signal?: AbortSignal }): Promise<Lease>
  /** A lease if a slot is free now and nobody waits; otherwise null (and under a `deny` rule). */
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
  /** Set when a rule of `store.rules` or shadow mode answered (see DecisionReason). */
  reason?: DecisionReason
}

/**
 * Several exact sliding windows on one name (say 25 per 5 s and 300 per 60 s), decided and
 * charged together: a call is admitted only if every window has room and is then charged
 * to all of them; a refused call charges none. Memory: one log entry per admitted call of
 * the longest window (at most its limit), trimmed on every call.
 */
export declare class SlidingWindowLimiter {
  constructor(store: Store, options: { name: string; windows: SlidingWindow[]; mode?: LimiterMode })
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
  /**
   * Runs fn if admitted now; otherwise OverLimitError naming the window that refused (a `deny`
   * rule: reason 'denied', no window).
   */
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
export interface SlidingCounterLimiter<P extends LimiterPolicy = LimiterPolicy> extends Omit<
  RateLimiter<P>,
  'intervalMs' | 'check' | 'peek'
> {
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
