// Types of sluice/fetch (lib/doors/fetch/index.js): pacedFetch, interceptor and their options. The
// package entry re-exports them: lib/entries/fetch.d.ts types `require` and `import` of 'sluice/fetch'.
import type { Budget } from '../../entries/types/budget.js'
import type { Store } from '../../entries/types/store.js'

/** What `limits(key)` returns for a key: its own rate (or null: the shared `qps`, if any). */
export interface PacedKeyLimits {
  /** Calls per second for this key, over every process. */
  qps: number
  /** Calls that may go out at once before pacing starts (default 0). */
  maxBurst?: number
}

export interface PacedRetryOptions {
  /** Statuses retried (default [429, 503]). */
  statuses?: number[]
  /** Methods retried (default the idempotent ones: GET, HEAD, OPTIONS, TRACE, PUT, DELETE). */
  methods?: string[]
  /** Retries per call (default 3). */
  maxRetries?: number
}

export interface PacedAdaptiveOptions {
  /** The rate never goes below this (default min(1, maxQps)); when given, also the floor of a learned rate. */
  minQps?: number
  /** The ceiling (default `qps`). */
  maxQps?: number
  /** The rate a key starts at (default maxQps). */
  startQps?: number
  /** Share taken off the lower of the rate and the served rate on a throttled answer, once per back-off period (default 0.05). */
  decrease?: number
  /** Calls per second added per second of calls that succeed (default: 0.2 % of the rate). */
  increase?: number
}

export interface PacedFetchOptions {
  store: Store
  /** The key a call is paced under (default: the URL's origin). */
  key?: (url: URL, init?: RequestInit) => string
  /** Calls per second per key, over every process (a DistributedPacer per key). */
  qps?: number
  /** Calls that may go out at once before pacing starts (default 0). */
  maxBurst?: number
  /** Per-key settings (asked once per key); null: the shared `qps`, if any. */
  limits?: (key: string) => PacedKeyLimits | null | Promise<PacedKeyLimits | null>
  /**
   * The longest a call waits for its slot, all its waits together; a slot further than what is
   * left of it is refused with OverLimitError and nothing is sent (default 30_000; Infinity: no
   * limit). A wait that gives up gives its slot back.
   */
  maxWaitMs?: number
  /** Which answers are retried, or false (default: 429 and 503 of idempotent methods, 3 times). */
  retry?: PacedRetryOptions | false
  /** Learn limits from RateLimit / RateLimit-Policy / X-RateLimit-* / x-ratelimit-*-requests (default true). */
  learn?: boolean
  /** A rate per key shared by the fleet, lowered on throttled answers and raised while calls succeed. */
  adaptive?: PacedAdaptiveOptions
  /**
   * Cap on any block learned from an answer, ms (default 3_600_000); a learned rate is never
   * slower than one call per maxBlockMs (or adaptive.minQps, when given).
   */
  maxBlockMs?: number
  /** Statuses whose Retry-After blocks the key in every process (default [429, 503]). */
  blockStatuses?: number[]
  /**
   * 'shadow': each call asks its key's record for a slot now and goes at once whatever it
   * answers (a call that would have waited or been refused counted in `shadowRefused`);
   * default 'enforce'. A rule of `store.rules` for the key (kind 'adaptive') wins.
   */
  mode?: 'enforce' | 'shadow'
  /** The fetch to wrap (default globalThis.fetch). */
  fetch?: (input: any, init?: any) => Promise<Response>
  /**
   * A Budget each call reserves `estimate(req)` on before it is paced and sent, and
   * settles from its answer with `settle(res, req)` (default: as reserved). One reservation per
   * call, retries included; given back (cancelled) when no answer came: maxWaitMs, an abort, a
   * network error. Needs `estimate`. Not on the interceptor.
   */
  budget?: Budget
  /** The amounts a call reserves (`req`: a copy of the call, its body readable). */
  estimate?: (req: Request) => Record<string, number> | Promise<Record<string, number>>
  /**
   * The call's true amounts, from a copy of its last answer (the caller's body stays unread);
   * runs beside the caller. Dimensions left out keep their reserved amount; a settle that
   * throws or answers amounts the budget refuses settles as reserved (`budgetErrors`).
   */
  settle?: (res: Response, req: Request) => Record<string, number> | Promise<Record<string, number>>
}

/** One key's counts in this process. */
export interface PacedKeyStats {
  key: string
  /** Calls made (each retry counts in `retries`, not here). */
  calls: number
  /** Calls (and retries) that waited for a slot, and how long in all. */
  waited: number
  waitTimeMs: number
  /** Answers 429 or 503 seen. */
  throttled: number
  /** Blocks this process recorded for the key (Retry-After or an exhausted quota). */
  blocks: number
  retries: number
  /** Slots given back by waits that gave up (aborted, timed out). */
  givenBack: number
  /** Calls refused with OverLimitError (maxWaitMs). */
  refused: number
  /** Header values ignored or clamped (malformed or hostile). */
  hostile: number
  /** Calls let out without the store (RedisStore `whenDown`). */
  degraded: number
  /** Times the shared adaptive rate was lowered on this process's report. */
  decreases: number
  /** Reports the store could not record. */
  errors: number
  /** With a budget: reservations made, given back because no answer came, and settles that fell back to the reserved amounts. */
  reserved: number
  cancelled: number
  budgetErrors: number
  /** The rate the key is paced at now, per second (null: unpaced). */
  qps: number | null
  /** The limit the upstream stated, while it is remembered. */
  learned?: { limit: number; windowMs: number }
  /** ms until a block this process recorded ends. */
  blockedMs?: number
}

/** A fetch whose calls are paced per key, over every process on the store. */
export interface PacedFetch {
  (input: string | URL | Request, init?: RequestInit): Promise<Response>
  /** This process's counts, per key (one key, or all). */
  stats(key?: string): Promise<PacedKeyStats[]>
}

/** `pacedFetch({ store, qps })`: fetch's signature, paced per key across the fleet. */
export declare function pacedFetch(options: PacedFetchOptions): PacedFetch

/** An undici 7 interceptor: `new Agent().compose(interceptor(options))`. */
export interface PacedInterceptor {
  (dispatch: (options: any, handler: any) => boolean): (options: any, handler: any) => boolean
  stats(key?: string): Promise<PacedKeyStats[]>
}

/** Paces every request of an undici 7 dispatcher, as pacedFetch paces its calls. */
export declare function interceptor(
  options: Omit<PacedFetchOptions, 'fetch' | 'budget' | 'estimate' | 'settle'>,
): PacedInterceptor
