'use strict'
// One process of the paced-workers test: a real BullMQ Worker whose jobs go through
// limitProcessor on one shared DistributedPacer (waiting for their slot). Config comes as JSON
// in argv[2]. Each job returns when it started; on 'block' over IPC this process blocks the
// pacer and reports when the block was recorded.
const { Worker } = require('bullmq')
const { RedisStore, DistributedPacer } = require('../../lib/entries/index.js')
const { limitProcessor } = require('../../lib/entries/bullmq.js')

async function main() {
  const cfg = JSON.parse(process.argv[2])
  const store = await RedisStore.connect({ url: cfg.url, keyPrefix: cfg.prefix })
  const pacer = new DistributedPacer(store, { key: cfg.key, qps: cfg.qps, maxBurst: 0 })
  const processor = limitProcessor(async (job) => ({ startedAt: Date.now(), pid: process.pid, n: job.data.n }), {
    limiter: () => pacer,
    maxWaitMs: 30_000,
  })
  const worker = new Worker(cfg.queue, processor, {
    connection: cfg.connection,
    prefix: cfg.bullPrefix,
    concurrency: cfg.concurrency,
  })
  await worker.waitUntilReady()
  process.on('message', async (m) => {
    if (m === 'block') {
      const before = Date.now()
      await pacer.block(cfg.blockMs)
      process.send({ blocked: before, recorded: Date.now() })
    } else if (m === 'stop') {
      await worker.close()
      await store.close()
      process.exit(0)
    }
  })
  process.send({ ready: true })
}

main().catch((err) => {
  console.error(err)
  process.exit(1)
})
