// Issue 36 item 4, reproduced deterministically (not fixed yet): the adaptive rate of a fleet
// settles far below the upstream's limit. The real door (pacedFetch, `adaptive: { maxQps:
// 10 L, startQps: 10 L }`, retries 3) on one MemoryStore driven by a ManualClock, with a door
// per process (its own callers, successes not yet told, spacing and spare slots), each store
// call taking a round trip of 2 ms, against a modelled token bucket that answers after a
// fixed latency (__tests__/helpers/adaptive-sim.js): the fleet (L = 100/s, a burst of
// 20, 50 ms, 4 processes x 16 callers; one process shows it too), and one cell of each other
// way the grid of the issue misses its targets today (bench/fetch-sim-grid.js runs the whole
// grid: 33 of its 60 offered cells miss them). The figures asserted are today's, as lower
// bounds (429 shares as upper bounds): a fix raises them here.
// On Redis with real processes (bench/fetch.js, FETCH_BENCH_BURST=20, 4 x 16, 30 s) the
// issue's cells read 0.50 L (L = 100) and 0.62 L (L = 150), the plateau from the 3rd second.
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
// Other ways the grid misses today: a burst of 1 with several processes at a low rate (L = 10:
// calls of different processes' slots land a ms or two closer than 1 / L, a 429 and a block of
// a second each, and the queue of 64 callers holds 6 s of slots taken at old rates); a burst
// of 1 at L = 2000 (this model's clock steps 1 ms and a bucket of burst 1 passes one call per
// step: at most 0.5 L, a limit of the model as much as of the door); a burst of 1 at L = 150
// (slots 6.67 ms apart wait whole ms, 6 or 7: a 6 ms gap is a 429, so the first 429 comes
// at 0.85-0.9 L and it settles there: 0.83-0.89 L); 200 ms of latency (the same
// partial-second measure, with more calls on their way: 0.6-0.66 L at burst L/20).
// A partial second's successes read as a second's rate is the cause; counting it as a
// provisional mark (climbed from fast, no plateau) removes the plateau but the next measure,
// over a second after a block, counts the refilled burst (and the calls on their way) and
// settles above L (1.1-1.25 L with a burst of L/5): 429s and a block every few seconds, the
// same 0.65 L. A fix needs a measure of the limit that is not biased by the burst refilled
// during a block (see the report of the session that wrote this test).
import { describe, expect, it } from 'vitest'
// eslint-disable-next-line @typescript-eslint/no-require-imports
const { simulate } = require('./helpers/adaptive-sim.js')

const SECONDS = 20
const sum = (a: number[]) => a.reduce((x, y) => x + y, 0)

interface Run {
  served: number[]
  refused: number[]
  failed: number
}

// limit (/s), burst, latency (ms), processes, callers per process; today's served / L from
// the 5th second (a lower bound) and share of calls answered 429 from the 5th second (an upper
// bound), measured on this model
const CELLS: [number, number, number, number, number, number, number][] = [
  [100, 20, 50, 4, 16, 0.67, 0.001], // the fleet: 0.676 (target 0.9)
  [100, 20, 50, 1, 16, 0.55, 0.001], // one process: 0.553
  [150, 8, 200, 4, 16, 0.6, 0.006], // 200 ms: 0.609
  [10, 1, 2, 4, 16, 0.29, 0.121], // burst 1, low rate: 0.293 with 12 % 429s
  [2000, 1, 2, 4, 16, 0.3, 0.001], // burst 1, high rate (1 ms steps): 0.310
  [2000, 100, 50, 4, 64, 0.76, 0.001], // 0.765
]

describe('sluice/fetch adaptive rate of a fleet, no rate headers (deterministic)', () => {
  it.each(CELLS)(
    "issue-36-adaptive-fleet (today's figure): L = %i/s, burst %i, %i ms, %i process(es) x %i callers: served >= %f L from the 5th second (target 0.8, 0.9 at steady state), 429 share <= %f",
    async (limit, burst, latencyMs, processes, callers, today, share429) => {
      const r: Run = await simulate({
        shape: 'bucket',
        seconds: SECONDS,
        limit,
        burst,
        latencyMs,
        storeRttMs: 2,
        processes,
        callers,
      })
      const served = sum(r.served.slice(5))
      const refused = sum(r.refused.slice(5))
      // today's figures (not the goal): a fix raises the first and may lower the second
      expect(served / (SECONDS - 5) / limit).toBeGreaterThanOrEqual(today)
      expect(refused / (served + refused)).toBeLessThanOrEqual(share429)
      // (calls refused by maxWaitMs's default, in r.failed, are not sent: at L = 10, 64 callers
      // queue past it)
    },
    60_000,
  )
})
