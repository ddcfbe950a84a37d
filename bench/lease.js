#!/usr/bin/env node
'use strict'
// Lease mode against exact mode (DESIGN §11, issue 41) on one hot key: P processes x F callers,
// each caller issuing one check() per event-loop turn (bench/lease-worker.js), a BucketLimiter
// of L per second, statistics on. For each shape (LEASE_SHAPES, processes x in flight) and mode
// (exact, lease with its default adaptive size), alternated round by round: first with a limit
// nobody reaches (1e9 a second), then with the limit at half of what that mode made in that
// round (refusals exercised). Reported: decisions/s (every process), lease / exact, admitted/s,
// the most admitted in any one wall-clock second over the limit (counted across processes; the
// first and last partial seconds left out), Redis CPU per decision (INFO cpu around the measured
// window), Node CPU per decision, p50/p99 (the median process's), lease calls per decision.
//   node bench/lease.js     (its own redis-server on a free port, or SLUICE_REDIS_URL)
//   LEASE_ROUNDS=3  LEASE_SECONDS=4  LEASE_SHAPES=4x64,4x1
const { fork } = require('node:child_process')
const os = require('node:os')
const path = require('node:path')
const Redis = require('ioredis')
const { startRedis, redisCpuUs } = require('./local-redis')

const ROUNDS = Number(process.env.LEASE_ROUNDS || 3)
const SECONDS = Number(process.env.LEASE_SECONDS || 4)
const SHAPES = (process.env.LEASE_SHAPES || '4x64,4x1').split(',').map((s) => s.split('x').map(Number))
const MODES = ['exact', 'lease']
const NEVER = 1e9

/** P worker processes started together on one limit; their reports and Redis CPU per decision. */
async function fleet(client, url, procs, inflight, lease, limit, prefix, more = {}) {
  const cfg = { url, prefix, inflight, lease, limit, seconds: SECONDS, ...more }
  const children = Array.from({ length: procs }, () =>
    fork(path.join(__dirname, 'lease-worker.js'), [JSON.stringify(cfg)]),
  )
  const warm = children.map((c) => new Promise((resolve) => c.once('message', resolve)))
  const done = children.map(
    (c) =>
      new Promise((resolve, reject) => {
        c.on('message', (m) => typeof m === 'object' && resolve(m))
        c.once('exit', (code) => code !== 0 && reject(new Error(`worker exited with ${code}`)))
      }),
  )
  await Promise.all(warm)
  const cpu0 = client ? await redisCpuUs(client) : NaN
  children.forEach((c) => c.send('go'))
  const reports = await Promise.all(done)
  const cpu = client ? (await redisCpuUs(client)) - cpu0 : NaN
  const decisions = reports.reduce((a, r) => a + r.decisions, 0)
  const seconds = Math.max(...reports.map((r) => r.seconds))
  const perSecond = {}
  for (const r of reports) for (const [s, n] of Object.entries(r.perSecond)) perSecond[s] = (perSecond[s] || 0) + n
  // whole seconds only: the first and the last are partial
  const whole = Object.keys(perSecond)
    .map(Number)
    .sort((a, b) => a - b)
    .slice(1, -1)
  const mid = (f) => [...reports.map(f)].sort((a, b) => a - b)[Math.floor(reports.length / 2)]
  return {
    rps: decisions / seconds,
    admittedRps: reports.reduce((a, r) => a + r.admitted, 0) / seconds,
    maxSecond: whole.length > 0 ? Math.max(...whole.map((s) => perSecond[s])) : NaN,
    minSecond: whole.length > 0 ? Math.min(...whole.map((s) => perSecond[s])) : NaN,
    redisCpuUs: cpu / decisions,
    nodeCpuUs: mid((r) => r.nodeCpuUs),
    p50Us: mid((r) => r.p50Us),
    p99Us: mid((r) => r.p99Us),
    callsPerDecision: reports.reduce((a, r) => a + r.leaseCalls, 0) / decisions,
    perSecond: whole.map((s) => perSecond[s]),
  }
}

