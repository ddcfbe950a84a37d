'use strict'
// One run of the jobs suite (bench/jobs.js), in its own process. argv[2] = JSON { impl, url,
// prefix, jobs, concurrency }: fills a fresh queue with `jobs` empty jobs, tells the parent
// 'filled', waits for 'go', then runs one BullMQ Worker (concurrency `concurrency`) until every
// job completed, and sends { jobsPerS, cpuUsPerJob, perNativeCall }.
//   impl 'none': the bare processor; 'sluice': limitProcessor with a BucketLimiter that is
//   never reached (1e9 per minute); 'bullmq': BullMQ's own `limiter` worker option, same limit.
const { Queue, Worker } = require('bullmq')

const cfg = JSON.parse(process.argv[2])

async function main() {
  const u = new URL(cfg.url)
  const connection = { host: u.hostname, port: Number(u.port) }
  const name = `jobs-${cfg.impl}`
  const queue = new Queue(name, { connection, prefix: cfg.prefix })
  for (let i = 0; i < cfg.jobs; i += 1000) {
    const n = Math.min(1000, cfg.jobs - i)
    await queue.addBulk(Array.from({ length: n }, (_, k) => ({ name: 'j', data: { i: i + k } })))
  }
  process.send('filled')
  await new Promise((resolve) => process.once('message', resolve))
  const work = async () => {}
  let processor = work
  let store = null
  const options = { connection, prefix: cfg.prefix, concurrency: cfg.concurrency, autorun: false }
  if (cfg.impl === 'sluice') {
    const { RedisStore, BucketLimiter } = require('../lib/entries/index.js')
    const { limitProcessor } = require('../lib/entries/bullmq.js')
    store = await RedisStore.connect({ url: cfg.url, keyPrefix: cfg.prefix })
    const bucket = new BucketLimiter(store, { name: 'jobs', limit: 1e9, interval: 'minute' })
    processor = limitProcessor(work, { limiter: () => bucket })
  } else if (cfg.impl === 'bullmq') {
    options.limiter = { max: 1e9, duration: 60_000 }
  }
  const worker = new Worker(name, processor, options)
  let done = 0
  const finished = new Promise((resolve) => {
    worker.on('completed', () => {
      if (++done === cfg.jobs) resolve()
    })
  })
  const cpu0 = process.cpuUsage()
  const t0 = process.hrtime.bigint()
  worker.run()
  await finished
  const seconds = Number(process.hrtime.bigint() - t0) / 1e9
  const cpu = process.cpuUsage(cpu0)
  const batching = store ? store.batching : null
  process.send({
    jobsPerS: cfg.jobs / seconds,
    cpuUsPerJob: (cpu.user + cpu.system) / cfg.jobs,
    perNativeCall: batching ? batching.calls / batching.batches : NaN,
  })
  await worker.close()
  await queue.obliterate({ force: true })
  await queue.close()
  if (store) await store.close()
}

main().catch((err) => {
  console.error(err)
  process.exit(1)
})
