// Public types of sluice. The native layer's generated types are in ../index.d.ts.

/** The stable error codes; `error.code` is always one of them. */
export type ErrorCode =
  | 'ERR_INVALID_CONFIG'
  | 'ERR_INVALID_ARGUMENT'
  | 'ERR_OVER_LIMIT'
  | 'ERR_STORE_UNAVAILABLE'
  | 'ERR_TIMEOUT'
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
}

/** A clock that moves only when told to; replaces a store's clock (tests, simulations). */
export declare class ManualClock {
  /** @param startMs ms since the epoch, default 0 */
  constructor(startMs?: number)
  /** Current time, ms since the epoch. */
  now(): number
  /** Sets the time (it may go backwards). */
  set(ms: number): void
  /** Moves the time forward by `ms` (>= 0). */
  advance(ms: number): void
}

export interface StoreOptions {
  /** Prefix of every key, default "sluice". No braces or newlines. */
  keyPrefix?: string
  /** Decide with this clock instead of the system clock (memory) or Redis `TIME` (Redis). */
  clock?: ManualClock
}

/** The embedded store: state in this process, synchronous native decisions, no Redis. */
export declare class MemoryStore {
  constructor(options?: StoreOptions)
  readonly keyPrefix: string
  readonly clock: ManualClock | null
  close(): Promise<void>
}

export interface RedisStoreOptions extends StoreOptions {
  /** Standalone server URL, default "redis://127.0.0.1:6379"; `rediss://` = TLS. */
  url?: string
  /** Seed node URLs of a Redis Cluster (cluster mode). */
  cluster?: string[]
  /** Connections in the pool, 1..64, default 2. */
  poolSize?: number
  /** Deadline of every call, ms, default 2000: ERR_TIMEOUT past it. */
  commandTimeoutMs?: number
  /** Deadline of connect(), ms, default 5000: ERR_STORE_UNAVAILABLE past it. */
  connectTimeoutMs?: number
}

/** A Redis or Redis Cluster store over one native connection pool. */
export declare class RedisStore {
  private constructor()
  /** Connects and waits until every connection is up. */
  static connect(options?: RedisStoreOptions | string): Promise<RedisStore>
  readonly keyPrefix: string
  readonly clock: ManualClock | null
  readonly isCluster: boolean
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
}

export interface Pacer {
  readonly key: string
  pace(weight?: number): Promise<PacerOutcome>
  rateLimit(weight?: number): Promise<PacerOutcome>
}

/** A distributed leaky bucket + queue; cheap to construct (no round trip). */
export declare class DistributedPacer implements Pacer {
  constructor(store: Store, options: DistributedPacerOptions)
  readonly key: string
  /** Reserves a slot for a call of `weight` (default 1); resolve, then sleep `delayMs`. */
  pace(weight?: number): Promise<PacerOutcome>
  /** Admits now (`delayMs` 0, charged) or refuses (`delayMs` > 0, nothing charged). */
  rateLimit(weight?: number): Promise<PacerOutcome>
}

export interface PacerCompositeOutcome extends PacerOutcome {
  /** The member with the largest delay (first on ties), or null when no member delays. */
  pacer: Pacer | null
}

/** Several pacers on one store, decided together; rateLimit() charges all members or none. */
export declare class PacerComposite implements Pacer {
  constructor(pacers: Array<DistributedPacer | PacerComposite>)
  /** Always "". */
  readonly key: string
  readonly pacers: Array<DistributedPacer | PacerComposite>
  pace(weight?: number): Promise<PacerCompositeOutcome>
  rateLimit(weight?: number): Promise<PacerCompositeOutcome>
}
