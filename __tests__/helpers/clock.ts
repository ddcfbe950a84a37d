// Waiting for sluice to arm a timer on a ManualClock before the test moves the clock. This
// waits for I/O (a round trip to Redis), never for time logic.
import type { ManualClock } from '../../lib/entries/index.js'

export async function timerArmed(clock: ManualClock, count = 1): Promise<void> {
  const pending = () => (clock as unknown as { _timers: unknown[] })._timers.length
  for (let i = 0; i < 2000 && pending() < count; i++) await new Promise((r) => setTimeout(r, 1))
  if (pending() < count) throw new Error('no timer was armed on the clock')
}

/** Resolves when `predicate` holds, checking after each I/O turn (at most ~2 s). */
export async function eventually(predicate: () => boolean | Promise<boolean>): Promise<void> {
  for (let i = 0; i < 2000; i++) {
    if (await predicate()) return
    await new Promise((r) => setTimeout(r, 1))
  }
  throw new Error('condition never held')
}

/** Lets callbacks queued by a clock move run (promise jobs and one I/O turn). */
export const flush = () => new Promise((r) => setTimeout(r, 1))
