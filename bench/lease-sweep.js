#!/usr/bin/env node
'use strict'
// Lease mode swept over the offered load with real processes (issue 41): 4 processes on one hot
// key, a BucketLimiter of L per second with `lease: true`, each process offering its share of a
// total rate (calls issued on time, each event-loop turn: bench/lease-worker.js), from 100 a
// second to what the machine can offer (64 callers per process, each a call per turn: the rate
// reached is reported). Per whole wall-clock second, counted across the processes: admitted over
// L (at most 1), and the false refusals (what an exact limiter admits, min(offered, L), less
// what was admitted, over it). On a standalone Redis (its own, or SLUICE_REDIS_URL) and on the
// cluster when SLUICE_REDIS_CLUSTER names its nodes (scripts/redis-servers.js starts both).
//   LEASE_SECONDS=4  LEASE_LIMIT=10000  LEASE_RATES=100,1000,10000,100000,max  node bench/lease-sweep.js
const os = require('node:os')
const Redis = require('ioredis')
const { startRedis } = require('./local-redis')
const { fleet } = require('./lease')

const L = Number(process.env.LEASE_LIMIT || 10_000)
const RATES = (process.env.LEASE_RATES || '100,1000,10000,100000,max').split(',')
const PROCS = 4
const fmt = (n, d = 0) => n.toLocaleString('en-US', { maximumFractionDigits: d, minimumFractionDigits: d })

async function main() {
  const redis = await startRedis()
  const topologies = [['Redis', { url: redis.url }]]
  if (process.env.SLUICE_REDIS_CLUSTER) topologies.push(['cluster', { cluster: process.env.SLUICE_REDIS_CLUSTER }])
  const client = new Redis(redis.url)
  const lines = [
    `One hot key, a BucketLimiter of ${fmt(L)} a second with lease: true, ${PROCS} processes, ${process.env.LEASE_SECONDS || 4} s a run, ${os.cpus().length} cores, load average ${fmt(os.loadavg()[0], 2)} at the start`,
    '',
    '| store | offered / s | reached / s | admitted per whole second / L (min-max) | false refusals per second (max) | lease calls / decision |',
    '| --- | --- | --- | --- | --- | --- |',
  ]
  try {
    for (const [name, target] of topologies) {
      for (const rate of RATES) {
        const max = rate === 'max'
        const more = { ...target, rate: max ? 0 : Number(rate) / PROCS }
        const r = await fleet(
          name === 'Redis' ? client : null,
          redis.url,
          PROCS,
          64,
          true,
          L,
          `sweep${name}${rate}`,
          more,
        )
        const offered = max ? r.rps : Number(rate)
        const exact = Math.min(offered, L)
        const ratios = r.perSecond.map((n) => n / L)
        const misses = r.perSecond.map((n) => Math.max(0, exact - n) / exact)
        lines.push(
          `| ${name} | ${max ? 'all it can' : fmt(Number(rate))} | ${fmt(r.rps)} | ${fmt(Math.min(...ratios), 3)}-${fmt(Math.max(...ratios), 3)} | ${fmt(100 * Math.max(...misses), 1)} % | ${fmt(r.callsPerDecision, 5)} |`,
        )
        process.stderr.write(`${lines[lines.length - 1]}\n`)
      }
    }
  } finally {
    client.disconnect()
    redis.stop()
  }
  console.log(lines.join('\n'))
}

main().catch((err) => {
  console.error(err)
  process.exit(1)
})
