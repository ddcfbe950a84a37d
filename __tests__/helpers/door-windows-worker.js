'use strict'
// One process of the multi-window door test (door-windows-multiprocess.test.ts): a door of
// several windows on a shared Redis, hammered by `inflight` loops on one client key with
// seeded weights 1..3 until the start time plus `durationMs`. Each admitted weight goes back
// over IPC; the test counts.
const { Door } = require('../../lib/doors/http/door.js')
const { doorConfig } = require('../../lib/doors/http/options.js')

const { runWorker, sleep, storeOf } = require('./worker-support')

runWorker(async (cfg) => {
  const store = await storeOf(cfg)
  const door = new Door(
    doorConfig({
      store,
      identifier: 'shared-door',
      algorithm: cfg.algorithm,
      limits: cfg.limits,
      keyGenerator: (req) => req.key,
      cost: (req) => req.cost,
    }),
  )
  let seed = cfg.seed >>> 0
  const weight = () => {
    seed = (Math.imul(seed, 1103515245) + 12345) >>> 0
    return 1 + ((seed >>> 16) % 3)
  }
  await sleep(Math.max(0, cfg.startAt - Date.now()))
  const result = { admitted: [], refused: 0 }
  const loop = async () => {
    while (Date.now() < cfg.startAt + cfg.durationMs) {
      const cost = weight()
      const o = await door.decide({ key: 'client', cost }, {})
      if (o.allowed) result.admitted.push(cost)
      else result.refused++
    }
  }
  await Promise.all(Array.from({ length: cfg.inflight }, loop))
  // what each window holds now: a decision of weight 0 charges nothing and reads every window
  const o = await door.decide({ key: 'client', cost: 0 }, {})
  result.used = o.windows.map((w) => w.limit - w.remaining)
  await store.close()
  return result
})
