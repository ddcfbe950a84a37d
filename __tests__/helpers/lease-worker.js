'use strict'
// One process of the lease tests (__tests__/lease.test.ts): a leasing BucketLimiter on a
// RedisStore on its own ManualClock set to the test's time (`cfg.at`), so both processes decide
// in the same window with no real time passing. It admits `cfg.take`, reports what it holds,
// and waits to be killed (SIGKILL: nothing goes back).
const { RedisStore, BucketLimiter, ManualClock } = require('../../lib/entries/index.js')

async function main() {
  const cfg = JSON.parse(process.argv[2])
  const clock = new ManualClock(cfg.at)
  const target = cfg.cluster ? { cluster: cfg.cluster } : { url: cfg.url }
  const store = await RedisStore.connect({ ...target, keyPrefix: cfg.prefix, clock })
  const limiter = new BucketLimiter(store, {
    name: cfg.name,
    limit: cfg.limit,
    interval: cfg.intervalMs,
    lease: cfg.lease,
  })
  let admitted = 0
  for (let i = 0; i < cfg.take; i++) if ((await limiter.check()).allowed) admitted++
  process.send({ admitted, held: (await limiter.stats()).leased })
}

main().catch((err) => {
  console.error(err)
  process.exit(1)
})
