#!/usr/bin/env node
'use strict'
// Issue 41's measurement: decisions issued one per event-loop turn (a setImmediate before each,
// as a server's requests arrive), 1 and 256 in flight, over 10,000 keys and on one hot key, a
// limiter object cached per key (as a peer's limiter is kept), default options (statistics on),
// every decision admitted (limits nobody reaches). Side by side in the same run, the order
// alternated round by round: ioredis + a one-line EVALSHA (the floor of a JS client),
// rate-limiter-flexible on ioredis, and sluice's bucket, window, leaky (cached, and the bucket
// also made per decision, as the older limiter suite makes it) and pacer (cached, rateLimit()).
// Each run in a fresh process (bench/limiter-scenario.js); Redis CPU from INFO cpu around its
// measured window; client CPU the process's (all threads); the load average before each run.
//   node bench/one-in-flight.js            (its own redis-server on a free port, or SLUICE_REDIS_URL)
//   ONE_ROUNDS=3  ONE_SHAPES=10000x1,10000x256,1x1,1x256  ONE_IMPLS=ioredis-evalsha,...
// Prints a markdown table per shape (medians over the rounds, min-max of decisions/s).
const { fork } = require('node:child_process')
const os = require('node:os')
const path = require('node:path')
const Redis = require('ioredis')

const ROUNDS = Number(process.env.ONE_ROUNDS || 3)
const SHAPES = (process.env.ONE_SHAPES || '10000x1,10000x256,1x1,1x256').split(',').map((s) => s.split('x').map(Number))
const IMPLS = (
  process.env.ONE_IMPLS ||
  'ioredis-evalsha,rate-limiter-flexible,sluice-bucket-cached,sluice-window-cached,sluice-leaky-cached,sluice-pacer-cached,sluice-bucket'
).split(',')
/** Decisions per run: 20,000 one at a time (the issue's), 100,000 at 256 in flight. */
const countOf = (inflight) => (inflight === 1 ? 20_000 : 100_000)

const { startRedis, redisCpuUs } = require('./local-redis')

/** One run in a fresh process: its figures, Redis CPU over its measured window. */
async function runOne(client, cfg) {
  let cpu0 = 0
  const result = await new Promise((resolve, reject) => {
    const child = fork(path.join(__dirname, 'limiter-scenario.js'), [JSON.stringify(cfg)])
    child.on('message', async (msg) => {
      if (msg !== 'warm') return resolve(msg)
      cpu0 = await redisCpuUs(client)
      child.send('go')
    })
    child.once('exit', (code) => code !== 0 && reject(new Error(`${cfg.impl} exited with ${code}`)))
  })
  const cpu = (await redisCpuUs(client)) - cpu0
  return { ...result, rps: result.decisions / result.seconds, redisCpuUs: cpu / result.decisions }
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]
const fmt = (n, d = 0) => n.toLocaleString('en-US', { maximumFractionDigits: d, minimumFractionDigits: d })

async function main() {
  const redis = await startRedis()
  const client = new Redis(redis.url)
  const results = {}
  const loads = []
  try {
    for (let round = 0; round < ROUNDS; round++) {
      for (const [keys, inflight] of SHAPES) {
        const order = round % 2 === 0 ? IMPLS : [...IMPLS].reverse()
        for (const impl of order) {
          loads.push(os.loadavg()[0])
          const cfg = {
            impl,
            keys,
            inflight,
            pattern: 'server',
            count: countOf(inflight),
            limit: 1e9,
            url: redis.url,
            prefix: `one${round}${impl}${keys}x${inflight}`,
          }
          const r = await runOne(client, cfg)
          ;(results[`${keys}x${inflight}|${impl}`] ??= []).push(r)
          process.stderr.write(`round ${round + 1} ${keys}x${inflight} ${impl}: ${fmt(r.rps)} decisions/s\n`)
        }
      }
    }
  } finally {
    client.disconnect()
    redis.stop()
  }
  const lines = [
    `One decision per event-loop turn, a limiter cached per key, ${ROUNDS} rounds alternated, ${os.cpus().length} cores, Node ${process.version}, load average ${fmt(Math.min(...loads), 2)}-${fmt(Math.max(...loads), 2)} before the runs`,
    '',
  ]
  for (const [keys, inflight] of SHAPES) {
    lines.push(
      `#### ${fmt(keys)} ${keys === 1 ? 'key' : 'keys'}, ${inflight} in flight (${fmt(countOf(inflight))} decisions a run)`,
      '',
      '| implementation | decisions/s (median, min-max) | vs rate-limiter-flexible | p50 µs | p99 µs | Redis CPU µs/decision | client CPU µs/decision |',
      '| --- | --- | --- | --- | --- | --- | --- |',
    )
    const peer = results[`${keys}x${inflight}|rate-limiter-flexible`]
    const peerRps = peer ? median(peer.map((r) => r.rps)) : NaN
    for (const impl of IMPLS) {
      const runs = results[`${keys}x${inflight}|${impl}`]
      const mid = (f) => median(runs.map(f))
      const rps = mid((r) => r.rps)
      lines.push(
        `| ${impl} | ${fmt(rps)} (${fmt(Math.min(...runs.map((r) => r.rps)))}-${fmt(Math.max(...runs.map((r) => r.rps)))}) | ${(rps / peerRps).toFixed(2)}x | ${fmt(mid((r) => r.p50Us))} | ${fmt(mid((r) => r.p99Us))} | ${fmt(
          mid((r) => r.redisCpuUs),
          1,
        )} | ${fmt(
          mid((r) => r.nodeCpuUs),
          1,
        )} |`,
      )
    }
    lines.push('')
  }
  console.log(lines.join('\n'))
}

main().catch((err) => {
  console.error(err)
  process.exit(1)
})
