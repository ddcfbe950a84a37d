// Public types of sluice's errors: the closed list of codes and the classes that carry them.

import type { SlidingWindow } from './limiters'

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
  /** a RedisStore 'warning' event (an evicting server, a policy it could not read); never thrown */
  | 'ERR_CONFIG_RISK'

export declare const ErrorCodes: readonly ErrorCode[]

/**
 * What a store failure was: one cluster node lost (only its keys' calls fail, the other
 * masters' go on), the cluster moving a slot under the call, or the store as a whole.
 */
export type StoreFailureDetail = 'node-down' | 'topology-change' | 'outage'

/** Every error sluice throws or rejects with. Match on `code`, not on the message. */
export declare class SluiceError extends Error {
  constructor(code: ErrorCode, message: string, options?: { cause?: unknown; detail?: StoreFailureDetail })
  readonly code: ErrorCode
  /** On a store failure from Redis (`ERR_STORE_UNAVAILABLE`, `ERR_TIMEOUT`): what it was. */
  readonly detail?: StoreFailureDetail
}

/** Thrown by the waiting calls when over a limit. */
export declare class OverLimitError extends SluiceError {
  constructor(message: string, details: { limiter: string; retryAfterMs: number; reason?: 'limit' | 'denied' })
  readonly code: 'ERR_OVER_LIMIT'
  readonly limiter: string
  readonly retryAfterMs: number
  /** 'limit' (over it), or 'denied' (a `deny` rule of `store.rules`: refused with no round trip). */
  readonly reason: 'limit' | 'denied'
  /** From SlidingWindowLimiter.ensure: the window that refused (the one that frees up last). */
  window?: SlidingWindow
}
