// Public types of the pacers (DistributedPacer, PacerComposite).

import type { LimiterStats, Store } from './store'

export interface DistributedPacerOptions {
  /** Any non-empty string up to 512 characters; pacers with the same key share one limit. */
  key: string
  /** Target rate, weight units per second, (0, 1e9]. */
  qps: number
  /** Bucket capacity in weight units, default 0: how much may pass at once before pacing. */
  maxBurst?: number
  /** Bucket leak rate as a fraction of qps, (0, 1]; default 0.5 for pace(), 1 for rateLimit(). */
  burstAllowanceFactor?: number
  /**
   * 'enforce' (default) or 'shadow': pace() and rateLimit() decide at once (never a delay,
   * never a reserved slot) and admit what would have been refused or delayed, with reason
   * 'shadow', counted in `stats().shadowRefused`. A rule of `store.rules` with a mode wins.
   */
  mode?: 'enforce' | 'shadow'
}

export interface PacerOutcome {
  /** pace(): ms to wait before the call. rateLimit(): 0 = admitted, > 0 = refused, retry after. */
  delayMs: number
  /**
   * `watermark=<W>/<maxBurst> + weight=<weight>, delayMs=<delayMs>` (for logs); or, answered by
   * `store.rules` or shadow mode: 'denied' (a `deny` rule: rateLimit() refused with a delay of
   * at most 1 s, no round trip; pace() rejects with OverLimitError, reason 'denied'), 'allowed'
   * (an `allow` rule: admitted, nothing charged), 'shadow' (admitted at once; enforcing would
   * have refused or delayed it).
   */
  reason: 'denied' | 'allowed' | 'shadow' | (string & {})
  /** A single pacer: its bucket level before this call, in weight units (W of the reason). */
  watermark?: number
  /** Answered without Redis (RedisStore `whenDown`); false when Redis answered. */
  degraded: boolean
  /**
   * Gives back what this call took, for a call that will not be made (its caller gave up or
   * decided otherwise): a paced slot that has not started goes to the next caller, in every
   * process; an admitted rateLimit() gives its weight back to the bucket. Resolves true when
   * given back, false when there was nothing to give (refused, weight 0, answered without
   * Redis, or cancelled already). Call it before the slot starts: a slot whose time has come
   * is spent.
   */
  cancel(): Promise<boolean>
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
