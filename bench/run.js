#!/usr/bin/env node
'use strict'
// npm run bench: sluice side by side with its peers on one local Redis, in the same run: an
// end-to-end node:http server (sluice, rate-limiter-flexible, no limiter), then every suite
// (pace(), the limiter family, sliding windows and quotas) in two call patterns, the server
// pattern (a decision per event-loop turn) and the same-tick pattern (a Promise.all loop).
// Each scenario runs in a fresh process; rounds are interleaved and the median is kept.
// Redis CPU per decision comes from INFO cpu around each run, script calls per decision from
// INFO commandstats, native calls per decision from the sluice store's batching counters.
// BENCH_SUITES=http,pacer,limiters,sliding,doors,jobs,fair,fetch,stats  BENCH_PATTERNS=server,tick  BENCH_ROUNDS=3
// BENCH_SCENARIOS=10000x256,1x1 (keys x in flight)  SLUICE_BENCH_NO_BUILD=1 (skip the build)
const { execFileSync, fork } = require('node:child_process')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const Redis = require('ioredis')
const { runDoorsRound, doorsTables } = require('./doors.js')
const { runJobsRound, jobsTables } = require('./jobs.js')
const { runFairRound, fairTables } = require('./fair.js')
const { runFetch } = require('./fetch.js')

const ROUNDS = Number(process.env.BENCH_ROUNDS || 3)
const IMPLS = (process.env.BENCH_IMPLS || 'sluice,reference,rate-limiter-flexible').split(',')
const ONLY = process.env.BENCH_SCENARIOS ? process.env.BENCH_SCENARIOS.split(',') : null // e.g. 1x256,10000x1
// which suites: the pacer (vs its reference and rate-limiter-flexible) and the limiter family
// (vs rate-limiter-flexible and redis-semaphore), and the sliding windows (multi-window check vs
// a two-window sliding log in Lua; checkAndUseQuotas vs Sentry's sliding-window quotas)
// and the HTTP doors (sluice/express and sluice/fastify vs their peers, bench/doors.js)
// and issue 41's shape (bench/one-in-flight.js: a decision per event-loop turn, a limiter cached
// per key, 1 and 256 in flight, 10,000 keys and a hot key, an ioredis + EVALSHA floor)
// and lease mode against exact mode on one hot key (bench/lease.js: 4 processes x 64 and x 1)
const SUITES = (process.env.BENCH_SUITES || 'http,pacer,limiters,sliding,doors,jobs,fair,budget,fetch,one,lease').split(
  ',',
)
const LIMITER_IMPLS = (
  process.env.BENCH_LIMITER_IMPLS || 'sluice-bucket,sluice-window,sluice-leaky,rate-limiter-flexible'
).split(',')
const SEMAPHORE_IMPLS = (process.env.BENCH_SEMAPHORE_IMPLS || 'sluice-concurrent,redis-semaphore').split(',')
const SLIDING_IMPLS = (process.env.BENCH_SLIDING_IMPLS || 'sluice-sliding,sliding-log-lua').split(',')
const QUOTA_IMPLS = (process.env.BENCH_QUOTA_IMPLS || 'sluice-quota,sentry-quota').split(',')

const { startRedis, redisCpuUs } = require('./local-redis')

/** One run in a fresh process; Redis CPU and script calls counted over its measured window only. */
async function runOne(client, cfg, script = 'scenario.js') {
  let cpu0 = 0
  let scripts0 = 0
  const result = await new Promise((resolve, reject) => {
    const child = fork(path.join(__dirname, script), [JSON.stringify(cfg)])
    child.on('message', async (msg) => {
      if (msg !== 'warm') return resolve(msg)
      cpu0 = await redisCpuUs(client)
      scripts0 = await scriptCalls(client)
      child.send('go')
    })
    child.once('exit', (code) => code !== 0 && reject(new Error(`${cfg.impl} exited with ${code}`)))
  })
  const cpu = (await redisCpuUs(client)) - cpu0
  const scripts = (await scriptCalls(client)) - scripts0
  return {
    ...result,
    rps: result.decisions / result.seconds,
    redisCpuUs: cpu / result.decisions,
    // IPC carries NaN as null: no native calls to count (a peer)
    perNativeCall: result.nativeCalls == null ? NaN : result.decisions / result.nativeCalls,
    perScriptCall: scripts ? result.decisions / scripts : NaN,
  }
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]
const fmt = (n, d = 0) => n.toLocaleString('en-US', { maximumFractionDigits: d, minimumFractionDigits: d })