const fmt = (n, d = 0) => n.toLocaleString('en-US', { maximumFractionDigits: d, minimumFractionDigits: d })
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]

async function main() {
  const redis = await startRedis()
  const client = new Redis(redis.url)
  const results = {}
  const loads = []
  try {
    for (let round = 0; round < ROUNDS; round++) {
      for (const [procs, inflight] of SHAPES) {
        const order = round % 2 === 0 ? MODES : [...MODES].reverse()
        for (const mode of order) {
          for (const half of [false, true]) {
            const never = results[`${procs}x${inflight}|${mode}|never`]
            const limit = half ? Math.max(1, Math.round(never[never.length - 1].rps / 2)) : NEVER
            loads.push(os.loadavg()[0])
            const prefix = `lease${round}${mode}${half ? 'h' : 'n'}${procs}x${inflight}`
            const r = await fleet(client, redis.url, procs, inflight, mode === 'lease', limit, prefix)
            r.limit = limit
            ;(results[`${procs}x${inflight}|${mode}|${half ? 'half' : 'never'}`] ??= []).push(r)
            process.stderr.write(
              `round ${round + 1} ${procs}x${inflight} ${mode} ${half ? `limit ${fmt(limit)}/s` : 'never reached'}: ${fmt(r.rps)} decisions/s, ${fmt(r.admittedRps)} admitted/s, max second ${fmt(r.maxSecond)}, Redis ${fmt(r.redisCpuUs, 3)} µs/decision\n`,
            )
          }
        }
      }
    }
  } finally {
    client.disconnect()
    redis.stop()
  }
  const lines = [
    `One hot key, a BucketLimiter of L per second, one check() per event-loop turn per caller, ${SECONDS} s per run, ${ROUNDS} rounds alternated, ${os.cpus().length} cores, Node ${process.version}, load average ${fmt(Math.min(...loads), 2)}-${fmt(Math.max(...loads), 2)} before the runs`,
    '',
    '| processes x in flight | limit | mode | decisions/s (median, min-max) | lease / exact | admitted/s | most in one second / L (fewest) | Redis CPU µs/decision | Node CPU µs/decision | p50 µs | p99 µs | lease calls/decision |',
    '| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |',
  ]
  for (const [procs, inflight] of SHAPES) {
    for (const which of ['never', 'half']) {
      const exact = median(results[`${procs}x${inflight}|exact|${which}`].map((r) => r.rps))
      for (const mode of MODES) {
        const runs = results[`${procs}x${inflight}|${mode}|${which}`]
        const mid = (f) => median(runs.map(f))
        const rps = mid((r) => r.rps)
        const limitText = which === 'never' ? 'never reached' : `half of the offer (${fmt(mid((r) => r.limit))}/s)`
        const ratio =
          which === 'never'
            ? '—'
            : `${fmt(Math.max(...runs.map((r) => r.maxSecond / r.limit)), 3)} (${fmt(Math.min(...runs.map((r) => r.minSecond / r.limit)), 3)})`
        lines.push(
          `| ${procs} x ${inflight} | ${limitText} | ${mode} | ${fmt(rps)} (${fmt(Math.min(...runs.map((r) => r.rps)))}-${fmt(Math.max(...runs.map((r) => r.rps)))}) | ${mode === 'lease' ? `${(rps / exact).toFixed(2)}x` : '1x'} | ${fmt(mid((r) => r.admittedRps))} | ${ratio} | ${fmt(
            mid((r) => r.redisCpuUs),
            3,
          )} | ${fmt(
            mid((r) => r.nodeCpuUs),
            1,
          )} | ${fmt(
            mid((r) => r.p50Us),
            1,
          )} | ${fmt(mid((r) => r.p99Us))} | ${
            mode === 'lease'
              ? fmt(
                  mid((r) => r.callsPerDecision),
                  5,
                )
              : '—'
          } |`,
        )
      }
    }
  }
  console.log(lines.join('\n'))
}

if (require.main === module) {
  main().catch((err) => {
    console.error(err)
    process.exit(1)
  })
}

module.exports = { fleet }
