#!/usr/bin/env node
'use strict'
// Issue 36 item 4's grid, deterministic: sluice/fetch's adaptive rate (no rate headers,
// `adaptive: { maxQps: 10 L, startQps: 10 L }`, retries 3) against a token bucket of L per
// second, over L x burst x latency x processes, each process a door with its own callers on
// one MemoryStore driven by a ManualClock, each store call a round trip of SIM_RTT_MS
// (__tests__/helpers/adaptive-sim.js). A cell is offered when processes x callers x 1000 /
// latency >= 1.5 L (callers: 16, more up to 64 where 16 cannot offer it). Prints per cell
// served / L from the 5th second and over the last 10 s, and the share of calls answered 429
// from the 5th second, then the cells that miss the targets (>= 0.8 L from the 5th
// second, >= 0.9 L at steady state, <= 2 % 429s). A 20 s cell takes 0.1-15 s.
//   node bench/fetch-sim-grid.js   SIM_L (10,150,2000), SIM_BURSTS (1,L/20,L: a number, L/k
//                                  or L), SIM_LATENCY_MS (2,50,200), SIM_PROCS (1,4,8),
//                                  SIM_SECONDS (20), SIM_RTT_MS (2), SIM_SHAPE (bucket, or
//                                  window: 1 s fixed windows, window60: 60 s), SIM_MODEL (a JSON of
//                                  bench/adaptive-model.js's switches: the rule in JS)
const { simulate } = require('../__tests__/helpers/adaptive-sim.js')
const model = require('./adaptive-model.js')
if (process.env.SIM_MODEL) model.install(JSON.parse(process.env.SIM_MODEL))

const list = (name, def) => (process.env[name] || def).split(',')
const SECONDS = Number(process.env.SIM_SECONDS || 20)
const RTT_MS = Number(process.env.SIM_RTT_MS || 2)
// the steady state: the last SIM_STEADY seconds (10; for window60, a whole window: 60, with
// SIM_SECONDS 180: the windows start 300 ms before each minute of the run)
const STEADY = Number(process.env.SIM_STEADY || 10)
// 'bucket' (the grid's), or 'window': a fixed window of L per second entered 300 ms into it,
// or 'window60': a fixed window of 60 L per 60 s entered 300 ms into it (bursts do not apply:
// one burst value runs; give it SIM_SECONDS of 120 or more to see a steady state)
const SHAPE = process.env.SIM_SHAPE || 'bucket'

/** The burst `spec` ('1', 'L/20', 'L') for a limit of `L`, rounded up. */
function burstOf(spec, L) {
  if (spec === 'L') return L
  if (spec.startsWith('L/')) return Math.max(1, Math.ceil(L / Number(spec.slice(2))))
  return Number(spec)
}

async function main() {
  const sum = (a) => a.reduce((x, y) => x + y, 0)
  const missed = []
  for (const L of list('SIM_L', '10,150,2000').map(Number)) {
    const bursts = SHAPE.startsWith('window')
      ? [L]
      : [...new Set(list('SIM_BURSTS', '1,L/20,L').map((b) => burstOf(b, L)))]
    for (const burst of bursts) {
      for (const latencyMs of list('SIM_LATENCY_MS', '2,50,200').map(Number)) {
        for (const processes of list('SIM_PROCS', '1,4,8').map(Number)) {
          const callers = Math.min(64, Math.max(16, Math.ceil((1.5 * L * latencyMs) / (1000 * processes))))
          if ((processes * callers * 1000) / latencyMs < 1.5 * L) continue // not offered
          model.reset()
          const r = await simulate({
            shape: SHAPE,
            phaseMs: 300,
            seconds: SECONDS,
            limit: L,
            burst,
            latencyMs,
            storeRttMs: RTT_MS,
            processes,
            callers,
          })
          const served = sum(r.served.slice(5))
          const refused = sum(r.refused.slice(5))
          const cell = {
            L,
            burst,
            latencyMs,
            processes,
            callers,
            from5: +(served / (SECONDS - 5) / L).toFixed(3),
            steady: +(sum(r.served.slice(-STEADY)) / STEADY / L).toFixed(3),
            share429: +(refused / Math.max(1, served + refused)).toFixed(4),
            // at steady state (the target): the last STEADY s
            steady429: +(
              sum(r.refused.slice(-STEADY)) / Math.max(1, sum(r.served.slice(-STEADY)) + sum(r.refused.slice(-STEADY)))
            ).toFixed(4),
          }
          console.log(JSON.stringify(cell))
          if (!(cell.from5 >= 0.8 && cell.steady >= 0.9 && cell.steady429 <= 0.02)) missed.push(cell)
        }
      }
    }
  }
  console.log(`${missed.length} cells miss the targets:`)
  for (const c of missed) console.log(JSON.stringify(c))
}

main().catch((err) => {
  console.error(err)
  process.exit(1)
})
