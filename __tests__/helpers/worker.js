'use strict'
// One load-generating process of the multi-process tests. Config comes as JSON in argv[2];
// the result is sent back over IPC. It counts, it does not judge.
const { DistributedPacer } = require('../../lib/entries/index.js')
const { sleep, storeOf } = require('./worker-support')

async function main() {
  const cfg = JSON.parse(process.argv[2])
  const store = await storeOf(cfg)
  const pacer = new DistributedPacer(store, { key: cfg.key, qps: cfg.qps, maxBurst: cfg.maxBurst })
  await sleep(Math.max(0, cfg.startAt - Date.now()))
  const firstSend = Date.now()
  let lastReceive = firstSend
  let admittedWeight = 0
  let admittedCalls = 0
  let refused = 0
  let maxWeight = 0
  const executions = []
  let seed = cfg.seed
  const weight = () => {
    seed = (seed * 1103515245 + 12345) % 2147483648
    return 1 + (seed % cfg.maxRandomWeight)
  }
  async function loop() {
    while (Date.now() < cfg.startAt + cfg.durationMs) {
      if (cfg.mode === 'rateLimit') {
        const w = weight()
        const o = await pacer.rateLimit(w)
        lastReceive = Date.now()
        if (o.delayMs === 0) {
          admittedWeight += w
          admittedCalls++
          maxWeight = Math.max(maxWeight, w)
        } else refused++
      } else {
        const o = await pacer.pace()
        await sleep(o.delayMs)
        executions.push(Date.now())
        lastReceive = Date.now()
      }
    }
  }
  await Promise.all(Array.from({ length: cfg.inflight }, loop))
  await store.close()
  process.send({ firstSend, lastReceive, admittedWeight, admittedCalls, refused, maxWeight, executions })
}

main().catch((err) => {
  process.send({ error: `${err.code}: ${err.message}` })
  process.exitCode = 1
})
