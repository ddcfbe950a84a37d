'use strict'
// The load of bench/callgrind.sh: N decisions over KEYS keys, INFLIGHT in flight (default 256). KIND: pacer
// (pace()), bucket / window / leaky (check()), sliding (check() of 5 s + 1 min), or concurrent (acquire + release, counted as
// one decision).
const sluice = require('../lib/entries/index.js')

const LIMITERS = { bucket: sluice.BucketLimiter, window: sluice.WindowLimiter, leaky: sluice.LeakyLimiter }

async function main() {
  const store = await sluice.RedisStore.connect({
    url: process.env.URL,
    keyPrefix: 'cg',
    commandTimeoutMs: 60000,
    stats: process.env.STATS !== '0',
  })
  const keys = Number(process.env.KEYS)
  const count = Number(process.env.N)
  const kind = process.env.KIND || 'pacer'
  const decide = (key) => {
    if (kind === 'pacer') return new sluice.DistributedPacer(store, { key, qps: 1e6, maxBurst: 1000 }).pace()
    if (kind === 'sliding') {
      const windows = [
        { limit: 1e6, intervalMs: 5_000 },
        { limit: 1e6, intervalMs: 60_000 },
      ]
      return new sluice.SlidingWindowLimiter(store, { name: key, windows }).check()
    }
    if (kind === 'concurrent') {
      return new sluice.ConcurrentLimiter(store, { name: key, limit: 1000 }).withinLimit(() => undefined)
    }
    return new LIMITERS[kind](store, { name: key, limit: 1e9, interval: 60_000 }).check()
  }
  let next = 0
  async function loop() {
    while (next < count) {
      const i = next++
      await decide(`k${(i * 7919) % keys}`)
    }
  }
  await Promise.all(Array.from({ length: Number(process.env.INFLIGHT || 256) }, loop))
  await store.close()
}

main().catch((err) => {
  console.error(err)
  process.exit(1)
})
