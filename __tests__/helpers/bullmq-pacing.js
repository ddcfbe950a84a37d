'use strict'
// The sluice/bullmq pacing scenario of issue 24: `jobs` jobs on one queue, `processes` worker
// processes (real BullMQ Workers, `concurrency` each), every job through limitProcessor with
// its defaults on one limiter of `kind` (pacer, bucket, window, leaky, sliding) at `limit` per
// `intervalMs`. Counts, from the recorded start of each job: how many failed, the rate, the
// most starts in one calendar second and in any span of `intervalMs`, and the moves back to
// delayed (all of them, and the most counted toward `reschedule` for one job).
// Used by scripts/bullmq-pacing.js (the table in docs/bullmq.md) and __tests__/bullmq.test.ts.
const { fork } = require('node:child_process')
const { join } = require('node:path')
const { randomUUID } = require('node:crypto')
const { Queue } = require('bullmq')

const WORKER = join(__dirname, 'bullmq-pacing-worker.js')
const MARK = 'sluice:reschedule'

/** Most events in any half-open span [t, t + spanMs) of sorted times. */
function mostInSpan(sorted, spanMs) {
  let most = 0
  let lo = 0
  for (let hi = 0; hi < sorted.length; hi++) {
    while (sorted[hi] - sorted[lo] >= spanMs) lo++
    most = Math.max(most, hi - lo + 1)
  }
  return most
}

/** Most events in one calendar span [k * spanMs, (k + 1) * spanMs). */
function mostInCalendar(sorted, spanMs) {
  const per = new Map()
  for (const t of sorted) {
    const k = Math.floor(t / spanMs)
    per.set(k, (per.get(k) || 0) + 1)
  }
  return Math.max(0, ...per.values())
}

/** Calendar spans with more than `limit` events. */
function overCalendar(sorted, spanMs, limit) {
  const per = new Map()
  for (const t of sorted) {
    const k = Math.floor(t / spanMs)
    per.set(k, (per.get(k) || 0) + 1)
  }
  return [...per.values()].filter((n) => n > limit).length
}

async function runScenario(o) {
  const {
    url,
    kind,
    jobs,
    limit,
    intervalMs = 1000,
    maxBurst = 0,
    processes = 3,
    concurrency = 10,
    jobMs = 0,
    options = {},
    timeoutMs = 120_000,
  } = o
  const u = new URL(url)
  const connection = { host: u.hostname, port: Number(u.port) }
  const tag = randomUUID().slice(0, 8)
  const bullPrefix = `bp${tag}`
  const queueName = 'pacing'
  const cfg = {
    url,
    prefix: `sp${tag}`,
    kind,
    name: `${kind}-${tag}`,
    limit,
    intervalMs,
    maxBurst,
    queue: queueName,
    connection,
    bullPrefix,
    concurrency,
    jobMs,
    options,
  }
  const queue = new Queue(queueName, { connection, prefix: bullPrefix })
  const children = Array.from({ length: processes }, () => fork(WORKER, [JSON.stringify(cfg)]))
  const message = (c) =>
    new Promise((resolve, reject) => {
      c.once('message', resolve)
      c.once('exit', (code) => reject(new Error(`worker exited with ${code}`)))
    })
  try {
    await Promise.all(children.map(message))
    await queue.addBulk(
      Array.from({ length: jobs }, (_, n) => ({ name: 'job', data: { n }, opts: { jobId: `j${n}` } })),
    )
    const added = Date.now()
    for (;;) {
      const c = await queue.getJobCounts('completed', 'failed')
      if (c.completed + c.failed >= jobs) break
      if (Date.now() - added > timeoutMs) break
      await new Promise((r) => setTimeout(r, 100))
    }
    const elapsedMs = Date.now() - added
    const done = await queue.getJobs(['completed'], 0, -1)
    const failedJobs = await queue.getJobs(['failed'], 0, -1)
    const client = await queue.getBackend().client
    let counted = 0
    const late = []
    for (const job of [...done, ...failedJobs]) {
      const raw = await client.hget(queue.toKey(job.id), MARK)
      if (!raw) continue
      const mark = JSON.parse(raw)
      counted = Math.max(counted, mark.c || 0)
      if (job.returnvalue && mark.at) late.push(job.returnvalue.startedAt - mark.at)
    }
    late.sort((a, b) => a - b)
    const moved = (await Promise.all(children.map((c) => (c.send('stop'), message(c))))).reduce(
      (n, m) => n + m.moved,
      0,
    )
    const starts = done.map((j) => j.returnvalue.startedAt).sort((a, b) => a - b)
    const spanMs = starts.length > 1 ? starts[starts.length - 1] - starts[0] : 0
    return {
      kind,
      jobs,
      limit,
      intervalMs,
      completed: done.length,
      failed: failedJobs.length,
      failedReasons: [...new Set(failedJobs.map((j) => j.failedReason))].slice(0, 3),
      pending: jobs - done.length - failedJobs.length,
      elapsedMs,
      spanMs,
      // starts per second over the span from the first start to the last
      rate: spanMs > 0 ? ((starts.length - 1) * 1000) / spanMs : 0,
      maxCalendar: mostInCalendar(starts, intervalMs),
      // calendar seconds (intervals) with more starts than the limit
      overCalendar: overCalendar(starts, intervalMs, limit),
      maxSpan: mostInSpan(starts, intervalMs),
      // the same after the first interval (a leaky limiter's burst, a window already open)
      maxSpanAfterFirst: mostInSpan(
        starts.filter((t) => t >= starts[0] + intervalMs),
        intervalMs,
      ),
      moved,
      counted,
      // how late a rescheduled job started after its slot, ms: median, 99th percentile, most
      lateness: late.length
        ? [late[late.length >> 1], late[Math.floor(late.length * 0.99)], late[late.length - 1]]
        : [],
      pids: new Set(done.map((j) => j.returnvalue.pid)).size,
      starts,
    }
  } finally {
    for (const c of children) if (c.exitCode === null) c.kill()
    await queue.obliterate({ force: true }).catch(() => {})
    await queue.close()
  }
}

module.exports = { runScenario, mostInSpan, mostInCalendar }
