'use strict'
// One process of the SluiceThrottlerStorage fleet test (doors-nestjs.test.ts): `concurrent`
// increments of one key at once, from the common start; how many were not blocked goes back
// over IPC and the test counts.
const { SluiceThrottlerStorage } = require('../../lib/entries/nestjs.js')
const { runWorker, sleep, storeOf } = require('./worker-support')

runWorker(async (cfg) => {
  const store = await storeOf(cfg)
  const storage = new SluiceThrottlerStorage(store)
  await sleep(Math.max(0, cfg.startAt - Date.now()))
  const records = await Promise.all(
    Array.from({ length: cfg.concurrent }, () => storage.increment('one-client', 60_000, cfg.limit, 60_000, 'default')),
  )
  await store.close()
  return { admitted: records.filter((r) => !r.isBlocked).length, hits: records.map((r) => r.totalHits) }
})
