'use strict'
// The load of bench/callgrind.sh: N pace() decisions over KEYS keys, 256 in flight.
const { RedisStore, DistributedPacer } = require('../lib/index.js')

async function main() {
  const store = await RedisStore.connect({ url: process.env.URL, keyPrefix: 'cg', commandTimeoutMs: 60000 })
  const keys = Number(process.env.KEYS)
  const count = Number(process.env.N)
  let next = 0
  async function loop() {
    while (next < count) {
      const i = next++
      await new DistributedPacer(store, { key: `k${(i * 7919) % keys}`, qps: 1e6, maxBurst: 1000 }).pace()
    }
  }
  await Promise.all(Array.from({ length: 256 }, loop))
  await store.close()
}

main().catch((err) => {
  console.error(err)
  process.exit(1)
})
