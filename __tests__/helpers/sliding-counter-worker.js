'use strict'
// One process of the SlidingCounterLimiter multi-process test. Config comes as JSON in
// argv[2]; each admission goes back over IPC with the local time it was received and its
// resetAfterMs (which names the calendar window it was charged to). It counts; the test judges.
const { RedisStore, SlidingCounterLimiter } = require('../../lib/index.js')

const sleep = (ms) => new Promise((r) => setTimeout(r, ms))

async function main() {
  const cfg = JSON.parse(process.argv[2])
  const store = await RedisStore.connect(
    cfg.cluster ? { cluster: cfg.cluster, keyPrefix: cfg.prefix } : { url: cfg.url, keyPrefix: cfg.prefix },
  )
  const limiter = new SlidingCounterLimiter(store, {
    name: cfg.name,
    windows: [{ limit: cfg.limit, intervalMs: cfg.intervalMs }],
  })
  await sleep(Math.max(0, cfg.startAt - Date.now()))
  const result = { admitted: [], refused: 0 }
  const loop = async () => {
    while (Date.now() < cfg.startAt + cfg.durationMs) {
      const d = await limiter.check()
      if (d.allowed) result.admitted.push({ at: Date.now(), resetAfterMs: d.resetAfterMs })
      else result.refused++
    }
  }
  await Promise.all(Array.from({ length: cfg.inflight }, loop))
  await store.close()
  process.send(result, () => process.exit(0))
}

main().catch((err) => {
  console.error(err)
  process.exit(1)
})