// the two ways calls arrive: 'server' (each decision from its own event-loop turn, as requests
// and jobs arrive) and 'tick' (a Promise.all loop: all calls in flight issued in one tick)
const PATTERNS = (process.env.BENCH_PATTERNS || 'server,tick').split(',')
// the shapes of the server pattern, for every suite: 1, 64 and 256 in flight, hot key and 10k keys
const SERVER_SHAPES = [
  [1, 1],
  [1, 64],
  [1, 256],
  [10000, 1],
  [10000, 64],
  [10000, 256],
]
const STATS_FLUSH_MS = Number(process.env.STATS_FLUSH_MS || 1000)
const STATS_SECONDS = Number(process.env.STATS_SECONDS || 4)
const HTTP_IMPLS = (process.env.BENCH_HTTP_IMPLS || 'none,sluice,rate-limiter-flexible').split(',')
const HTTP_SECONDS = Number(process.env.BENCH_HTTP_SECONDS || 5)
const HTTP_CONNS = Number(process.env.BENCH_HTTP_CONNS || 64)

async function scriptCalls(client) {
  const info = await client.info('commandstats')
  let calls = 0
  for (const m of info.matchAll(/cmdstat_(?:evalsha|eval|fcall):calls=(\d+)/g)) calls += Number(m[1])
  return calls
}

/** One http scenario run: a server process, a load process, measured over the same window. */
async function runHttp(client, impl, round) {
  const server = fork(path.join(__dirname, 'http-server.js'), [
    JSON.stringify({ impl, url: client.benchUrl, prefix: `hbench${round}${impl}` }),
  ])
  const { port } = await new Promise((resolve) => server.once('message', resolve))
  const load = fork(path.join(__dirname, 'http-load.js'), [
    JSON.stringify({ port, conns: HTTP_CONNS, seconds: HTTP_SECONDS, warmup: 1, keys: 10000 }),
  ])
  let redis0 = 0
  let scripts0 = 0
  const result = await new Promise((resolve, reject) => {
    load.on('message', async (msg) => {
      if (msg === 'measuring') {
        server.send('start')
        redis0 = await redisCpuUs(client)
        scripts0 = await scriptCalls(client)
      } else resolve(msg)
    })
    load.once('exit', (code) => code !== 0 && reject(new Error(`http load exited with ${code}`)))
  })
  const redisUs = (await redisCpuUs(client)) - redis0
  const scripts = (await scriptCalls(client)) - scripts0
  server.send('stop')
  const srv = await new Promise((resolve) => server.once('message', resolve))
  if (srv.errors) throw new Error(`${impl}: ${srv.errors} requests failed`)
  return {
    rps: result.requests / result.seconds,
    p50Us: result.p50Us,
    p99Us: result.p99Us,
    statuses: result.statuses,
    serverCpuUs: srv.cpuUs / srv.handled,
    redisCpuUs: redisUs / srv.handled,
    // IPC carries NaN as null: no native calls to count (a peer, or no limiter)
    perNativeCall: srv.nativeCalls == null ? NaN : srv.handled / srv.nativeCalls,
    perScriptCall: scripts ? srv.handled / scripts : NaN,
  }
}

