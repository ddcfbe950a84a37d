'use strict'
// One process of bench/lease.js: a BucketLimiter on one hot key (limit cfg.limit per second,
// `lease` cfg.lease), cfg.inflight callers each issuing one check() per event-loop turn (a
// setImmediate before each, as a server's requests arrive) for cfg.seconds after a warm-up.
// Sends back over IPC: decisions, admitted, admitted per wall-clock second (Date.now(), the
// machine's clock, which Redis' TIME reads too), latency p50/p99, Node CPU, lease calls. With
// cfg.rate > 0 it offers that many calls a second instead (issued on time, each turn: the sweep).
const { RedisStore, BucketLimiter } = require('../lib/entries/index.js')

const cfg = JSON.parse(process.argv[2])
const turn = () => new Promise((resolve) => setImmediate(resolve))

async function main() {
  const target = cfg.cluster ? { cluster: cfg.cluster.split(',') } : { url: cfg.url }
  const store = await RedisStore.connect({ ...target, keyPrefix: cfg.prefix })
  const limiter = new BucketLimiter(store, { name: 'hot', limit: cfg.limit, interval: 1000, lease: cfg.lease })
  const warmUntil = performance.now() + 300
  while (performance.now() < warmUntil) await limiter.check()
  process.send('warm')
  await new Promise((resolve) => process.once('message', resolve))
  // this process's lease calls (stats() counts every process's, as they flush)
  const calls0 = limiter._leased ? limiter._leased.calls : 0
  const perSecond = {}
  const latencies = []
  let decisions = 0
  let admitted = 0
  const cpu0 = process.cpuUsage()
  const t0 = performance.now()
  const end = t0 + cfg.seconds * 1000
  /** one decision `d` of a call made at `start`: its latency, and its admission's second */
  const record = (start, d) => {
    latencies.push(performance.now() - start)
    decisions++
    if (d.allowed) {
      admitted++
      const s = Math.floor(Date.now() / 1000)
      perSecond[s] = (perSecond[s] || 0) + 1
    }
  }
  async function loop() {
    while (performance.now() < end) {
      await turn()
      const start = performance.now()
      record(start, await limiter.check())
    }
  }
  /** cfg.rate: this process's calls a second, issued on time each turn (none awaited), or 0 */
  async function offered() {
    let issued = 0
    const pending = new Set()
    while (performance.now() < end) {
      const due = Math.floor(((performance.now() - t0) * cfg.rate) / 1000) - issued
      for (let i = 0; i < due; i++) {
        issued++
        const start = performance.now()
        const p = limiter.check().then((d) => {
          record(start, d)
          pending.delete(p)
        })
        pending.add(p)
      }
      await turn()
    }
    await Promise.all(pending)
  }
  if (cfg.rate > 0) await offered()
  else await Promise.all(Array.from({ length: cfg.inflight }, loop))
  const seconds = (performance.now() - t0) / 1000
  const cpu = process.cpuUsage(cpu0)
  latencies.sort((a, b) => a - b)
  await store.close()
  process.send({
    decisions,
    admitted,
    seconds,
    perSecond,
    p50Us: latencies[Math.floor(latencies.length * 0.5)] * 1000,
    p99Us: latencies[Math.floor(latencies.length * 0.99)] * 1000,
    nodeCpuUs: (cpu.user + cpu.system) / decisions,
    leaseCalls: (limiter._leased ? limiter._leased.calls : 0) - calls0,
  })
}

main().catch((err) => {
  console.error(err)
  process.exit(1)
})
