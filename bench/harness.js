'use strict'
// The measuring loop every benchmark process runs: a warm-up, then cfg.count decisions with
// cfg.inflight in flight in a closed loop; sends { decisions, seconds, p50Us, p99Us,
// nodeCpuUs, switchesPerDecision, nativeCalls } to the parent over IPC.
// cfg.pattern: 'tick' issues the next decision straight from the previous one's continuation
// (a Promise.all loop: every continuation runs in one microtask drain, so all calls in flight
// leave in the same tick); 'server' issues each decision from its own event-loop turn (after a
// setImmediate), as a server does for each request arriving in its own I/O callback.
const fs = require('node:fs')

/** Context switches of every thread of this process so far (Linux /proc). */
function contextSwitches() {
  let total = 0
  try {
    for (const task of fs.readdirSync('/proc/self/task')) {
      const status = fs.readFileSync(`/proc/self/task/${task}/status`, 'utf8')
      total += Number(/voluntary_ctxt_switches:\s+(\d+)/.exec(status)[1])
      total += Number(/nonvoluntary_ctxt_switches:\s+(\d+)/.exec(status)[1])
    }
  } catch {
    return NaN
  }
  return total
}

const turn = () => new Promise((resolve) => setImmediate(resolve))

/** impl: { decide(key), close(), batching?() -> { batches } } (sluice: its store's counters) */
async function measure(cfg, { decide, close, batching }) {
  const server = cfg.pattern === 'server'
  const keyOf = cfg.keys === 1 ? () => 'hot' : (i) => `k${(i * 7919) % cfg.keys}`
  // warm-up: scripts loaded, connections up, JIT warm
  for (let i = 0; i < Math.min(2000, cfg.count / 10); i++) await decide(keyOf(i))
  // the parent reads Redis' counters, then lets the measured window open
  process.send('warm')
  await new Promise((resolve) => process.once('message', resolve))
  const batches0 = batching ? batching().batches : NaN
  const latencies = new Float64Array(cfg.count)
  let next = 0
  const switches0 = contextSwitches()
  const cpu0 = process.cpuUsage()
  const t0 = performance.now()
  async function loop() {
    for (;;) {
      const i = next++
      if (i >= cfg.count) return
      if (server) await turn()
      const start = performance.now()
      await decide(keyOf(i))
      latencies[i] = performance.now() - start
    }
  }
  await Promise.all(Array.from({ length: cfg.inflight }, loop))
  const seconds = (performance.now() - t0) / 1000
  const cpu = process.cpuUsage(cpu0)
  const switches = contextSwitches() - switches0
  const nativeCalls = batching ? batching().batches - batches0 : NaN
  latencies.sort()
  await close()
  process.send({
    decisions: cfg.count,
    seconds,
    p50Us: latencies[Math.floor(cfg.count * 0.5)] * 1000,
    p99Us: latencies[Math.floor(cfg.count * 0.99)] * 1000,
    nodeCpuUs: (cpu.user + cpu.system) / cfg.count,
    switchesPerDecision: switches / cfg.count,
    nativeCalls,
  })
}

module.exports = { measure }
