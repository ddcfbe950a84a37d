'use strict'
// The fair suite of `npm run bench` (BENCH_SUITES=fair):
// 1. Enqueue cost: Queue.add next to FairQueues.add (exact and approximate FairTenant) on the
//    same Redis, in two call shapes: one add awaited after another (a request handler's
//    latency), and the server pattern (one add per event-loop turn, BENCH_FAIR_INFLIGHT in
//    flight). BENCH_FAIR_JOBS (10000) jobs per run, each run in a fresh queue.
// 2. The exact/approximate trade-off (round 1 only): one tenant enqueues BENCH_FAIR_DAY
//    (1,000,000) jobs spread over a day (a ManualClock), rules of 1 min, 1 h and 1 day;
//    memory of the tenant's record (MEMORY USAGE) and how far the approximate counts are from
//    the exact ones at every job.
const { Queue } = require('bullmq')

const JOBS = Number(process.env.BENCH_FAIR_JOBS || 10000)
const INFLIGHT = Number(process.env.BENCH_FAIR_INFLIGHT || 64)
const DAY_JOBS = Number(process.env.BENCH_FAIR_DAY || 1_000_000)
const IMPLS = [
  { id: 'queue', label: 'BullMQ `Queue.add`' },
  { id: 'exact', label: "sluice `FairQueues.add` (mode 'exact')" },
  { id: 'approximate', label: "sluice `FairQueues.add` (mode 'approximate')" },
]
const RULES = [
  { queue: 'slow', threshold: 1000, perMs: 60_000 },
  { queue: 'slower', threshold: 10_000, perMs: 3_600_000 },
]

async function redisCpuUs(client) {
  const info = await client.info('cpu')
  const get = (name) => Number(new RegExp(`${name}:([\\d.]+)`).exec(info)[1])
  return (get('used_cpu_user') + get('used_cpu_sys')) * 1e6
}

async function enqueueRun(client, url, impl, shape, round) {
  const { RedisStore, FairTenant } = require('../lib/entries/index.js')
  const { FairQueues } = require('../lib/entries/bullmq.js')
  const u = new URL(url)
  const connection = { host: u.hostname, port: Number(u.port) }
  const prefix = `benchfair${round}${impl}${shape}`
  const queues = { fast: new Queue('fast', { connection, prefix }) }
  for (const r of RULES) queues[r.queue] = new Queue(r.queue, { connection, prefix })
  await Promise.all(Object.values(queues).map((q) => q.waitUntilReady()))
  let store = null
  let add
  if (impl === 'queue') {
    add = (i) => queues.fast.add('j', { i })
  } else {
    store = await RedisStore.connect({ url, keyPrefix: prefix })
    const fair = new FairTenant(store, { name: 'enqueue', rules: RULES, mode: impl })
    const fq = new FairQueues(fair, { queues, defaultQueue: 'fast' })
    add = (i) => fq.add(`tenant${i % 100}`, 'j', { i })
  }
  // warm up (connections, scripts)
  for (let i = 0; i < 200; i++) await add(-1 - i)
  const cpu0 = await redisCpuUs(client)
  const node0 = process.cpuUsage()
  const start = process.hrtime.bigint()
  if (shape === 'serial') {
    for (let i = 0; i < JOBS; i++) await add(i)
  } else {
    await new Promise((resolve, reject) => {
      let issued = 0
      let done = 0
      let inflight = 0
      const pump = () => {
        while (inflight < INFLIGHT && issued < JOBS) {
          inflight++
          const i = issued++
          setImmediate(() =>
            add(i).then(() => {
              inflight--
              if (++done === JOBS) resolve()
              else pump()
            }, reject),
          )
        }
      }
      pump()
    })
  }
  const seconds = Number(process.hrtime.bigint() - start) / 1e9
  const node = process.cpuUsage(node0)
  const redisUs = (await redisCpuUs(client)) - cpu0
  for (const q of Object.values(queues)) {
    await q.obliterate({ force: true })
    await q.close()
  }
  if (store) {
    await client.eval("for _, k in ipairs(redis.call('KEYS', ARGV[1])) do redis.call('DEL', k) end", 0, `${prefix}:*`)
    await store.close()
  }
  return {
    jobsPerS: JOBS / seconds,
    usPerJob: (seconds * 1e6) / JOBS,
    nodeCpuUsPerJob: (node.user + node.system) / JOBS,
    redisCpuUsPerJob: redisUs / JOBS,
  }
}

