'use strict'
// One process of the SlidingCounterLimiter multi-process test. Config comes as JSON in
// argv[2]; each admission goes back over IPC with the local time it was received and its
// resetAfterMs (which names the calendar window it was charged to). It counts; the test judges.
const { SlidingCounterLimiter } = require('../../lib/entries/index.js')
const { runWorker, sleep, storeOf } = require('./worker-support')

runWorker(async (cfg) => {
  const store = await storeOf(cfg)
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
  return result
})
