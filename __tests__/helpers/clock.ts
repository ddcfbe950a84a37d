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

/**
 * Counts the store calls under way on `stores` (counted in `count.calls` too); the function
 * returned resolves once none is (I/O), so a test moves a ManualClock only after every call
 * it started was answered.
 */
export function tracked(stores: object[], count: { calls: number } = { calls: 0 }): () => Promise<void> {
  let pending = 0
  for (const s of new Set(stores)) {
    const any = s as { _call: (...a: unknown[]) => Promise<unknown> }
    const call = any._call.bind(s)
    any._call = (...a: unknown[]) => {
      pending++
      count.calls++
      return call(...a).finally(() => pending--)
    }
  }
  return async () => {
    for (let i = 0; i < 1_000_000; i++) {
      await new Promise((r) => setImmediate(r))
      if (pending === 0) {
        await new Promise((r) => setImmediate(r))
        if (pending === 0) return
      }
    }
    throw new Error('store calls never settled')
  }
}
