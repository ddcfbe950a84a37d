'use strict'
// What one statistics flush costs: N limiters (BENCH_FLUSH_LIMITERS, 10,000), one decision each,
// then one flush, timed: wall, this process's CPU (JS and the native addon's threads) and
// Redis' CPU (INFO). Several rounds: the first also writes every limiter's registry record.
//   SLUICE_REDIS_URL=redis://127.0.0.1:6379 node bench/stats-flush.js
const Redis = require('ioredis')
const sluice = require('../lib/entries/index.js')

const N = Number(process.env.BENCH_FLUSH_LIMITERS || 10000)

async function redisCpuUs(client) {
  const info = await client.info('cpu')
  const get = (name) => Number(new RegExp(`${name}:([\\d.]+)`).exec(info)[1])
  return (get('used_cpu_user') + get('used_cpu_sys')) * 1e6
}

async function main() {
  const url = process.env.SLUICE_REDIS_URL
  if (!url) throw new Error('set SLUICE_REDIS_URL')
  const client = new Redis(url)
  const store = await sluice.RedisStore.connect({ url, keyPrefix: `flush${Date.now()}`, statsFlushMs: 600_000 })
  const limiters = Array.from(
    { length: N },
    (_, i) => new sluice.BucketLimiter(store, { name: `k${i}`, limit: 1e6, interval: 60_000 }),
  )
  for (let round = 0; round < 6; round++) {
    await Promise.all(limiters.map((l) => l.check()))
    const redis0 = await redisCpuUs(client)
    const cpu0 = process.cpuUsage()
    const t0 = performance.now()
    await store._flushStats()
    const ms = performance.now() - t0
    const cpu = process.cpuUsage(cpu0)
    const redis = (await redisCpuUs(client)) - redis0
    console.log(
      `round ${round}: flush of ${N} limiters: ${ms.toFixed(1)} ms wall, ` +
        `process CPU ${((cpu.user + cpu.system) / 1000).toFixed(1)} ms, Redis CPU ${(redis / 1000).toFixed(1)} ms`,
    )
  }
  await store.close()
  client.disconnect()
}

main().catch((err) => {
  console.error(err)
  process.exit(1)
})
