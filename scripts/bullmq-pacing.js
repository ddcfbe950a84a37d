#!/usr/bin/env node
'use strict'
// Measures sluice/bullmq's limitProcessor with its defaults: for each limiter kind
// at 10 per second, 200 jobs on 3 worker processes (real BullMQ Workers, concurrency 10
// each). Prints the table in docs/bullmq.md. Needs SLUICE_REDIS_URL (a Redis this may write to; every key
// is under a fresh prefix, and the queue is obliterated afterwards).
//   node scripts/bullmq-pacing.js [--jobs 200] [--limit 10] [--processes 3] [--kinds pacer,bucket,...]
const { runScenario } = require('../__tests__/helpers/bullmq-pacing.js')

function arg(name, fallback) {
  const i = process.argv.indexOf(`--${name}`)
  return i === -1 ? fallback : process.argv[i + 1]
}

async function main() {
  const url = process.env.SLUICE_REDIS_URL || 'redis://127.0.0.1:6379'
  const jobs = Number(arg('jobs', 200))
  const limit = Number(arg('limit', 10))
  const processes = Number(arg('processes', 3))
  const concurrency = Number(arg('concurrency', 10))
  const kinds = arg('kinds', 'pacer,bucket,window,leaky,sliding').split(',')
  const rows = []
  for (const kind of kinds) {
    const r = await runScenario({ url, kind, jobs, limit, processes, concurrency, timeoutMs: 600_000 })
    rows.push(r)
    const note = r.failedReasons.length > 0 ? ` (${r.failedReasons.join('; ')})` : ''
    console.error(
      `${kind}: ${r.completed} done, ${r.failed} failed${note}, ${r.pending} pending, ${r.rate.toFixed(2)} jobs/s ` +
        `over ${(r.spanMs / 1000).toFixed(1)} s, most starts in a calendar second ${r.maxCalendar} (${r.overCalendar} seconds over ${r.limit}), ` +
        `in any 1 s ${r.maxSpan} (after the first second ${r.maxSpanAfterFirst}), ${r.moved} moves (at most ${r.counted} counted for a job), ${r.pids} processes, late after the slot ${r.lateness.join('/')} ms`,
    )
  }
  console.log(
    `| kind | jobs | failed | jobs/s | max starts in a calendar second | max starts in any 1 s | reschedules (most counted for one job) |`,
  )
  console.log('|---|---|---|---|---|---|---|')
  for (const r of rows) {
    console.log(
      `| ${r.kind} | ${r.jobs} | ${r.failed} | ${r.rate.toFixed(2)} | ${r.maxCalendar} | ${r.maxSpan} | ${r.moved} (${r.counted}) |`,
    )
  }
}

main().catch((err) => {
  console.error(err)
  process.exit(1)
})