async function main() {
  if (!process.env.SLUICE_BENCH_NO_BUILD) {
    console.error('building the addon (release)...')
    execFileSync('npx', ['napi', 'build', '--platform', '--release', '--js', 'index.js', '--dts', 'index.d.ts'], {
      cwd: path.join(__dirname, '..'),
      stdio: ['ignore', 'ignore', 'inherit'],
    })
  }
  const redis = await startRedis()
  let fetchLines = null
  let oneLines = null
  let leaseLines = null
  const client = new Redis(redis.url)
  client.benchUrl = redis.url
  const only = (s) => !ONLY || ONLY.includes(`${s.keys}x${s.inflight}`)
  const shapes = (pattern, tickShapes) =>
    (pattern === 'server' ? SERVER_SHAPES : tickShapes).map(([keys, inflight]) => ({ pattern, keys, inflight }))
  const pacerScenarios = PATTERNS.flatMap((pattern) =>
    shapes(pattern, [
      [1, 1],
      [1, 256],
      [10000, 1],
      [10000, 256],
    ]),
  ).filter(only)
  const limiterScenarios = PATTERNS.flatMap((pattern) => [
    // rate limiters: one check() per decision, every check admitted (and written)
    ...shapes(pattern, [
      [1, 256],
      [10000, 256],
      [10000, 1],
    ]).map((s) => ({ ...s, suite: 'check', impls: LIMITER_IMPLS })),
    // semaphores: acquire + release per decision; uncontended (limit above the callers), and
    // contended (16 slots, 256 callers queueing)
    { pattern, suite: 'semaphore', keys: 10000, inflight: 256, limit: 1000, impls: SEMAPHORE_IMPLS },
    { pattern, suite: 'semaphore', keys: 1, inflight: 256, limit: 16, impls: SEMAPHORE_IMPLS },
  ]).filter(only)
  // sliding windows: every decision admitted (and written); the quota peer reads 120 counters
  // per decision, so its runs are shorter
  const slidingScenarios = PATTERNS.flatMap((pattern) =>
    shapes(pattern, [
      [1, 256],
      [10000, 256],
      [10000, 1],
    ]).flatMap((s) => [
      { ...s, suite: 'sliding', impls: SLIDING_IMPLS },
      { ...s, suite: 'quota', impls: QUOTA_IMPLS },
    ]),
  ).filter(only)
  // what statistics cost (BENCH_SUITES=stats): the same check() on a store with statistics on
  // and off, in runs of several seconds so that they include flushes (statsFlushMs
  // STATS_FLUSH_MS, default 1000: five times the default rate), each round's pair in ABBA order
  const statsScenarios = SERVER_SHAPES.filter(([keys, inflight]) => keys > 1 || inflight > 1).map(
    ([keys, inflight]) => ({ pattern: 'server', suite: 'stats', keys, inflight }),
  )
  const key = (s, impl) => `${s.pattern}|${s.suite}|${impl}|${s.keys}|${s.inflight}|${s.limit || 0}`
  const results = {}
  const record = async (s, impl, cfg, script) => {
    const r = await runOne(client, { ...cfg, impl, keys: s.keys, inflight: s.inflight, pattern: s.pattern }, script)
    ;(results[key(s, impl)] ??= []).push(r)
    process.stderr.write(
      `round ${cfg.round} ${s.pattern} ${s.suite} ${impl} keys=${s.keys} inflight=${s.inflight}: ${fmt(r.rps)}/s\n`,
    )
  }
  const countFor = (suite, inflight) =>
    ({
      pacer: inflight === 1 ? 10000 : inflight === 64 ? 100000 : 200000,
      check: inflight === 1 ? 10000 : inflight === 64 ? 100000 : 200000,
      semaphore: 50000,
      sliding: inflight === 1 ? 10000 : 100000,
      quota: inflight === 1 ? 5000 : 10000,
    })[suite]
  try {
    for (let round = 0; round < ROUNDS; round++) {
      const url = redis.url
      for (const s of SUITES.includes('limiters') ? limiterScenarios : []) {
        for (const impl of s.impls) {
          const cfg = { limit: s.limit, count: countFor(s.suite, s.inflight), url, prefix: `lbench${round}${impl}` }
          await record(s, impl, { ...cfg, round: round + 1 }, 'limiter-scenario.js')
        }
      }
      for (const s of SUITES.includes('stats') ? statsScenarios : []) {
        const pair = ['sluice-bucket', 'sluice-bucket-nostats']
        for (const impl of round % 2 === 0 ? pair : pair.reverse()) {
          const count = Math.round(STATS_SECONDS * (s.inflight === 1 ? 4_000 : s.inflight === 64 ? 60_000 : 150_000))
          const cfg = { count, url, prefix: `stbench${round}${impl}`, statsFlushMs: STATS_FLUSH_MS, round: round + 1 }
          await record(s, impl, cfg, 'limiter-scenario.js')
        }
      }
      for (const s of SUITES.includes('sliding') ? slidingScenarios : []) {
        for (const impl of s.impls) {
          const cfg = { count: countFor(s.suite, s.inflight), url, prefix: `sbench${round}${impl}`, round: round + 1 }
          await record(s, impl, cfg, 'sliding-scenario.js')
        }
      }
      if (SUITES.includes('pacer')) {
        for (const s of pacerScenarios) {
          for (const impl of IMPLS) {
            const cfg = { count: countFor('pacer', s.inflight), url, prefix: `bench${round}${impl}`, round: round + 1 }
            await record({ ...s, suite: 'pacer' }, impl, cfg, 'scenario.js')
          }
        }
        for (const pattern of PATTERNS) {
          for (const impl of ['sluice-memory', 'sluice-memory-reused', 'noop']) {
            for (const inflight of [1, 256]) {
              const count = pattern === 'server' ? 500000 : 2000000
              const s = { pattern, suite: 'pacer', keys: 10000, inflight }
              await record(s, impl, { count, url, prefix: 'mem', round: round + 1 }, 'scenario.js')
            }
          }
        }
      }
      for (const impl of SUITES.includes('http') ? HTTP_IMPLS : []) {
        const r = await runHttp(client, impl, round)
        ;(results[`http|${impl}`] ??= []).push(r)
        process.stderr.write(`round ${round + 1} http ${impl}: ${fmt(r.rps)} requests/s\n`)
      }
      if (SUITES.includes('doors')) await runDoorsRound(client, redis.url, round, results, fmt)
      if (SUITES.includes('jobs')) await runJobsRound(client, redis.url, round, results, fmt)
      if (SUITES.includes('fair')) await runFairRound(client, redis.url, round, results, fmt)
    }
    // sluice/fetch: once, not per round (minutes of a fleet against a fake upstream, bench/fetch.js)
    if (SUITES.includes('fetch')) fetchLines = await runFetch(redis.url)
    // issue 41's shape: its own rounds, alternated, on this run's Redis (bench/one-in-flight.js)
    if (SUITES.includes('one')) {
      oneLines = execFileSync(process.execPath, [path.join(__dirname, 'one-in-flight.js')], {
        encoding: 'utf8',
        env: { ...process.env, SLUICE_REDIS_URL: redis.url, ONE_ROUNDS: String(ROUNDS) },
        stdio: ['ignore', 'pipe', 'inherit'],
      })
    }
    // lease mode against exact mode, one hot key, several processes (bench/lease.js)
    if (SUITES.includes('lease')) {
      leaseLines = execFileSync(process.execPath, [path.join(__dirname, 'lease.js')], {
        encoding: 'utf8',
        env: { ...process.env, SLUICE_REDIS_URL: redis.url, LEASE_ROUNDS: String(ROUNDS) },
        stdio: ['ignore', 'pipe', 'inherit'],
      })
    }
  } finally {
    client.disconnect()
    redis.stop()
  }

  const summary = (k) => {
    const runs = results[k]
    const mid = (f) => median(runs.map(f))
    return {
      rps: mid((r) => r.rps),
      min: Math.min(...runs.map((r) => r.rps)),
      max: Math.max(...runs.map((r) => r.rps)),
      p50Us: mid((r) => r.p50Us),
      p99Us: mid((r) => r.p99Us),
      redisCpuUs: mid((r) => r.redisCpuUs),
      nodeCpuUs: mid((r) => r.nodeCpuUs),
      serverCpuUs: mid((r) => r.serverCpuUs),
      switches: mid((r) => r.switchesPerDecision),
      perNativeCall: mid((r) => r.perNativeCall),
      perScriptCall: mid((r) => r.perScriptCall),
    }
  }
  const lines = []
  if (SUITES.includes('http')) lines.push(...httpTable(summary), '')
  if (SUITES.includes('doors')) lines.push(...doorsTables(results, fmt), '')
  if (SUITES.includes('jobs')) lines.push(...jobsTables(results, fmt), '')
  if (SUITES.includes('fair')) lines.push(...fairTables(results, fmt), '')
  if (SUITES.includes('budget')) {
    // Budget against a simulated token-priced API, 4 processes x 32 callers (bench/budget.js, its own Redis)
    lines.push(
      '### Budget: a simulated token-priced API',
      '',
      execFileSync(process.execPath, [path.join(__dirname, 'budget.js')], { encoding: 'utf8' }),
      '',
      // what a tenant's reservation costs with 1, 1,000 and 100,000 tenants (bench/budget-tenants.js)
      '### Budget tenants: cost per reservation as tenants grow',
      '',
      execFileSync(process.execPath, [path.join(__dirname, 'budget-tenants.js')], { encoding: 'utf8' }),
      '',
    )
  }
  if (fetchLines) lines.push(...fetchLines, '')
  if (oneLines)
    lines.push('### One decision per event-loop turn, a limiter cached per key (issue 41)', '', oneLines, '')
  if (leaseLines) lines.push('### Lease mode against exact mode, one hot key (DESIGN §11)', '', leaseLines, '')
  for (const pattern of SUITES.some((x) => !['http', 'doors', 'jobs', 'fair', 'budget', 'fetch', 'one'].includes(x))
    ? PATTERNS
    : []) {
    const of = (list) => list.filter((s) => s.pattern === pattern)
    lines.push(
      pattern === 'server'
        ? '### Server pattern: each decision issued from its own event-loop turn (a setImmediate per decision)'
        : '### Same-tick pattern: a Promise.all loop, every call in flight issued in one tick',
      '',
    )
    if (SUITES.includes('pacer')) lines.push(...pacerTable(of(pacerScenarios), pattern, summary, key, results), '')
    if (SUITES.includes('limiters')) lines.push(...limiterTable(of(limiterScenarios), key, summary), '')
    if (SUITES.includes('sliding')) lines.push(...slidingTables(of(slidingScenarios), key, summary), '')
    if (SUITES.includes('stats') && pattern === 'server')
      lines.push(...statsTable(statsScenarios, key, summary, results), '')
  }
  const table = lines.join('\n')
  console.log(`\nsluice benchmark, ${ROUNDS} interleaved rounds, ${os.cpus().length} cores, Node ${process.version}\n`)
  console.log(table)
  fs.mkdirSync(path.join(__dirname, 'results'), { recursive: true })
  fs.writeFileSync(path.join(__dirname, 'results', 'latest.md'), table + '\n')
  fs.writeFileSync(path.join(__dirname, 'results', 'latest.json'), JSON.stringify(results, null, 1))
}

