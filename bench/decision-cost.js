#!/usr/bin/env node
'use strict'
// Client work per decision, for before/after comparisons that the machine's noise cannot blur:
// run under callgrind (`valgrind --tool=callgrind node --single-threaded bench/decision-cost.js
// <tree> <kind> <store>`), it makes N decisions of one kind through the package at <tree> (a
// checkout with its addon built) and callgrind counts the instructions of the whole process;
// the difference between two N gives the instructions per decision, start-up and JIT warm-up
// cancelled. Kinds: bucket, pacer, sliding, concurrent. Store: memory, or redis (SLUICE_REDIS_URL,
// 256 calls in flight over 10,000 keys, as bench/run.js's server pattern).
// Usage: node bench/decision-cost.js <tree> <kind> <store> <n>
const path = require('node:path')

const [tree, kind = 'bucket', storeKind = 'memory', nArg = '20000'] = process.argv.slice(2)
const N = Number(nArg)
const sluice = require(path.resolve(tree)) // the package's main: any layout

function limiterOf(store, i) {
  const name = `k${i % 10_000}`
  switch (kind) {
    case 'bucket':
      return () => new sluice.BucketLimiter(store, { name, limit: 1e6, interval: 'second' }).check()
    case 'pacer':
      return () => new sluice.DistributedPacer(store, { key: name, qps: 1e6, maxBurst: 1e6 }).rateLimit()
    case 'sliding':
      return () => new sluice.SlidingWindowLimiter(store, { name, windows: [{ limit: 1e6, intervalMs: 1000 }] }).check()
    case 'concurrent':
      return async () => {
        const l = new sluice.ConcurrentLimiter(store, { name, limit: 1e6 })
        const lease = await l.tryAcquire()
        await lease.release()
      }
    default:
      throw new Error(`unknown kind ${kind}`)
  }
}

async function main() {
  const store =
    storeKind === 'memory'
      ? new sluice.MemoryStore()
      : await sluice.RedisStore.connect({ url: process.env.SLUICE_REDIS_URL, statsFlushMs: 600_000 })
  const inFlight = storeKind === 'memory' ? 1 : 256
  let next = 0
  const worker = async () => {
    while (next < N) {
      const i = next++
      await limiterOf(store, i)()
      await new Promise((r) => setImmediate(r)) // a decision per event-loop turn
    }
  }
  await Promise.all(Array.from({ length: inFlight }, worker))
  await store.close()
}

main().catch((e) => {
  console.error(e)
  process.exit(1)
})
