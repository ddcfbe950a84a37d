// Public types of budgets (Budget, Reservation): several dimensions reserved at once, settled later.

import type { LimiterStats, Store } from './store'

/** One dimension of a budget: `limit` per `intervalMs`, replenished continuously. */
export interface BudgetDimension {
  /** Integer in [1, 1e9]. */
  limit: number
  /** Whole ms in [1, 10 years]. */
  intervalMs: number
  /** Integer in [0, 1e9], default 0: how much the dimension may hold beyond empty when a reservation arrives. */
  maxBurst?: number
  /**
   * Integer in [0, 2e9], default `limit + maxBurst` (one interval's worth): the most one
   * `settle()` charges beyond its reservation. What it reports past that is counted in
   * `stats().dimensions[name].excess`, not owed: one answer reporting an absurd amount cannot
   * stall the budget.
   */
  maxDebt?: number
}

export interface BudgetOptions<D extends string = string> {
  /** Any text of 1..256 UTF-8 bytes (no lone surrogate). */
  name: string
  /** 1..8 dimensions by name, e.g. `{ requests: {...}, inputTokens: {...}, outputTokens: {...} }`. */
  dimensions: Record<D, BudgetDimension>
  /**
   * 'enforce' (default) or 'shadow': `reserve()` decides at once (never waits); a reservation
   * that does not fit now is admitted holding nothing, `reason: 'shadow'`, counted in
   * `stats().shadowRefused`. A rule of `store.rules` with a mode wins.
   */
  mode?: 'enforce' | 'shadow'
}

export interface ReserveOptions {
  /** Longest wait for the reservation's turn, ms (default 60,000; `Infinity`: no bound); over it: OverLimitError, nothing charged. */
  maxWaitMs?: number
  /** Aborts the wait (ERR_ABORTED); the charge is given back. */
  signal?: AbortSignal
  /** How long the reservation stays open from its turn, ms (default 600,000); then it counts as spent. */
  ttlMs?: number
}

/** What `reserve()` resolves with, once its turn came. */
export interface Reservation<D extends string = string> {
  /** Unique across processes. */
  readonly id: string
  /** The amounts reserved, every dimension (0 where none was asked). */
  readonly amounts: Readonly<Record<D, number>>
  /** How long `reserve()` waited for its turn, ms. */
  readonly delayMs: number
  /** When its turn came on the store's clock (Redis' on a RedisStore), ms since the epoch (µs precision). */
  readonly startMs: number
  /** Answered without Redis (RedisStore `whenDown`): settling and cancelling it change nothing. */
  readonly degraded: boolean
  /**
   * 'shadow': admitted by shadow mode though it did not fit (it holds nothing; settling and
   * cancelling it change nothing). A reservation an `allow` rule of `store.rules` grants holds
   * nothing either; under a `deny` rule `reserve()` rejects (OverLimitError, reason 'denied').
   */
  readonly reason?: 'shadow'
  /**
   * The true amounts (dimensions left out keep their reserved amount): less gives the
   * difference back at once, more is charged as debt later reservations wait for (at most the
   * dimension's `maxDebt` beyond the reservation; the rest is counted in `excess`, not owed).
   * ERR_INVALID_ARGUMENT when settled, cancelled or expired already (nothing changes).
   */
  settle(actual: Partial<Record<D, number>>): Promise<void>
  /** Gives every reserved amount back. ERR_INVALID_ARGUMENT when settled, cancelled or expired already. */
  cancel(): Promise<void>
}

export interface BudgetDimensionStats {
  limit: number
  /** Charged and not yet replenished (open and queued reservations and debt included). */
  used: number
  /** Held by open reservations. */
  reserved: number
  /** Settled beyond a reservation past `maxDebt`, summed over the budget's life: counted, not charged. */
  excess: number
}

export interface BudgetStats<D extends string = string> extends Partial<LimiterStats> {
  dimensions: Record<D, BudgetDimensionStats>
  /** Open reservations. */
  reservations: number
  /** Reservations that expired unsettled (counted as spent). */
  expired: number
  /**
   * On the budget: at most 20 active tenants (those with an open reservation first, then the
   * latest active), by id; on a tenant view: that tenant alone (as sent, 0s, while it is idle).
   */
  tenants?: Record<string, BudgetTenantStats<D>>
  /** On the budget: how many tenants are active (a waiting or unsettled reservation, or one made within the last second). */
  activeTenants?: number
}

export interface BudgetTenantStats<D extends string = string> {
  share: number
  maxShare: number
  /** Per dimension: what the tenant charged within its share and is not yet replenished (at its share's rate now). */
  used: Record<D, number>
}

export interface BudgetTenantOptions {
  /** In [0, 1]: this share of every dimension's rate is the tenant's (kept in parts per million, rounded down). */
  share: number
  /** In (0, 1], at least `share` (default 1): the most of each rate it may use, borrowing what others leave unused. */
  maxShare?: number
  /** Whole ms (default 1,000): how far ahead borrowed capacity may be committed (what a tenant coming back may wait for). */
  borrowAheadMs?: number
}

export interface Budget<D extends string = string> {
  readonly name: string
  readonly dimensions: Readonly<Record<D, Required<BudgetDimension>>>
  /**
   * Charges `amounts` on every dimension named, all or nothing, in one FIFO shared by every
   * process; resolves when its turn comes. OverLimitError (nothing charged) past `maxWaitMs`;
   * ERR_INVALID_ARGUMENT for an unknown dimension or an amount over `limit + maxBurst`.
   */
  reserve(amounts: Partial<Record<D, number>>, options?: ReserveOptions): Promise<Reservation<D>>
  stats(): Promise<BudgetStats<D>>
  /**
   * A view for tenant `id` (1..256 UTF-8 bytes): its reservations charge the tenant's
   * allowance and the whole budget, all or nothing. A share is in force while its tenant is
   * active (a waiting or unsettled reservation, or one made within the last second); when the
   * active tenants' shares add up to more than 1 they are scaled down in proportion, never
   * refused. A view holds nothing: make one per call, for any number of ids.
   */
  tenant(id: string, options: BudgetTenantOptions): Budget<D>
  /** The tenant of a view from `tenant()`, undefined for the budget. */
  readonly tenantId: string | undefined
}

export declare const Budget: {
  new <D extends string>(store: Store, options: BudgetOptions<D>): Budget<D>
  readonly prototype: Budget
}
