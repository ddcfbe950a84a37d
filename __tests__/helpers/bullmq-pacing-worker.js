'use strict'
// One worker process of the sluice/bullmq pacing scenario (__tests__/helpers/bullmq-pacing.js):
// a real BullMQ Worker whose processor is limitProcessor with the defaults, on one limiter of
// `kind` at `limit` per `intervalMs`, shared with the other processes through Redis. Each job
// returns when it started. Config comes as JSON in argv[2]; on 'stop' over IPC it closes and
// reports how many times its jobs were moved back to delayed.
const { Worker } = require('bullmq')
const {
  RedisStore,
  DistributedPacer,
  BucketLimiter,
  WindowLimiter,
  LeakyLimiter,
  SlidingWindowLimiter,
} = require('../../lib/entries/index.js')
const { limitProcessor } = require('../../lib/entries/bullmq.js')

function makeLimiter(store, cfg) {
  const { kind, name, limit, intervalMs, maxBurst } = cfg
  switch (kind) {
    case 'pacer':
      return new DistributedPacer(store, { key: name, qps: (limit * 1000) / intervalMs, maxBurst })
    case 'bucket':
      return new BucketLimiter(store, { name, limit, interval: intervalMs })
    case 'window':
      return new WindowLimiter(store, { name, limit, interval: intervalMs })
    case 'leaky':
      return new LeakyLimiter(store, { name, limit, interval: intervalMs })
    case 'sliding':
      return new SlidingWindowLimiter(store, { name, windows: [{ limit, intervalMs }] })
    default:
      throw new Error(`unknown kind ${kind}`)
  }
}

async function main() {
  const cfg = JSON.parse(process.argv[2])
  const store = await RedisStore.connect({ url: cfg.url, keyPrefix: cfg.prefix })
  const limiter = makeLimiter(store, cfg)
  const limited = limitProcessor(
    async () => {
      const startedAt = Date.now()
      if (cfg.jobMs > 0) await new Promise((r) => setTimeout(r, cfg.jobMs))
      return { startedAt, pid: process.pid }
    },
    { limiter: () => limiter, ...cfg.options },
  )
  let moved = 0
  const processor = async (job, token) => {
    try {
      return await limited(job, token)
    } catch (err) {
      if (err && err.name === 'DelayedError') moved++
      throw err
    }
  }
  const worker = new Worker(cfg.queue, processor, {
    connection: cfg.connection,
    prefix: cfg.bullPrefix,
    concurrency: cfg.concurrency,
  })
  await worker.waitUntilReady()
  process.on('message', async (m) => {
    if (m === 'stop') {
      await worker.close()
      await store.close()
      process.send({ moved })
      process.exit(0)
    }
  })
  process.send({ ready: true })
}

main().catch((err) => {
  console.error(err)
  process.exit(1)
})
