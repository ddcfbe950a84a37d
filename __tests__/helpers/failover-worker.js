'use strict'
// One process of the failover tests: checks WindowLimiters (names spread over the slots, each
// limit per a long window) as fast as it can until told to stop, recording every decision:
// admitted, refused, or a store code, and how long it took. argv[2] = JSON { cluster or
// sentinel, prefix, names, limit, commandTimeoutMs }.
const { RedisStore, WindowLimiter } = require('../../lib/entries/index.js')

async function main() {
  const cfg = JSON.parse(process.argv[2])
  const store = await RedisStore.connect({
    ...(cfg.sentinel ? { sentinel: cfg.sentinel } : { cluster: cfg.cluster }),
    keyPrefix: cfg.prefix,
    commandTimeoutMs: cfg.commandTimeoutMs,
    connectTimeoutMs: 5000,
    statsFlushMs: 600_000,
  })
  const limiters = cfg.names.map((name) => new WindowLimiter(store, { name, limit: cfg.limit, interval: 3_600_000 }))
  const admitted = Object.fromEntries(cfg.names.map((n) => [n, 0]))
  // when each name last got an answer from Redis (admitted or refused), ms since the epoch
  const answeredAt = Object.fromEntries(cfg.names.map((n) => [n, 0]))
  // decisions that failed with a code, per name
  const failed = Object.fromEntries(cfg.names.map((n) => [n, 0]))
  const codes = {}
  const messages = {}
  // [name, when] of the first failures, ms since the epoch
  const failures = []
  let decisions = 0
  let slowest = 0
  let stopping = false
  process.on('message', (m) => {
    if (m === 'stop') stopping = true
  })
  process.send('ready')
  const loop = async (k) => {
    for (let i = k; !stopping; i++) {
      const l = limiters[i % limiters.length]
      const t0 = performance.now()
      try {
        const d = await l.check()
        if (d.allowed) admitted[l.name]++
        answeredAt[l.name] = Date.now()
      } catch (err) {
        codes[err.code || 'uncoded'] = (codes[err.code || 'uncoded'] || 0) + 1
        failed[l.name]++
        if (failures.length < 5000) failures.push([l.name, Date.now()])
        // how many calls failed with each message (a message per code and text)
        const text = `${err.code || 'uncoded'}: ${String(err.message).slice(0, 120)}`
        messages[text] = (messages[text] || 0) + 1
      }
      decisions++
      slowest = Math.max(slowest, performance.now() - t0)
      // a few ms between calls: about 1,000 decisions/s per process
      await new Promise((r) => setTimeout(r, 4))
    }
  }
  await Promise.all([0, 1, 2, 3].map(loop))
  const direct = store.batching.direct
  await store.close()
  process.send({ admitted, answeredAt, failed, failures, codes, messages, decisions, slowest, direct })
}

main().catch((err) => {
  process.send({ crashed: String(err && err.stack) })
})
