'use strict'
// The jobs suite of `npm run bench` (BENCH_SUITES=jobs): a BullMQ worker pool draining a queue
// of empty jobs, its processor wrapped by sluice/bullmq's limitProcessor with a bucket limit
// that is never reached, next to the bare processor and to BullMQ's own `limiter` option (the
// same limit), same Redis, same run. Each run in a fresh process (bench/jobs-worker.js): the
// queue is filled first, then the worker drains it while jobs/s, the worker's CPU and Redis CPU
// (INFO cpu) are measured. BENCH_JOBS (20000) jobs per run, BENCH_JOBS_CONCURRENCY (64).
const { fork } = require('node:child_process')
const path = require('node:path')

const JOBS = Number(process.env.BENCH_JOBS || 20000)
const CONCURRENCY = Number(process.env.BENCH_JOBS_CONCURRENCY || 64)
const IMPLS = [
  { id: 'none', label: 'no limiter' },
  { id: 'bullmq', label: "BullMQ's `limiter` option" },
  { id: 'sluice', label: 'sluice `limitProcessor` (BucketLimiter)' },
]

async function redisCpuUs(client) {
  const info = await client.info('cpu')
  const get = (name) => Number(new RegExp(`${name}:([\\d.]+)`).exec(info)[1])
  return (get('used_cpu_user') + get('used_cpu_sys')) * 1e6
}

function runOne(client, url, impl, round) {
  return new Promise((resolve, reject) => {
    const child = fork(path.join(__dirname, 'jobs-worker.js'), [
      JSON.stringify({ impl, url, prefix: `benchjobs${round}${impl}`, jobs: JOBS, concurrency: CONCURRENCY }),
    ])
    let cpu0 = 0
    child.on('message', async (m) => {
      if (m === 'filled') {
        cpu0 = await redisCpuUs(client)
        child.send('go')
        return
      }
      const redisUs = (await redisCpuUs(client)) - cpu0
      resolve({ ...m, redisCpuUsPerJob: redisUs / JOBS })
    })
    child.once('exit', (code) => code !== 0 && reject(new Error(`jobs ${impl} exited with ${code}`)))
  })
}

async function runJobsRound(client, url, round, results, fmt) {
  for (const impl of IMPLS) {
    const r = await runOne(client, url, impl.id, round)
    ;(results[`jobs|${impl.id}`] ??= []).push(r)
    process.stderr.write(`round ${round + 1} jobs ${impl.id}: ${fmt(r.jobsPerS)} jobs/s\n`)
  }
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]

function jobsTables(results, fmt) {
  const rows = IMPLS.map((impl) => {
    const runs = results[`jobs|${impl.id}`] || []
    if (!runs.length) return null
    const mid = (f) => median(runs.map(f))
    return {
      impl,
      jobsPerS: mid((r) => r.jobsPerS),
      min: Math.min(...runs.map((r) => r.jobsPerS)),
      max: Math.max(...runs.map((r) => r.jobsPerS)),
      cpu: mid((r) => r.cpuUsPerJob),
      redis: mid((r) => r.redisCpuUsPerJob),
      perNativeCall: mid((r) => r.perNativeCall),
    }
  }).filter(Boolean)
  if (!rows.length) return []
  const none = rows.find((r) => r.impl.id === 'none')
  const lines = [
    `### Jobs: a BullMQ 6 worker (concurrency ${CONCURRENCY}) draining ${fmt(JOBS)} empty jobs, every job admitted (a limit of 1e9 per minute)`,
    '',
    '| worker | jobs/s (median, min-max) | vs no limiter | worker CPU µs/job | Redis CPU µs/job | jobs/native call |',
    '| --- | --- | --- | --- | --- | --- |',
  ]
  for (const r of rows) {
    const ratio = none ? `${(r.jobsPerS / none.jobsPerS).toFixed(2)}x` : '-'
    const per = r.perNativeCall == null || Number.isNaN(r.perNativeCall) ? '-' : fmt(r.perNativeCall, 1)
    lines.push(
      `| ${r.impl.label} | ${fmt(r.jobsPerS)} (${fmt(r.min)}-${fmt(r.max)}) | ${ratio} | ${fmt(r.cpu, 1)} | ${fmt(r.redis, 1)} | ${per} |`,
    )
  }
  return lines
}

module.exports = { runJobsRound, jobsTables }
