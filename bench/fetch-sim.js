#!/usr/bin/env node
'use strict'
// A deterministic simulation of the sluice/fetch benchmark's adaptive rows (issue 26): the same
// door (pacedFetch, `adaptive: { maxQps: 10 L, startQps: 10 L }`, retries 3) on a MemoryStore
// driven by a ManualClock, `callers` callers in one process, and an upstream modelled in the
// process (a token bucket of L per second with a burst of L/20, or a fixed one-second window
// of L) that answers after `latency` ms, 429 with Retry-After (whole seconds, at least 1) when
// over. Time moves 1 ms per step, so a run of 15 s takes a few seconds and gives the same
// numbers every time: a tool to try the adaptive rule (src/core/adaptive.rs) without a
// machine's timing noise. It is not the benchmark: one process, no Redis, no HTTP.
// Prints per shape the served calls per second, the 429s, served / L over the run and the
// steady rate (the last 5 s).
//   node bench/fetch-sim.js    SIM_SECONDS (15), SIM_LIMIT (100), SIM_CALLERS (64),
//                              SIM_LATENCY_MS (5), SIM_SHAPES (bucket,window), SIM_TRACE=1
//                              (the key's rate every 100 ms)
const { MemoryStore, ManualClock } = require('../lib/index.js')
const { pacedFetch } = require('../lib/fetch.js')

const SECONDS = Number(process.env.SIM_SECONDS || 15)
const LIMIT = Number(process.env.SIM_LIMIT || 100)
const CALLERS = Number(process.env.SIM_CALLERS || 64)
const LATENCY_MS = Number(process.env.SIM_LATENCY_MS || 5)
const SHAPES = (process.env.SIM_SHAPES || 'bucket,window').split(',')
const T0 = 1_800_000_000_000
const TRACE = process.env.SIM_TRACE === '1'

/** The upstream's decision at `t` (ms): ok, and the Retry-After it would send when not. */
function upstream(shape, limit) {
  const burst = Math.max(1, Math.round(limit / 20))
  let tokens = burst
  let last = T0
  let windowStart = T0
  let used = 0
  return (t) => {
    if (shape === 'window') {
      const ws = T0 + Math.floor((t - T0) / 1000) * 1000
      if (ws !== windowStart) [windowStart, used] = [ws, 0]
      const ok = used < limit
      if (ok) used++
      return { ok, retryMs: windowStart + 1000 - t }
    }
    tokens = Math.min(burst, tokens + ((t - last) * limit) / 1000)
    last = t
    const ok = tokens >= 1
    if (ok) tokens -= 1
    return { ok, retryMs: ((1 - tokens) * 1000) / limit }
  }
}

const turn = () => new Promise((resolve) => setImmediate(resolve))

async function run(shape) {
  const clock = new ManualClock(T0)
  const store = new MemoryStore({ clock, stats: false })
  const decide = upstream(shape, LIMIT)
  const served = new Array(SECONDS).fill(0)
  const refused = new Array(SECONDS).fill(0)
  const second = () => Math.floor((clock.now() - T0) / 1000)
  // the upstream: answers after LATENCY_MS on the clock
  const send = () =>
    new Promise((resolve) => {
      const d = decide(clock.now())
      const s = second()
      if (s < SECONDS) (d.ok ? served : refused)[s]++
      const headers = d.ok ? {} : { 'retry-after': String(Math.max(1, Math.ceil(d.retryMs / 1000))) }
      clock._schedule(LATENCY_MS, () =>
        resolve(new Response(d.ok ? 'ok' : 'slow down', { status: d.ok ? 200 : 429, headers })),
      )
    })
  const f = pacedFetch({
    store,
    fetch: send,
    retry: { maxRetries: 3 },
    adaptive: { maxQps: LIMIT * 10, startQps: LIMIT * 10 },
  })
  let stop = false
  const callers = Array.from({ length: CALLERS }, async () => {
    while (!stop) {
      try {
        await f('http://upstream.test/api')
      } catch {
        // a call that could not be sent (none expected: no maxWaitMs)
      }
    }
  })
  const rates = []
  for (let ms = 0; ms < SECONDS * 1000; ms++) {
    clock.advance(1)
    for (let i = 0; i < 4; i++) await turn()
    if (TRACE && ms % 100 === 99) rates.push(Math.round((await f.stats())[0]?.qps ?? 0))
  }
  if (TRACE) console.log(`${shape}: rate every 100 ms: ${rates.join(' ')}`)
  stop = true
  clock.advance(60_000)
  for (let i = 0; i < 8; i++) await turn()
  void callers
  const total = served.reduce((a, b) => a + b, 0)
  const last5 = served.slice(-5).reduce((a, b) => a + b, 0) / 5
  console.log(`${shape}: served/429 per second: ${served.map((s, i) => `${s}/${refused[i]}`).join(' ')}`)
  console.log(
    `${shape}: served ${(total / SECONDS / LIMIT).toFixed(3)} L over ${SECONDS} s, last 5 s ${(last5 / LIMIT).toFixed(3)} L, 429s ${refused.reduce((a, b) => a + b, 0)}`,
  )
  await store.close()
}

;(async () => {
  for (const shape of SHAPES) await run(shape)
})().catch((err) => {
  console.error(err)
  process.exit(1)
})