/** Statistics on vs off: medians, and each round's paired ratio (median, min-max). */
function statsTable(scenarios, key, summary, results) {
  const lines = [
    `### What statistics cost: BucketLimiter.check() (a limiter object per decision, every check admitted and written), statistics on (statsFlushMs ${STATS_FLUSH_MS}) vs off, about ${STATS_SECONDS} s per run, ABBA order`,
    '',
    '| shape | stats on, decisions/s | stats off, decisions/s | on / off (medians) | paired on / off per round: median (min-max) | Node CPU µs/decision (on, off) | Redis CPU µs/decision (on, off) |',
    '| --- | --- | --- | --- | --- | --- | --- |',
  ]
  for (const s of scenarios) {
    const on = summary(key(s, 'sluice-bucket'))
    const off = summary(key(s, 'sluice-bucket-nostats'))
    const a = results[key(s, 'sluice-bucket')]
    const b = results[key(s, 'sluice-bucket-nostats')]
    const ratios = a.map((r, i) => r.rps / b[i].rps)
    const shape = `${s.keys === 1 ? 'hot key' : `${fmt(s.keys)} keys`}, ${s.inflight} in flight`
    lines.push(
      `| ${shape} | ${fmt(on.rps)} (${fmt(on.min)}-${fmt(on.max)}) | ${fmt(off.rps)} (${fmt(off.min)}-${fmt(off.max)}) | ` +
        `${fmt(on.rps / off.rps, 3)}x | ${fmt(median(ratios), 3)}x (${fmt(Math.min(...ratios), 2)}-${fmt(Math.max(...ratios), 2)}) | ` +
        `${fmt(on.nodeCpuUs, 2)}, ${fmt(off.nodeCpuUs, 2)} | ${fmt(on.redisCpuUs, 2)}, ${fmt(off.redisCpuUs, 2)} |`,
    )
  }
  return lines
}