async function tradeOff(client, url) {
  const { RedisStore, FairTenant, ManualClock } = require('../lib/entries/index.js')
  const T0 = 1_800_000_000_000
  const clock = new ManualClock(T0)
  const prefix = `benchfairday${process.pid}`
  const store = await RedisStore.connect({ url, keyPrefix: prefix, clock })
  const rules = [
    { queue: 'a', threshold: 1e9, perMs: 60_000 },
    { queue: 'b', threshold: 1e9, perMs: 3_600_000 },
    { queue: 'c', threshold: 1e9, perMs: 86_400_000 },
  ]
  const exact = new FairTenant(store, { name: 'day', rules, mode: 'exact' })
  const approx = new FairTenant(store, { name: 'day', rules, mode: 'approximate' })
  const err = rules.map(() => ({ maxAbs: 0, maxRel: 0, sumRel: 0, n: 0 }))
  const stepMs = 86_400_000 / DAY_JOBS
  const BATCH = 50
  const start = Date.now()
  for (let i = 0; i < DAY_JOBS; i += BATCH) {
    clock.set(T0 + Math.floor(i * stepMs))
    const ids = Array.from({ length: Math.min(BATCH, DAY_JOBS - i) }, (_, k) => `job-${i + k}`)
    const [e, a] = await Promise.all([
      Promise.all(ids.map((id) => exact.route('big', id, 'q'))),
      Promise.all(ids.map((id) => approx.route('big', id, 'q'))),
    ])
    for (let k = 0; k < ids.length; k++) {
      rules.forEach((_, r) => {
        const x = e[k].counts[r]
        const y = a[k].counts[r]
        const s = err[r]
        s.maxAbs = Math.max(s.maxAbs, Math.abs(x - y))
        const rel = x > 0 ? Math.abs(x - y) / x : 0
        s.maxRel = Math.max(s.maxRel, rel)
        s.sumRel += rel
        s.n++
      })
    }
  }
  const seconds = (Date.now() - start) / 1000
  const keys = await client.keys(`${prefix}:*`)
  const mem = {}
  for (const k of keys) mem[k.includes('fair-approx') ? 'approximate' : 'exact'] = await client.memory('USAGE', k)
  for (const k of keys) await client.del(k)
  await store.close()
  return { err, mem, granularityMs: approx.granularityMs, seconds, rules }
}

async function runFairRound(client, url, round, results, fmt) {
  for (const shape of ['serial', 'server']) {
    for (const impl of IMPLS) {
      const r = await enqueueRun(client, url, impl.id, shape, round)
      ;(results[`fair|${shape}|${impl.id}`] ??= []).push(r)
      process.stderr.write(`round ${round + 1} fair ${shape} ${impl.id}: ${fmt(r.jobsPerS)} jobs/s\n`)
    }
  }
  if (round === 0) {
    results['fair|tradeoff'] = await tradeOff(client, url)
    process.stderr.write(`fair trade-off: ${JSON.stringify(results['fair|tradeoff'].mem)}\n`)
  }
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]

function fairTables(results, fmt) {
  const lines = [
    `### Enqueue: ${fmt(JOBS)} jobs into BullMQ 6, bare and through FairQueues (100 tenants, 2 rules)`,
    '',
    '| call shape | enqueue | jobs/s (median) | vs Queue.add | µs per job (wall) | Node CPU µs/job | Redis CPU µs/job |',
    '| --- | --- | --- | --- | --- | --- | --- |',
  ]
  for (const shape of ['serial', 'server']) {
    const label = shape === 'serial' ? 'one awaited after another' : `server pattern, ${INFLIGHT} in flight`
    const base = results[`fair|${shape}|queue`]
    for (const impl of IMPLS) {
      const runs = results[`fair|${shape}|${impl.id}`]
      if (!runs) continue
      const mid = (f) => median(runs.map(f))
      const ratio = base ? `${(mid((r) => r.jobsPerS) / median(base.map((r) => r.jobsPerS))).toFixed(2)}x` : '-'
      lines.push(
        `| ${label} | ${impl.label} | ${fmt(mid((r) => r.jobsPerS))} | ${ratio} | ${fmt(
          mid((r) => r.usPerJob),
          1,
        )} | ${fmt(
          mid((r) => r.nodeCpuUsPerJob),
          1,
        )} | ${fmt(
          mid((r) => r.redisCpuUsPerJob),
          1,
        )} |`,
      )
    }
  }
  const t = results['fair|tradeoff']
  if (t) {
    lines.push(
      '',
      `### FairTenant exact vs approximate: one tenant, ${fmt(DAY_JOBS)} jobs spread over a day (granularity ${fmt(t.granularityMs)} ms)`,
      '',
      `Memory of the tenant's record at the end of the day (Redis MEMORY USAGE): exact ${fmt(t.mem.exact)} bytes (${fmt(t.mem.exact / DAY_JOBS, 1)} per job), approximate ${fmt(t.mem.approximate)} bytes.`,
      '',
      '| rule window | approximate count: largest shortfall (jobs) | largest shortfall (% of exact) | mean shortfall (% of exact) |',
      '| --- | --- | --- | --- |',
    )
    t.rules.forEach((r, i) => {
      const e = t.err[i]
      lines.push(
        `| ${fmt(r.perMs / 1000)} s | ${fmt(e.maxAbs)} | ${(e.maxRel * 100).toFixed(2)} % | ${((e.sumRel / e.n) * 100).toFixed(3)} % |`,
      )
    })
  }
  return lines
}

module.exports = { runFairRound, fairTables }
