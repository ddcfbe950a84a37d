'use strict'
// The measuring loop every benchmark process runs: a warm-up, then cfg.count decisions with
// cfg.inflight in flight in a closed loop; sends { decisions, seconds, p50Us, p99Us,
// nodeCpuUs, switchesPerDecision } to the parent over IPC.
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

async function measure(cfg, { decide, close }) {
  const keyOf = cfg.keys === 1 ? () => 'hot' : (i) => `k${(i * 7919) % cfg.keys}`
  // warm-up: scripts loaded, connections up, JIT warm
  for (let i = 0; i < Math.min(2000, cfg.count / 10); i++) await decide(keyOf(i))
  const latencies = new Float64Array(cfg.count)
  let next = 0
  const switches0 = contextSwitches()
  const cpu0 = process.cpuUsage()
  const t0 = performance.now()
  async function loop() {
    for (;;) {
      const i = next++
      if (i >= cfg.count) return
      const start = performance.now()
      await decide(keyOf(i))
      latencies[i] = performance.now() - start
    }
  }
  await Promise.all(Array.from({ length: cfg.inflight }, loop))
  const seconds = (performance.now() - t0) / 1000
  const cpu = process.cpuUsage(cpu0)
  const switches = contextSwitches() - switches0
  latencies.sort()
  await close()
  process.send({
    decisions: cfg.count,
    seconds,
    p50Us: latencies[Math.floor(cfg.count * 0.5)] * 1000,
    p99Us: latencies[Math.floor(cfg.count * 0.99)] * 1000,
    nodeCpuUs: (cpu.user + cpu.system) / cfg.count,
    switchesPerDecision: switches / cfg.count,
  })
}

module.exports = { measure }