const batchCells = (m) =>
  `${Number.isNaN(m.perNativeCall) ? '-' : fmt(m.perNativeCall, 1)} | ${Number.isNaN(m.perScriptCall) ? '-' : fmt(m.perScriptCall, 2)}`

function httpTable(summary) {
  const lines = [
    `### End to end: a node:http server, one decision per request (BucketLimiter.check() / RateLimiterRedis.consume(), 10k keys), ${HTTP_CONNS} keep-alive connections from a separate load process, ${HTTP_SECONDS} s per run`,
    '',
    `| server | requests/s (median, min-max) | vs no limiter | vs rate-limiter-flexible | p50 µs | p99 µs | server CPU µs/request | Redis CPU µs/request | decisions/native call | decisions/script call |`,
    `| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |`,
  ]
  const base = HTTP_IMPLS.includes('none') ? summary('http|none') : { rps: NaN }
  const rlf = HTTP_IMPLS.includes('rate-limiter-flexible') ? summary('http|rate-limiter-flexible') : { rps: NaN }
  for (const impl of HTTP_IMPLS) {
    const m = summary(`http|${impl}`)
    lines.push(
      `| ${impl === 'none' ? 'no limiter' : impl} | ${fmt(m.rps)} (${fmt(m.min)}-${fmt(m.max)}) | ${(m.rps / base.rps).toFixed(2)}x | ${(m.rps / rlf.rps).toFixed(2)}x | ${fmt(m.p50Us)} | ${fmt(m.p99Us)} | ${fmt(m.serverCpuUs, 2)} | ${fmt(m.redisCpuUs, 2)} | ${batchCells(m)} |`,
    )
  }
  return lines
}

