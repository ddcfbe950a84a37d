// Types of sluice/metrics (lib/doors/metrics/index.js and lib/entries/metrics.mjs): collectMetrics and its options.
import type { Registry } from 'prom-client'
import type { Store } from '../../entries/types/index.js'

export interface CollectMetricsOptions {
  /** The prom-client registry (default: prom-client's global `register`). */
  registry?: Registry
  /** Metric name prefix, default 'sluice_'. */
  prefix?: string
  /** The `limiter` label of a limiter (default its name): map per-user names to their family. */
  limiterLabel?: (name: string, kind: string) => string
  /** Buckets of `sluice_wait_seconds`, seconds. */
  buckets?: number[]
  /** An OpenTelemetry Meter; by default `@opentelemetry/api`'s global one when it is installed. */
  meter?: unknown
}

/**
 * Registers sluice's metrics (this process's counts): `sluice_decisions_total{limiter,kind,result}`,
 * `sluice_decision_weight_total`, `sluice_near_limit_total`, `sluice_degraded_total`,
 * `sluice_rescheduled_total`, the `sluice_wait_seconds` histogram, `sluice_leases_held{limiter}`,
 * `sluice_budget_used` / `sluice_budget_reserved` / `sluice_budget_excess{limiter,dimension}`, sluice/fetch's
 * `sluice_throttled_total{limiter,kind}`, `sluice_blocks_total{limiter,kind}`, store.rules'
 * `sluice_shadow_refused_total{limiter,kind}` and `sluice_denied_total{limiter,kind}`, lease mode's
 * `sluice_lease_calls_total{limiter,kind}` and `sluice_lease_returned_total{limiter,kind}`,
 * `sluice_paced_rate{limiter}` and `sluice_paced_learned_rate{limiter}` (per key),
 * `sluice_waiters` and `sluice_store_up`; and the same through OpenTelemetry when available.
 */
export declare function collectMetrics(store: Store, options?: CollectMetricsOptions): { close(): void }

/** The default buckets of `sluice_wait_seconds`, seconds. */
export declare const WAIT_BUCKETS: number[]
