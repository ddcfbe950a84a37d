'use strict'
// The approximate sliding window (SlidingCounterLimiter) against the exact one
// (SlidingWindowLimiter), three ways:
//
// 1. accuracy: a seeded, bursty trace replayed on the embedded store under a ManualClock. Each
//    decision of the counter is judged against the truth of its own history (what it admitted
//    in the sliding window ending at that request): "wrongly allowed" = admitted although the
//    exact window would then hold more than the limit; "wrongly refused" = refused although
//    the weight fitted the exact window. Judging each decision against the counter's own
//    history keeps one wrong decision from being counted again in every later one.
// 2. Redis CPU per decision (INFO cpu of the server, over a fixed number of decisions on
//    10,000 keys, 256 in flight), counter vs exact log, same windows and load.
// 3. memory per key (MEMORY USAGE) with the limit reached, at limit 10 and limit 1,000.
//
// Usage: node bench/sliding-counter.js [--accuracy-only | --redis-only]   (Redis parts: SLUICE_REDIS_URL)
// Output: one JSON object; BENCHMARKS.md quotes it.

const { createHash } = require('node:crypto')
const { MemoryStore, RedisStore, ManualClock, SlidingWindowLimiter, SlidingCounterLimiter } = require('..')

const SEED = 0x5eed2025
const KEYS = 2000
const SPAN_MS = 120_000
const WINDOWS = [{ limit: 20, intervalMs: 10_000 }]
// the traffic: SC_TRACE=bursty (default: 15 % of keys over the limit on average, bursts at 3x
// the key's mean) or mild (10 % over, the rest under 40 % of it, bursts at 1.5x)
const PROFILE =
  process.env.SC_TRACE === 'mild' ? { over: 0.1, under: 0.4, burst: 1.5 } : { over: 0.15, under: 0.7, burst: 3 }

