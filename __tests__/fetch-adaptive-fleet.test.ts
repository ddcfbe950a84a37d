// Issue 36 item 4, reproduced deterministically (not fixed yet): the adaptive rate of a fleet
// settles far below the upstream's limit. The real door (pacedFetch, `adaptive: { maxQps:
// 10 L, startQps: 10 L }`, retries 3) on one MemoryStore driven by a ManualClock, with a door
// per process (its own callers, successes not yet told, spacing and spare slots), each store
// call taking a round trip of 2 ms, against a modelled token bucket of L = 100/s with a burst
// of 20 that answers after 50 ms (__tests__/helpers/adaptive-sim.js): the fleet of 4
// processes x 16 callers, and one process of 16 callers, which shows it too.
//
// The mechanism (traced with `SIM_TRACE=1 node bench/fetch-sim.js`, these settings):
// - t = 0: 10 L, the bucket's 20 served, then 429s: what was served (a few calls answered by
//   then) is under 1/16 of the rate, a cut to the geometric middle: 1.45-1.6 L, and a block of
//   1 s (Retry-After in whole seconds).
// - t = 1 s: the block ends with the bucket refilled (20). At 1.45-1.6 L it is empty
//   20 / (0.45-0.6 L) = 0.3-0.45 s later: a 429. The measure counts from the last decrease, the
//   block's second as nothing served, so what was "served over the last second" is the 0.3-0.45
//   s of calls since the block ended: 0.55-0.68 L. The calls flowed for less than a second, so
//   it is not the "climbed" case: a measured decrease, mark = that, rate = 0.95 of it (then
//   raised by the successes of calls on their way, told during the block: 0.55 and 0.68 L).
// - Then the plateau: no climb for 30 s (PLATEAU_US), and after it inc_rel 0.002/s: the rate
//   stays at 0.55-0.68 L for the rest of a run. One process with 5 ms of latency and 64
//   callers (bench/fetch-sim.js's default) cuts below L at the first 429 and climbs for more
//   than a second before the next: its measure is a whole second's, 0.99 L.
// A partial second's successes read as a second's rate is the cause; counting it as a
// provisional mark (climbed from fast, no plateau) removes the plateau but the next measure,
// over a second after a block, counts the refilled burst (and the calls on their way) and
// settles above L (1.1-1.25 L with a burst of L/5): 429s and a block every few seconds, the
// same 0.65 L. A fix needs a measure of the limit that is not biased by the burst refilled
// during a block (see the report of the session that wrote this test).
import { describe, expect, it } from 'vitest'
// eslint-disable-next-line @typescript-eslint/no-require-imports
const { simulate } = require('./helpers/adaptive-sim.js')

const L = 100
const SECONDS = 20
const avg = (a: number[]) => a.reduce((x, y) => x + y, 0) / a.length

interface Run {
  served: number[]
  refused: number[]
  failed: number
}

describe('sluice/fetch adaptive rate of a fleet, no rate headers (deterministic)', () => {
  it.each([
    // processes, callers per process, today's steady figure (served / L, seconds 5-20)
    [4, 16, 0.6],
    [1, 16, 0.5],
  ])(
    "issue-36-adaptive-fleet (today's figure): %i process(es) x %i callers, a bucket of 100/s with a burst of 20, 50 ms latency, settle at 0.55-0.68 L (target 0.9 L)",
    async (processes, callers, today) => {
      const r: Run = await simulate({
        shape: 'bucket',
        seconds: SECONDS,
        limit: L,
        burst: 20,
        latencyMs: 50,
        storeRttMs: 2,
        processes,
        callers,
      })
      const steady = avg(r.served.slice(5)) / L
      // today's figure, a lower bound it meets (not the goal: the issue asks >= 0.9 L); a fix
      // raises it here
      expect(steady).toBeGreaterThanOrEqual(today)
      // at most 2 % of the calls answered 429 at steady state (today: none, the plateau)
      const refused = r.refused.slice(5).reduce((x, y) => x + y, 0)
      const served = r.served.slice(5).reduce((x, y) => x + y, 0)
      expect(refused / (refused + served)).toBeLessThanOrEqual(0.02)
      expect(r.failed).toBe(0)
    },
    60_000,
  )
})
