// Public types of the Sentry-style quotas (QuotaLimiter) and fair tenant routing (FairTenant).

import type { LimiterStats, Store } from './store'

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
  useQuotas(
    requests: RequestedQuota[],
    grants: Array<Omit<GrantedQuota, 'degraded'> & { degraded?: boolean }>,
    timestamp: number,
  ): Promise<void>
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
  /** Any text of 1..256 UTF-8 bytes (no lone surrogate). */
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
