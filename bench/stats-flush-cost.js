#!/usr/bin/env node
'use strict'
// What one statistics flush of a RedisStore costs with 10,000 names used since the last one:
// with the registry record of each (every flush that finds a name used writes its last use:
// issue 38, "last use within the flush period") and without it (what a flush wrote between
// two of a name's once-a-minute refreshes before), alternated, 12 rounds (the first 2 dropped),
// medians of the flush's wall time, this process's CPU and Redis's (INFO cpu).
// Usage: node bench/stats-flush-cost.js redis://127.0.0.1:6379
const { RedisStore, BucketLimiter } = require('../lib/entries/index.js')
const { StatsWriter } = require('../lib/store/stats-writer.js')
const Redis = require('ioredis')
const url = process.argv[2]
async function cpu(raw) {
  const t = await raw.info('cpu')
  const u = /used_cpu_user:([\d.]+)/.exec(t)[1],
    s = /used_cpu_sys:([\d.]+)/.exec(t)[1]
  return Number(u) + Number(s)
}
async function main() {
  const raw = new Redis(url)
  const store = await RedisStore.connect({ url, keyPrefix: `fc${process.pid}`, statsFlushMs: 600_000 })
  const limiters = Array.from(
    { length: 10000 },
    (_, i) => new BucketLimiter(store, { name: `k${i}`, limit: 1e9, interval: 'hour' }),
  )
  const orig = StatsWriter.prototype._run
  const res = { with: [], without: [] }
  for (let round = 0; round < 12; round++) {
    const mode = round % 2 ? 'without' : 'with'
    StatsWriter.prototype._run =
      mode === 'with'
        ? orig
        : function (ops) {
            const i = ops.indexOf('registry')
            return orig.call(this, i < 0 ? ops : ops.slice(0, i))
          }
    await Promise.all(limiters.map((l) => l.check()))
    const c0 = await cpu(raw)
    const t0 = performance.now()
    const n0 = process.cpuUsage()
    await store._flushStats()
    const wall = performance.now() - t0
    const n = process.cpuUsage(n0)
    const c = (await cpu(raw)) - c0
    if (round >= 2) res[mode].push([wall, (n.user + n.system) / 1000, c * 1000])
  }
  const med = (xs, k) => xs.map((x) => x[k]).sort((a, b) => a - b)[Math.floor(xs.length / 2)]
  for (const m of ['with', 'without'])
    console.log(
      m,
      'registry: flush wall',
      med(res[m], 0).toFixed(1),
      'ms; Node CPU',
      med(res[m], 1).toFixed(1),
      'ms; Redis CPU',
      med(res[m], 2).toFixed(1),
      'ms',
    )
  StatsWriter.prototype._run = orig
  await store.close()
  raw.disconnect()
}

if (require.main === module) main()