// mulberry32: a small seeded PRNG, the same trace on every machine
function prng(seed) {
  let a = seed >>> 0
  return () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

/**
 * The trace: per key a mean rate drawn so that most keys stay under the limit and about a
 * sixth to a fifth go over it (15 % of keys by their mean rate; bursts push more over for a while); arrivals are bursty (a key alternates quiet and burst phases; in a burst
 * it sends at 10x its mean rate). Returns [atMs, keyIndex] sorted by time.
 */
function trace() {
  const rand = prng(SEED)
  const limitPerMs = WINDOWS[0].limit / WINDOWS[0].intervalMs
  const events = []
  for (let k = 0; k < KEYS; k++) {
    const over = rand() < PROFILE.over
    const mean = limitPerMs * (over ? 1.2 + 0.8 * rand() : 0.1 + (PROFILE.under - 0.1) * rand())
    let t = rand() * 1000
    let burst = false
    let phaseEnd = t + 2000 + rand() * 8000
    while (t < SPAN_MS) {
      const rate = burst ? mean * PROFILE.burst : mean * 0.5
      t += -Math.log(1 - rand()) / rate
      if (t >= phaseEnd) {
        burst = !burst
        phaseEnd = t + (burst ? 500 + rand() * 3000 : 2000 + rand() * 8000)
      }
      if (t < SPAN_MS) events.push([Math.floor(t), k])
    }
  }
  events.sort((a, b) => a[0] - b[0] || a[1] - b[1])
  return events
}

async function accuracy() {
  const events = trace()
  const digest = createHash('sha256').update(JSON.stringify(events)).digest('hex').slice(0, 16)
  const clock = new ManualClock(1_700_000_000_000)
  const t0 = clock.now()
  const store = new MemoryStore({ clock, stats: false })
  const counters = []
  const exact = []
  for (let k = 0; k < KEYS; k++) {
    counters.push(new SlidingCounterLimiter(store, { name: `c${k}`, windows: WINDOWS }))
    exact.push(new SlidingWindowLimiter(store, { name: `e${k}`, windows: WINDOWS }))
  }
  const history = Array.from({ length: KEYS }, () => [])
  const { limit, intervalMs } = WINDOWS[0]
  let wronglyAllowed = 0
  let wronglyRefused = 0
  let admittedCounter = 0
  let admittedExact = 0
  // the other common measure: the same request decided differently by an exact log run
  // beside it on the same trace (its own state: differences can carry over)
  let onlyCounter = 0
  let onlyExact = 0
  const exactOver = new Set()
  for (const [at, k] of events) {
    clock.set(t0 + at)
    const d = await counters[k].check()
    const e = await exact[k].check()
    if (e.allowed) admittedExact++
    else exactOver.add(k)
    if (d.allowed && !e.allowed) onlyCounter++
    if (!d.allowed && e.allowed) onlyExact++
    // the truth for this decision: the counter's own admissions in (at - interval, at]
    const h = history[k]
    while (h.length > 0 && h[0] <= at - intervalMs) h.shift()
    const fits = h.length + 1 <= limit
    if (d.allowed) {
      admittedCounter++
      h.push(at)
      if (!fits) wronglyAllowed++
    } else if (fits) {
      wronglyRefused++
    }
  }
  await store.close()
  const pct = (n) => Number(((100 * n) / events.length).toFixed(4))
  return {
    trace: {
      profile: process.env.SC_TRACE === 'mild' ? 'mild' : 'bursty',
      seed: SEED,
      sha256: digest,
      keys: KEYS,
      requests: events.length,
      spanMs: SPAN_MS,
      windows: WINDOWS,
    },
    keysOverLimitPct: Number(((100 * exactOver.size) / KEYS).toFixed(1)),
    admitted: { counter: admittedCounter, exactLog: admittedExact },
    wronglyAllowed: { count: wronglyAllowed, pct: pct(wronglyAllowed) },
    wronglyRefused: { count: wronglyRefused, pct: pct(wronglyRefused) },
    againstExactLogRunBeside: {
      allowedOnlyByCounter: { count: onlyCounter, pct: pct(onlyCounter) },
      refusedOnlyByCounter: { count: onlyExact, pct: pct(onlyExact) },
    },
  }
}

async function redisCpuUs(url) {
  const Redis = require('ioredis')
  const client = new Redis(url)
  return {
    async cpu() {
      const info = await client.info('cpu')
      const get = (k) => Number(new RegExp(`${k}:([0-9.]+)`).exec(info)[1])
      return (get('used_cpu_user') + get('used_cpu_sys')) * 1e6
    },
    async memory(key) {
      return Number(await client.call('MEMORY', 'USAGE', key, 'SAMPLES', '0'))
    },
    close: () => client.quit(),
  }
}

async function onRedis(url) {
  const redis = await redisCpuUs(url)
  const store = await RedisStore.connect({ url, keyPrefix: `bench-sc-${process.pid}`, stats: false })
  const DECISIONS = 200_000
  const IN_FLIGHT = 256
  const result = { decisions: DECISIONS, inFlight: IN_FLIGHT, keys: 10_000, redisCpuUsPerDecision: {} }
  const kinds = { counter: SlidingCounterLimiter, exactLog: SlidingWindowLimiter }
  const windows = [{ limit: 100, intervalMs: 60_000 }]
  for (const round of [0, 1]) {
    for (const [name, Kind] of round === 0 ? Object.entries(kinds) : Object.entries(kinds).reverse()) {
      const limiters = Array.from(
        { length: 10_000 },
        (_, k) => new Kind(store, { name: `${name}${round}-${k}`, windows }),
      )
      let next = 0
      const before = await redis.cpu()
      const worker = async () => {
        while (next < DECISIONS) await limiters[next++ % limiters.length].check()
      }
      await Promise.all(Array.from({ length: IN_FLIGHT }, worker))
      const us = ((await redis.cpu()) - before) / DECISIONS
      ;(result.redisCpuUsPerDecision[name] ??= []).push(Number(us.toFixed(2)))
    }
  }
  const c = result.redisCpuUsPerDecision
  const mean = (xs) => xs.reduce((a, b) => a + b, 0) / xs.length
  result.cpuRatio = Number((mean(c.counter) / mean(c.exactLog)).toFixed(2))
  // memory per key once the limit is reached
  result.memoryBytesPerKey = {}
  for (const limit of [10, 1000]) {
    const w = [{ limit, intervalMs: 60_000 }]
    const counter = new SlidingCounterLimiter(store, { name: `mem-c-${limit}`, windows: w })
    const exact = new SlidingWindowLimiter(store, { name: `mem-e-${limit}`, windows: w })
    for (let i = 0; i < limit; i++) await Promise.all([counter.check(), exact.check()])
    result.memoryBytesPerKey[`limit ${limit}`] = {
      counter: await redis.memory(`${store.keyPrefix}:sliding-counter:{mem-c-${limit}}`),
      exactLog: await redis.memory(`${store.keyPrefix}:sliding:{mem-e-${limit}}`),
    }
  }
  await store.close()
  await redis.close()
  return result
}

async function main() {
  const out = process.argv.includes('--redis-only') ? {} : { accuracy: await accuracy() }
  const url = process.env.SLUICE_REDIS_URL
  if (!process.argv.includes('--accuracy-only') && url) out.redis = await onRedis(url)
  console.log(JSON.stringify(out, null, 2))
}

main().catch((err) => {
  console.error(err)
  process.exit(1)
})
