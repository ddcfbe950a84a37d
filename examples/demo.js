#!/usr/bin/env node
'use strict'
// Several workers share one DistributedPacer on the embedded store and call a fake API as
// fast as the pacer lets them. Prints the target rate next to the achieved one. Then the same
// workers share a ConcurrentLimiter (at most 3 jobs at once) and a LeakyLimiter, a
// SlidingWindowLimiter with two windows, and Sentry-style quotas; last, an Express app limited
// by sluice/express (two windows, draft-10 headers) answering real HTTP requests.
//   npm run demo            (or: node examples/demo.js [seconds] [qps] [workers])
const {
  MemoryStore,
  DistributedPacer,
  ConcurrentLimiter,
  LeakyLimiter,
  SlidingWindowLimiter,
  QuotaLimiter,
} = require('../lib/entries/index.js')

const seconds = Number(process.argv[2] || 5)
const qps = Number(process.argv[3] || 40)
const workers = Number(process.argv[4] || 8)
const maxBurst = 10

const sleep = (ms) => new Promise((r) => setTimeout(r, ms))

// The "third-party API": remembers when each call arrived and its weight.
const api = { calls: [], call: async (weight) => api.calls.push({ at: Date.now(), weight }) }

async function worker(id, pacer, until) {
  let done = 0
  while (Date.now() < until) {
    const weight = 1 + (done++ % 2) // alternate weights 1 and 2
    const { delayMs } = await pacer.pace(weight)
    await sleep(delayMs)
    await api.call(weight)
  }
  return done
}

async function main() {
  const store = new MemoryStore()
  const pacer = new DistributedPacer(store, { key: 'fake-api', qps, maxBurst })
  console.log(
    `sluice demo: ${workers} workers, one pacer (qps=${qps} weight/s, maxBurst=${maxBurst}), ${seconds} s, embedded store`,
  )
  const start = Date.now()
  const until = start + seconds * 1000
  const report = setInterval(() => {
    const t = Date.now()
    const lastSecond = api.calls.filter((c) => c.at > t - 1000).reduce((s, c) => s + c.weight, 0)
    console.log(`  t=${((t - start) / 1000).toFixed(0)}s  target ${qps}/s  achieved in the last second ${lastSecond}/s`)
  }, 1000)
  const counts = await Promise.all(Array.from({ length: workers }, (_, i) => worker(i, pacer, until)))
  clearInterval(report)
  const calls = api.calls
  const total = calls.reduce((s, c) => s + c.weight, 0)
  // Steady state: everything after the initial burst, over the time it took.
  const steady = calls.slice(maxBurst + 1)
  const steadyWeight = steady.reduce((s, c) => s + c.weight, 0) - steady[0].weight
  const steadyRate = steadyWeight / ((steady[steady.length - 1].at - steady[0].at) / 1000)
  console.log(`calls per worker: ${counts.join(' ')}`)
  console.log(`total weight ${total} in ${((calls[calls.length - 1].at - start) / 1000).toFixed(2)} s`)
  console.log(
    `target ${qps.toFixed(2)}/s, achieved after the burst ${steadyRate.toFixed(2)}/s ` +
      `(${((100 * (steadyRate - qps)) / qps).toFixed(2)}%)`,
  )
  await limiters(store)
  await windows(store)
  await http(store)
  await store.close()
}

