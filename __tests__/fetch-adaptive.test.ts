// sluice/fetch's adaptive rate (issue 26, item 4) against upstreams that say nothing but 429 +
// Retry-After: the real door on a MemoryStore driven by a ManualClock, 64 callers, and a
// modelled upstream with a hidden limit of 100/s (__tests__/helpers/adaptive-sim.js), so the
// numbers are the same on every run: a token bucket with a small burst, one whose burst is a
// whole second, and a fixed one-second window entered at several phases. Counted per second
// of the upstream: what it served and what it refused. The same runs, on Redis with 4
// processes and real time, are the benchmark's (bench/fetch.js, BENCHMARKS.md).
import { describe, expect, it } from 'vitest'
// eslint-disable-next-line @typescript-eslint/no-require-imports
const { simulate, settledFrom } = require('./helpers/adaptive-sim.js')

const L = 100
const sum = (a: number[]) => a.reduce((x, y) => x + y, 0)
const avg = (a: number[]) => sum(a) / a.length

interface Run {
  served: number[]
  refused: number[]
  failed: number
}

describe('sluice/fetch adaptive rate, no rate headers (deterministic)', () => {
  it('a token bucket with a small burst: found from 10 x L in a few blocks, then held near L', async () => {
    const r: Run = await simulate({ shape: 'bucket', seconds: 20, limit: L })
    // the first 429s: the burst at 10 L, a cut to the geometric middle, then a cycle or two
    // (each a 429 and a block of a second) that read the bucket's rate and burst
    expect(sum(r.refused.slice(0, 5))).toBeLessThanOrEqual(10)
    // the targets (issue 36 item 4): >= 0.8 L from the 5th second, >= 0.9 L at steady
    // state; here every second of the last 10 is served at 0.95 L or more
    expect(avg(r.served.slice(5)) / L).toBeGreaterThanOrEqual(0.9)
    expect(Math.min(...r.served.slice(-10)) / L).toBeGreaterThanOrEqual(0.95)
    // after it, at most that one probe (one 429, one fleet-wide block)
    expect(sum(r.refused.slice(5))).toBeLessThanOrEqual(1)
    expect(r.failed).toBe(0)
  }, 30_000)

  it.each([0, 500, 900, 990])(
    'a fixed window entered %i ms into its second: settled within 5 s, no 429 after',
    async (phaseMs) => {
      const r: Run = await simulate({ shape: 'window', seconds: 20, limit: L, phaseMs })
      const from = settledFrom(r.served, L)
      expect(from).not.toBeNull()
      expect(from).toBeLessThanOrEqual(5)
      expect(sum(r.refused.slice(5))).toBe(0)
      // never more than the window allows in any of its seconds (the upstream would refuse)
      expect(Math.max(...r.served.slice(5))).toBeLessThanOrEqual(L)
      expect(r.failed).toBe(0)
    },
    30_000,
  )

  it('a bucket whose burst is a whole second: served at the limit over the run', async () => {
    const r: Run = await simulate({ shape: 'bucket-burst', seconds: 20, limit: L })
    expect(avg(r.served) / L).toBeGreaterThanOrEqual(0.95)
    expect(sum(r.refused.slice(1))).toBeLessThanOrEqual(2)
  }, 30_000)

  it('a start 100 x over the limit comes down by cuts, not by halvings', async () => {
    const r: Run = await simulate({
      shape: 'bucket',
      seconds: 20,
      limit: L,
      adaptive: { maxQps: 100 * L, startQps: 100 * L },
    })
    // halving from 100 L would need 7 blocks of a second each to get under L
    expect(settledFrom(r.served, L)).toBeLessThanOrEqual(14)
    expect(avg(r.served.slice(-5)) / L).toBeGreaterThanOrEqual(0.9)
  }, 30_000)
})
