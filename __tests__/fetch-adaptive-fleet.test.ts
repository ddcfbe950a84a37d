// Issue 36 item 4: the adaptive rate of a fleet, with no rate headers, serves >= 0.8 L from the
// 5th second and >= 0.9 L at steady state with <= 2 % of calls answered 429, swept
// deterministically over the upstream's limit L, its burst, the latency and the processes.
// The real door (pacedFetch, `adaptive: { maxQps: 10 L, startQps: 10 L }`, retries 3, its
// default maxWaitMs) on one MemoryStore driven by a ManualClock, a door per process (its own
// callers, gate, horizon, successes not yet told and spare slots), each store call a round
// trip of 2 ms, against a modelled token bucket of L per second with the given burst that
// answers after a fixed latency (__tests__/helpers/adaptive-sim.js; bench/fetch-sim-grid.js
// runs the same cells and more, and bench/adaptive-model.js is the rule in JS, where it was
// found). Time moves 1 ms a step, so every run gives the same numbers. 30 s per cell; the
// steady state is the last 10 s. Offered cells only: processes x callers x 1000 / latency >=
// 1.5 L (16 callers a process, more up to 64 where 16 cannot offer it).
//
// Cells left out, and why (measured with this simulation and the model alike):
// - a burst of 1 at L = 600: the door's timers (and this simulation's steps) have a resolution
//   of 1 ms, so two calls closer than 1 / L land on one millisecond: the highest rate a burst of
//   1 serves without 429s is 1000 / ceil(1000 / L) = 500/s, 0.83 L, and the rule settles at
//   0.80-0.82 L (0.53-0.70 L with one process at 50 ms). Not a rule's limit.
// - L = 150, burst 1, one process, 50 ms (0.71 L from the 5th second, 0.80 L at steady state):
//   the same resolution at L = 150 (slots 6.67 ms apart are sent 6 or 7 ms apart; 6 ms is
//   refused), so a refusal comes at 137/s, under L, and the rule cuts 5 % under it.
// The sweep below covers L {10, 40, 150, 600} x burst {1, L/20, L/5, L} (rounded up) at 50 ms
// with 1, 4 and 8 processes, and at 2 and 200 ms with 1 and 8 processes (CI time).
import { describe, expect, it } from 'vitest'
// eslint-disable-next-line @typescript-eslint/no-require-imports
const { simulate } = require('./helpers/adaptive-sim.js')

const SECONDS = 30
const STEADY = 10
const sum = (a: number[]) => a.reduce((x, y) => x + y, 0)

interface Run {
  served: number[]
  refused: number[]
  failed: number
}

/** [L, burst, latency ms, processes, callers per process] */
type Cell = [number, number, number, number, number]

const CELLS: Cell[] = []
for (const L of [10, 40, 150, 600]) {
  for (const burst of [...new Set([1, Math.ceil(L / 20), Math.ceil(L / 5), L])]) {
    for (const latencyMs of [2, 50, 200]) {
      for (const processes of latencyMs === 50 ? [1, 4, 8] : [1, 8]) {
        const callers = Math.min(64, Math.max(16, Math.ceil((1.5 * L * latencyMs) / (1000 * processes))))
        if ((processes * callers * 1000) / latencyMs < 1.5 * L) continue // not offered
        if (burst === 1 && L === 600) continue // 1 ms timers (above)
        if (burst === 1 && L === 150 && processes === 1 && latencyMs === 50) continue // (above)
        CELLS.push([L, burst, latencyMs, processes, callers])
      }
    }
  }
}
// the issue's own fleet: L = 100, a burst of 20, 50 ms, 4 processes x 16 callers
CELLS.push([100, 20, 50, 4, 16])

describe('issue-36-adaptive-fleet: L {10, 40, 150, 600, and 100} x burst {1, L/20, L/5, L} x latency {2, 50, 200} ms x processes {1, 4, 8}, no rate headers (deterministic)', () => {
  it.each(CELLS)(
    'L = %i/s, burst %i, %i ms, %i process(es) x %i callers: >= 0.8 L from the 5th second, >= 0.9 L at steady state, <= 2 % 429s',
    async (limit, burst, latencyMs, processes, callers) => {
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
      const cell = JSON.stringify({ served: r.served, refused: r.refused, failed: r.failed })
      const from5 = sum(r.served.slice(5)) / (SECONDS - 5) / limit
      const steady = sum(r.served.slice(-STEADY)) / STEADY / limit
      const steady429 = sum(r.refused.slice(-STEADY)) / (sum(r.served.slice(-STEADY)) + sum(r.refused.slice(-STEADY)))
      expect(from5, cell).toBeGreaterThanOrEqual(0.8)
      expect(steady, cell).toBeGreaterThanOrEqual(0.9)
      expect(steady429, cell).toBeLessThanOrEqual(0.02)
      // no caller was refused by its maxWaitMs (30 s) on the way
      expect(r.failed, cell).toBe(0)
    },
    60_000,
  )
})