const HEAD = `decisions/s (median, min-max) | vs peer | p50 µs | p99 µs | Redis CPU µs/decision | Node CPU µs/decision | decisions/native call | decisions/script call |`
const RULE = `| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |`
const cells = (m, p) =>
  `${fmt(m.rps)} (${fmt(m.min)}-${fmt(m.max)}) | ${(m.rps / p.rps).toFixed(2)}x | ${fmt(m.p50Us)} | ${fmt(m.p99Us)} | ${fmt(m.redisCpuUs, 2)} | ${fmt(m.nodeCpuUs, 2)} | ${batchCells(m)} |`
const where = (s) => `${s.keys === 1 ? 'hot key' : '10k keys'}, ${s.inflight} in flight`

function limiterTable(scenarios, key, summary) {
  const lines = [`| limiter scenario | implementation | ${HEAD}`, RULE]
  for (const s of scenarios) {
    const peer = s.suite === 'check' ? 'rate-limiter-flexible' : 'redis-semaphore'
    const p = s.impls.includes(peer) ? summary(key(s, peer)) : { rps: NaN }
    const label = s.suite === 'check' ? `check(), ${where(s)}` : `acquire+release, limit ${s.limit}, ${where(s)}`
    for (const impl of s.impls) lines.push(`| ${label} | ${impl} | ${cells(summary(key(s, impl)), p)}`)
  }
  return lines
}

