#!/usr/bin/env node
'use strict'
// A deterministic simulation of the sluice/fetch benchmark's adaptive rows (issue 26), to try
// the adaptive rule (src/core/adaptive/mod.rs) without a machine's timing noise: the door
// (pacedFetch, `adaptive: { maxQps: 10 L, startQps: 10 L }`, retries 3) on a MemoryStore driven
// by a ManualClock against a modelled upstream (__tests__/helpers/adaptive-sim.js: a token
// bucket of L per second with a burst of L/20, a fixed one-second window of L, or a bucket
// whose burst is a whole second, 'bucket-burst'). A run of 15 s takes a few seconds and gives
// the same numbers every time. It is not the benchmark: one process, no Redis, no HTTP.
// Prints per shape the served calls per second, the 429s, served / L over the run, the steady
// rate (the last 5 s) and when it settled (the benchmark's two readings: the first second S
// from which every 5 s average of served / L is >= 0.9, and S + 5, the first second at which
// every trailing 5 s average is), with the 429 share after S.
//   node bench/fetch-sim.js    SIM_SECONDS (15), SIM_LIMIT (100), SIM_CALLERS (64),
//                              SIM_LATENCY_MS (5), SIM_SHAPES (bucket,window,bucket-burst),
//                              SIM_START (10: startQps = maxQps = SIM_START x L), SIM_DECREASE,
//                              SIM_INCREASE (the adaptive options; default theirs), SIM_PHASE_MS
//                              (0: where in the window's second the run starts), SIM_TRACE=1
//                              (the key's rate every 100 ms), SIM_PROCS (1: doors standing
//                              for processes, each with SIM_CALLERS callers), SIM_RTT_MS (0:
//                              each store call's round trip), SIM_BURST (the upstream's burst),
//                              SIM_MODEL (a JSON of bench/adaptive-model.js's switches: the
//                              rule ported to JS, to try changes without a build)
const { simulate, settledFrom } = require('../__tests__/helpers/adaptive-sim.js')
const model = require('./adaptive-model.js')
if (process.env.SIM_MODEL) model.install(JSON.parse(process.env.SIM_MODEL))

const SECONDS = Number(process.env.SIM_SECONDS || 15)
const LIMIT = Number(process.env.SIM_LIMIT || 100)
const SHAPES = (process.env.SIM_SHAPES || 'bucket,window,bucket-burst').split(',')
const START = Number(process.env.SIM_START || 10)

async function run(shape) {
  const adaptive = {
    maxQps: LIMIT * START,
    startQps: LIMIT * START,
    ...(process.env.SIM_DECREASE ? { decrease: Number(process.env.SIM_DECREASE) } : {}),
    ...(process.env.SIM_INCREASE ? { increase: Number(process.env.SIM_INCREASE) } : {}),
  }
  model.reset()
  const { served, refused, rates } = await simulate({
    shape,
    seconds: SECONDS,
    limit: LIMIT,
    callers: Number(process.env.SIM_CALLERS || 64),
    latencyMs: Number(process.env.SIM_LATENCY_MS || 5),
    phaseMs: Number(process.env.SIM_PHASE_MS || 0),
    processes: Number(process.env.SIM_PROCS || 1),
    storeRttMs: Number(process.env.SIM_RTT_MS || 0),
    ...(process.env.SIM_BURST ? { burst: Number(process.env.SIM_BURST) } : {}),
    trace: process.env.SIM_TRACE === '1',
    adaptive,
  })
  if (rates.length) console.log(`${shape}: rate every 100 ms: ${rates.join(' ')}`)
  const total = served.reduce((a, b) => a + b, 0)
  const last5 = served.slice(-5).reduce((a, b) => a + b, 0) / 5
  const from = settledFrom(served, LIMIT)
  const after = (arr) => (from === null ? 0 : arr.slice(from).reduce((a, b) => a + b, 0))
  const share = from === null ? null : after(refused) / Math.max(1, after(refused) + after(served))
  console.log(`${shape}: served/429 per second: ${served.map((s, i) => `${s}/${refused[i]}`).join(' ')}`)
  console.log(
    `${shape}: served ${(total / SECONDS / LIMIT).toFixed(3)} L over ${SECONDS} s, last 5 s ${(last5 / LIMIT).toFixed(3)} L, 429s ${refused.reduce((a, b) => a + b, 0)}, settled from ${from ?? '-'} s (trailing ${from === null ? '-' : from + 5} s), 429 share after ${share === null ? '-' : (100 * share).toFixed(2) + ' %'}`,
  )
}

;(async () => {
  for (const shape of SHAPES) await run(shape)
})().catch((err) => {
  console.error(err)
  process.exit(1)
})
