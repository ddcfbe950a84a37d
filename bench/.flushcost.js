const s = require('/work/main/lib/index.js')
const Redis = require('/work/main/node_modules/ioredis')
async function cpu(c) { const i = await c.info('cpu'); const g = (n) => Number(new RegExp(n + ':([\\d.]+)').exec(i)[1]); return (g('used_cpu_user') + g('used_cpu_sys')) * 1e6 }
;(async () => {
  const c = new Redis(process.env.SLUICE_REDIS_URL)
  const store = await s.RedisStore.connect({ url: process.env.SLUICE_REDIS_URL, keyPrefix: 'fc' + Date.now(), statsFlushMs: 600000 })
  for (let round = 0; round < 4; round++) {
    const N = 10000
    await Promise.all(Array.from({ length: N }, (_, i) => new s.BucketLimiter(store, { name: 'k' + i, limit: 1e6, interval: 60000 }).check()))
    const r0 = await cpu(c); const n0 = process.cpuUsage(); const t0 = performance.now()
    await store._flushStats()
    const t = performance.now() - t0; const n = process.cpuUsage(n0); const r = (await cpu(c)) - r0
    console.log(`round ${round}: flush of ${N} limiters: ${t.toFixed(1)} ms wall, Node CPU ${((n.user + n.system) / 1000).toFixed(1)} ms, Redis CPU ${(r / 1000).toFixed(1)} ms`)
  }
  await store.close(); c.disconnect()
})()
