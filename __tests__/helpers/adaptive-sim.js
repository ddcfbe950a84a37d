'use strict'
// A deterministic simulation of sluice/fetch's adaptive rate against an upstream that says
// nothing but 429 + Retry-After (issue 26): the real door (pacedFetch with `adaptive`, retries
// 3) on a MemoryStore driven by a ManualClock, `callers` callers in one process, and an
// upstream modelled in the process that answers after `latencyMs`: a token bucket of `limit`
// per second with a burst of limit/20 ('bucket') or of a whole second ('bucket-burst'), or a
// fixed one-second window of `limit` that the run enters `phaseMs` into ('window'), or a fixed
// 60 s window of 60 x `limit` ('window60'). Over it:
// 429 with Retry-After in whole seconds, at least 1. Time moves 1 ms per step, so the same
// settings give the same numbers every time. Used by __tests__/fetch-adaptive.test.ts and
// bench/fetch-sim.js. It is not the benchmark (bench/fetch.js): one process, no Redis, no HTTP.

const { MemoryStore, ManualClock } = require('../../lib/entries/index.js')
const { pacedFetch } = require('../../lib/entries/fetch.js')
const { Spares } = require('../../lib/store/spares.js')

const T0 = 1_800_000_000_000

/** The upstream's decision at `t` (ms): ok, and the Retry-After it would send when not. */
function upstream(shape, limit, phaseMs, burstGiven) {
  const burst = burstGiven ?? (shape === 'bucket-burst' ? limit : Math.max(1, Math.round(limit / 20)))
  let tokens = burst
  let last = T0
  let windowStart = T0 - phaseMs
  let used = 0
  return (t) => {
    if (shape === 'window' || shape === 'window60') {
      // a fixed window of `limit` per second: 1 s long, or 60 s long with 60 x limit
      const span = shape === 'window' ? 1000 : 60_000
      const quota = (limit * span) / 1000
      const ws = T0 - phaseMs + Math.floor((t - T0 + phaseMs) / span) * span
      if (ws !== windowStart) [windowStart, used] = [ws, 0]
      const ok = used < quota
      if (ok) used++
      return { ok, retryMs: windowStart + span - t }
    }
    tokens = Math.min(burst, tokens + ((t - last) * limit) / 1000)
    last = t
    const ok = tokens >= 1
    if (ok) tokens -= 1
    return { ok, retryMs: ((1 - tokens) * 1000) / limit }
  }
}

/** The first second S from which every 5 s average of served / `limit` is >= 0.9, or null. */
function settledFrom(served, limit) {
  let at = null
  for (let t = 0; t + 5 <= served.length; t++) {
    const avg = served.slice(t, t + 5).reduce((a, b) => a + b, 0) / 5 / limit
    if (avg >= 0.9) at ??= t
    else at = null
  }
  return at
}

/**
 * One process's view of the shared store: its own spare slots, and each store call taking
 * `rttMs` (half on the way there, half back), as a Redis round trip does.
 */
function processStore(store, clock, rttMs) {
  const view = Object.create(store)
  view._spares = new Spares()
  if (rttMs > 0) {
    const later = (ms) => new Promise((resolve) => clock._schedule(ms, resolve))
    view._call = async (kind, c) => {
      await later(rttMs / 2)
      const out = await store._call(kind, c)
      await later(rttMs / 2)
      return out
    }
  }
  return view
}

const turn = () => new Promise((resolve) => setImmediate(resolve))

/**
 * Runs one shape for `seconds`; resolves `{ served, refused, rates }`: per second what the
 * upstream served and refused, and (with `trace`) the key's rate every 100 ms.
 */
async function simulate(o) {
  const { shape, seconds = 15, limit = 100, callers = 64, latencyMs = 5, phaseMs = 0, trace = false } = o
  const { processes = 1, storeRttMs = 0 } = o
  const adaptive = o.adaptive ?? { maxQps: limit * 10, startQps: limit * 10 }
  const clock = new ManualClock(T0)
  const store = new MemoryStore({ clock, stats: false })
  const decide = upstream(shape, limit, phaseMs, o.burst)
  const served = new Array(seconds).fill(0)
  const refused = new Array(seconds).fill(0)
  const second = () => Math.floor((clock.now() - T0) / 1000)
  const send = () =>
    new Promise((resolve) => {
      const d = decide(clock.now())
      const s = second()
      if (s < seconds) (d.ok ? served : refused)[s]++
      if (o.onSend) o.onSend(clock.now() - T0, d.ok)
      const headers = d.ok ? {} : { 'retry-after': String(Math.max(1, Math.ceil(d.retryMs / 1000))) }
      clock._schedule(latencyMs, () =>
        resolve(new Response(d.ok ? 'ok' : 'slow down', { status: d.ok ? 200 : 429, headers })),
      )
    })
  const doors = Array.from({ length: processes }, () =>
    pacedFetch({ store: processStore(store, clock, storeRttMs), fetch: send, retry: { maxRetries: 3 }, adaptive }),
  )
  const f = doors[0]
  let stop = false
  let failed = 0
  const running = doors.flatMap((door) =>
    Array.from({ length: callers }, async () => {
      while (!stop) {
        try {
          await door('http://upstream.test/api')
        } catch {
          if (!stop) failed++ // refused by maxWaitMs (its default is finite): not sent (the last
          // jump of the clock, past the run, refuses the callers still waiting their turn)
        }
      }
    }),
  )
  const rates = []
  for (let ms = 0; ms < seconds * 1000; ms++) {
    clock.advance(1)
    for (let i = 0; i < 4; i++) await turn()
    if (trace && ms % 100 === 99) rates.push(Math.round((await f.stats())[0]?.qps ?? 0))
  }
  stop = true
  clock.advance(60_000)
  for (let i = 0; i < 8; i++) await turn()
  void running
  await store.close()
  return { served, refused, rates, failed }
}

module.exports = { simulate, settledFrom }