function slidingTables(slidingScenarios, key, summary) {
  const lines = []
  for (const [suite, title, peer] of [
    ['sliding', 'multi-window check() (5 s + 1 min)', 'sliding-log-lua'],
    ['quota', 'checkAndUseQuotas() (per-org + global, 1 h in 60 s granules)', 'sentry-quota'],
  ]) {
    const scenarios = slidingScenarios.filter((s) => s.suite === suite)
    if (!scenarios.length) continue
    if (lines.length) lines.push('')
    lines.push(`| ${title} | implementation | ${HEAD}`, RULE)
    for (const s of scenarios) {
      const p = s.impls.includes(peer) ? summary(key(s, peer)) : { rps: NaN }
      for (const impl of s.impls) lines.push(`| ${where(s)} | ${impl} | ${cells(summary(key(s, impl)), p)}`)
    }
  }
  return lines
}

function pacerTable(scenarios, pattern, summary, key, results) {
  const lines = [
    `| pace() scenario | implementation | decisions/s (median, min-max) | vs reference | vs rate-limiter-flexible | p50 µs | p99 µs | Redis CPU µs/decision | Node CPU µs/decision | Node context switches/decision | decisions/native call | decisions/script call |`,
    `| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |`,
  ]
  for (const sc of scenarios) {
    const s = { ...sc, suite: 'pacer' }
    const of = (impl) => (results[key(s, impl)] ? summary(key(s, impl)) : { rps: NaN })
    const ref = of('reference')
    const rlf = of('rate-limiter-flexible')
    for (const impl of IMPLS) {
      const m = summary(key(s, impl))
      lines.push(
        `| ${where(s)} | ${impl} | ${fmt(m.rps)} (${fmt(m.min)}-${fmt(m.max)}) | ${(m.rps / ref.rps).toFixed(2)}x | ${(m.rps / rlf.rps).toFixed(2)}x | ${fmt(m.p50Us)} | ${fmt(m.p99Us)} | ${fmt(m.redisCpuUs, 2)} | ${fmt(m.nodeCpuUs, 2)} | ${fmt(m.switches, 2)} | ${batchCells(m)} |`,
      )
    }
  }
  for (const [impl, label] of [
    ['sluice-memory', 'sluice MemoryStore, a pacer per decision'],
    ['sluice-memory-reused', 'sluice MemoryStore, a pacer per key'],
    ['noop', 'no-op (harness ceiling)'],
  ]) {
    for (const inflight of [1, 256]) {
      const m = summary(key({ pattern, suite: 'pacer', keys: 10000, inflight }, impl))
      lines.push(
        `| 10k keys, ${inflight} in flight | ${label} | ${fmt(m.rps)} (${fmt(m.min)}-${fmt(m.max)}) | | | ${fmt(m.p50Us, 1)} | ${fmt(m.p99Us, 1)} | 0 | ${fmt(m.nodeCpuUs, 2)} | ${fmt(m.switches, 2)} | - | - |`,
      )
    }
  }
  return lines
}

main().catch((err) => {
  console.error(err)
  process.exit(1)
})
