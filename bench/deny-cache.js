'use strict'
// The local deny cache on its own: a hot key refused by Redis, then answered "refused" in the
// process (`RedisStore.connect({ localDenyCache: true })`), next to rate-limiter-flexible's
// RateLimiterMemory refusing in memory. Same-tick pattern (1,000 calls per Promise.all) and
// server pattern (a setImmediate per decision, 256 in flight); 3 rounds, decisions/s each.
// SLUICE_REDIS_URL=redis://127.0.0.1:6379 node bench/deny-cache.js
const { RedisStore, BucketLimiter } = require('../lib/entries/index.js')
const { RateLimiterMemory } = require('rate-limiter-flexible')

const perSecond = (n, start) => Math.round(n / (Number(process.hrtime.bigint() - start) / 1e9))

async function sameTick(call, n) {
  const start = process.hrtime.bigint()
  for (let i = 0; i < n; i += 1000) {
    const calls = []
    for (let j = 0; j < 1000; j++) calls.push(call())
    await Promise.all(calls)
  }
  return perSecond(n, start)
}

function serverPattern(call, n, inFlight = 256) {
  const start = process.hrtime.bigint()
  return new Promise((resolve) => {
    let started = 0
    let done = 0
    const one = () => {
      if (started >= n) return
      started++
      setImmediate(() =>
        call().then(() => {
          if (++done === n) resolve(perSecond(n, start))
          else one()
        }),
      )
    }
    for (let k = 0; k < inFlight; k++) one()
  })
}

async function main() {
  const url = process.env.SLUICE_REDIS_URL || 'redis://127.0.0.1:6379'
  const store = await RedisStore.connect({ url, keyPrefix: `denybench${Date.now()}`, localDenyCache: true })
  const hot = new BucketLimiter(store, { name: 'hot', limit: 1, interval: 'hour' })
  await hot.check()
  if ((await hot.check()).allowed) throw new Error('the hot key should be refused')
  const peer = new RateLimiterMemory({ points: 1, duration: 3600 })
  const refused = () => peer.consume('hot').catch(() => {})
  await refused()
  for (let round = 1; round <= 3; round++) {
    const sluiceTick = await sameTick(() => hot.check(), 1_000_000)
    const sluiceServer = await serverPattern(() => hot.check(), 300_000)
    const peerTick = await sameTick(refused, 1_000_000)
    const peerServer = await serverPattern(refused, 300_000)
    console.log(
      `round ${round}: sluice deny cache ${sluiceTick}/s same tick, ${sluiceServer}/s server pattern; ` +
        `rate-limiter-flexible memory ${peerTick}/s same tick, ${peerServer}/s server pattern`,
    )
  }
  console.log(`calls answered in process: ${store.localDenials}, native calls: ${store.batching.batches}`)
  await store.close()
}

main().catch((err) => {
  console.error(err)
  process.exit(1)
})