// 8 workers, 40 jobs of 20-60 ms, at most 3 at once: the semaphore hands each freed slot to
// the longest waiter; then 12 calls through a leaky limiter of 4 per second.
async function limiters(store) {
  const jobs = new ConcurrentLimiter(store, { name: 'jobs', limit: 3, waitTimeoutMs: 10_000 })
  let running = 0
  let most = 0
  let next = 0
  const worker = async () => {
    while (next < 40) {
      next++
      await jobs.withinLimit(async () => {
        most = Math.max(most, ++running)
        await sleep(20 + Math.random() * 40)
        running--
      })
    }
  }
  await Promise.all(Array.from({ length: workers }, worker))
  const s = await jobs.stats()
  console.log(
    `ConcurrentLimiter(limit 3): 40 jobs by ${workers} workers, at most ${most} at once; ` +
      `${s.immediate} immediate, ${s.waited} waited ${s.waitTimeMs} ms in all`,
  )
  const leaky = new LeakyLimiter(store, { name: 'calls', limit: 4, interval: 'second', waitTimeoutMs: 5000 })
  const start = Date.now()
  const at = await Promise.all(Array.from({ length: 12 }, () => leaky.withinLimit(() => Date.now() - start)))
  console.log(`LeakyLimiter(4 per second): 12 calls ran at ms ${at.sort((a, b) => a - b).join(' ')}`)
}

// 30 calls in 3 s against "5 per 500 ms and 12 per 2 s", all or nothing; then three
// organisations asking for 4 units each under a per-org quota of 5 and a global one of 10.
async function windows(store) {
  const provider = new SlidingWindowLimiter(store, {
    name: 'provider',
    windows: [
      { limit: 5, intervalMs: 500 },
      { limit: 12, intervalMs: 2000 },
    ],
  })
  const admittedAt = []
  const start = Date.now()
  for (let i = 0; i < 30; i++) {
    if ((await provider.check()).allowed) admittedAt.push(Date.now() - start)
    await sleep(100)
  }
  console.log(
    `SlidingWindowLimiter(5 per 500 ms, 12 per 2 s): ${admittedAt.length} of 30 calls admitted, ` +
      `at ms ${admittedAt.join(' ')}`,
  )
  const quotas = new QuotaLimiter(store)
  const perOrg = { windowSeconds: 60, granularitySeconds: 10, limit: 5 }
  const global = { windowSeconds: 60, granularitySeconds: 10, limit: 10, prefixOverride: 'global' }
  const grants = await quotas.checkAndUseQuotas(
    ['org:1', 'org:2', 'org:3'].map((prefix) => ({ prefix, requested: 4, quotas: [perOrg, global] })),
  )
  console.log(
    `QuotaLimiter(5 per org, 10 in all, per minute): ${grants
      .map((g) => `${g.prefix} granted ${g.granted}${g.reachedQuotas.length ? ' (global quota reached)' : ''}`)
      .join(', ')}`,
  )
}

// An Express app on a loopback port, limited to 3 requests per second and 5 per minute per
// client (all or nothing), with the IETF draft-10 headers; 7 requests from one client.
async function http(store) {
  const express = require('express')
  const { rateLimit } = require('../lib/entries/express.js')
  const app = express()
  app.use(
    rateLimit({
      store,
      limits: [
        { limit: 3, windowMs: 1000 },
        { limit: 5, windowMs: 60_000 },
      ],
      algorithm: 'sliding',
      standardHeaders: 'draft-10',
      legacyHeaders: false,
    }),
  )
  app.get('/', (req, res) => res.send(`hello, ${req.rateLimit.remaining} left this second`))
  const server = await new Promise((resolve) => {
    const s = app.listen(0, '127.0.0.1', () => resolve(s))
  })
  const url = `http://127.0.0.1:${server.address().port}/`
  console.log('sluice/express (3 per second and 5 per minute per client, sliding, draft-10 headers):')
  for (let i = 1; i <= 7; i++) {
    const r = await fetch(url)
    const retry = r.headers.get('retry-after')
    console.log(
      `  request ${i}: ${r.status}  RateLimit: ${r.headers.get('ratelimit')}${retry ? `  Retry-After: ${retry}` : ''}`,
    )
    if (i === 4) await sleep(1000) // a new second: the short window has room again, the minute does not
  }
  console.log(`  RateLimit-Policy: ${(await fetch(url)).headers.get('ratelimit-policy')}`)
  server.closeAllConnections()
  await new Promise((resolve) => server.close(resolve))
}

main().catch((err) => {
  console.error(err)
  process.exit(1)
})
