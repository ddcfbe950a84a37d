// Public type of ManualClock, the clock that moves only when told to.

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
