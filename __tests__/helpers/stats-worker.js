'use strict'
// One process of the statistics test: `count` checks on one bucket, then close() (which
// flushes its statistics). Config as JSON in argv[2]; reports { admitted, refused } over IPC.
const { RedisStore, BucketLimiter } = require('../../lib/entries/index.js')

async function main() {
  const cfg = JSON.parse(process.argv[2])
  const store = await RedisStore.connect(
    cfg.cluster ? { cluster: cfg.cluster, keyPrefix: cfg.prefix } : { url: cfg.url, keyPrefix: cfg.prefix },
  )
  const bucket = new BucketLimiter(store, { name: cfg.name, limit: cfg.limit, interval: 'hour' })
  let admitted = 0
  let refused = 0
  for (let i = 0; i < cfg.count; i += 50) {
    const ds = await Promise.all(Array.from({ length: Math.min(50, cfg.count - i) }, () => bucket.check()))
    for (const d of ds) d.allowed ? admitted++ : refused++
  }
  await store.close()
  process.send({ admitted, refused, dropped: store.statsDropped })
}

main().catch((err) => {
  console.error(err)
  process.exit(1)
})
