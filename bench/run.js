#!/usr/bin/env node
'use strict'
// npm run bench: sluice pace() side by side with the reference algorithm in ioredis + Lua and
// with rate-limiter-flexible's RateLimiterRedis.consume(), on one local Redis, in the same
// run. Each scenario runs in a fresh process; rounds are interleaved and the median is kept.
// Redis CPU per decision comes from INFO cpu around each run.
const { execFileSync, fork, spawn } = require('node:child_process')
const fs = require('node:fs')
const net = require('node:net')
const os = require('node:os')
const path = require('node:path')
const Redis = require('ioredis')

const ROUNDS = Number(process.env.BENCH_ROUNDS || 3)
const IMPLS = (process.env.BENCH_IMPLS || 'sluice,reference,rate-limiter-flexible').split(',')
const ONLY = process.env.BENCH_SCENARIOS ? process.env.BENCH_SCENARIOS.split(',') : null // e.g. 1x256,10000x1
// which suites: the pacer (vs its reference and rate-limiter-flexible) and the limiter family
// (vs rate-limiter-flexible and redis-semaphore), and the sliding windows (multi-window check vs
// a two-window sliding log in Lua; checkAndUseQuotas vs Sentry's sliding-window quotas)
const SUITES = (process.env.BENCH_SUITES || 'pacer,limiters,sliding').split(',')
const LIMITER_IMPLS = (
  process.env.BENCH_LIMITER_IMPLS || 'sluice-bucket,sluice-window,sluice-leaky,rate-limiter-flexible'
).split(',')
const SEMAPHORE_IMPLS = (process.env.BENCH_SEMAPHORE_IMPLS || 'sluice-concurrent,redis-semaphore').split(',')
const SLIDING_IMPLS = (process.env.BENCH_SLIDING_IMPLS || 'sluice-sliding,sliding-log-lua').split(',')
const QUOTA_IMPLS = (process.env.BENCH_QUOTA_IMPLS || 'sluice-quota,sentry-quota').split(',')

function freePort() {
  return new Promise((resolve) => {
    const s = net.createServer().listen(0, '127.0.0.1', () => {
      const { port } = s.address()
      s.close(() => resolve(port))
    })
  })
}

async function startRedis() {
  if (process.env.SLUICE_REDIS_URL) return { url: process.env.SLUICE_REDIS_URL, stop: () => {} }
  const port = await freePort()
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sluice-bench-'))
  const child = spawn(
    'redis-server',
    ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir],
    { stdio: ['ignore', 'pipe', 'ignore'] },
  )
  await new Promise((resolve) => child.stdout.on('data', (d) => String(d).includes('Ready to accept') && resolve()))
  return {
    url: `redis://127.0.0.1:${port}`,
    stop: () => {
      child.kill()
      fs.rmSync(dir, { recursive: true, force: true })
    },
  }
}

async function redisCpuUs(client) {
  const info = await client.info('cpu')
  const get = (name) => Number(new RegExp(`${name}:([\\d.]+)`).exec(info)[1])
  return (get('used_cpu_user') + get('used_cpu_sys')) * 1e6
}

async function runOne(client, cfg, script = 'scenario.js') {
  const before = await redisCpuUs(client)
  const result = await new Promise((resolve, reject) => {
    const child = fork(path.join(__dirname, script), [JSON.stringify(cfg)])
    child.once('message', resolve)
    child.once('exit', (code) => code !== 0 && reject(new Error(`${cfg.impl} exited with ${code}`)))
  })
  const after = await redisCpuUs(client)
  // the warm-up also ran on Redis; count it in the denominator
  const warmup = Math.min(2000, cfg.count / 10)
  return {
    ...result,
    rps: result.decisions / result.seconds,
    redisCpuUs: (after - before) / (result.decisions + warmup),
  }
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]
const fmt = (n, d = 0) => n.toLocaleString('en-US', { maximumFractionDigits: d, minimumFractionDigits: d })

async function main() {
  if (!process.env.SLUICE_BENCH_NO_BUILD) {
    console.error('building the addon (release)...')
    execFileSync('npx', ['napi', 'build', '--platform', '--release', '--js', 'index.js', '--dts', 'index.d.ts'], {
      cwd: path.join(__dirname, '..'),
      stdio: ['ignore', 'ignore', 'inherit'],
    })
  }
  const redis = await startRedis()
  const client = new Redis(redis.url)
  const scenarios = []
  for (const keys of [1, 10000]) {
    for (const inflight of [1, 256])
      if (!ONLY || ONLY.includes(`${keys}x${inflight}`)) scenarios.push({ keys, inflight })
  }
  const results = {}
  const limiterScenarios = [
    // rate limiters: one check() per decision, every check admitted (and written)
    ...[
      [1, 256],
      [10000, 256],
      [10000, 1],
    ].map(([keys, inflight]) => ({ suite: 'check', keys, inflight, impls: LIMITER_IMPLS })),
    // semaphores: acquire + release per decision; uncontended (limit above the callers), and
    // contended (16 slots, 256 callers queueing)
    { suite: 'semaphore', keys: 10000, inflight: 256, limit: 1000, impls: SEMAPHORE_IMPLS },
    { suite: 'semaphore', keys: 1, inflight: 256, limit: 16, impls: SEMAPHORE_IMPLS },
  ].filter((s) => !ONLY || ONLY.includes(`${s.keys}x${s.inflight}`))
  const limiterKey = (s, impl) => `${s.suite}|${impl}|${s.keys}|${s.inflight}|${s.limit || 0}`
  // sliding windows: every decision admitted (and written); the quota peer reads 120 counters
  // per decision, so its runs are shorter
  const slidingScenarios = [
    [1, 256],
    [10000, 256],
    [10000, 1],
  ]
    .flatMap(([keys, inflight]) => [
      { suite: 'sliding', keys, inflight, impls: SLIDING_IMPLS },
      { suite: 'quota', keys, inflight, impls: QUOTA_IMPLS },
    ])
    .filter((s) => !ONLY || ONLY.includes(`${s.keys}x${s.inflight}`))
  try {
    for (let round = 0; round < ROUNDS; round++) {
      for (const s of SUITES.includes('limiters') ? limiterScenarios : []) {
        for (const impl of s.impls) {
          const count = s.inflight === 1 ? 10000 : s.suite === 'semaphore' ? 50000 : 200000
          const cfg = { impl, keys: s.keys, inflight: s.inflight, limit: s.limit, count, url: redis.url }
          const r = await runOne(client, { ...cfg, prefix: `lbench${round}${impl}` }, 'limiter-scenario.js')
          ;(results[limiterKey(s, impl)] ??= []).push(r)
          process.stderr.write(
            `round ${round + 1} ${s.suite} ${impl} keys=${s.keys} inflight=${s.inflight}: ${fmt(r.rps)}/s\n`,
          )
        }
      }
      for (const s of SUITES.includes('sliding') ? slidingScenarios : []) {
        for (const impl of s.impls) {
          const count = s.suite === 'sliding' ? (s.inflight === 1 ? 10000 : 100000) : s.inflight === 1 ? 5000 : 10000
          const cfg = { impl, keys: s.keys, inflight: s.inflight, count, url: redis.url }
          const r = await runOne(client, { ...cfg, prefix: `sbench${round}${impl}` }, 'sliding-scenario.js')
          ;(results[limiterKey(s, impl)] ??= []).push(r)
          process.stderr.write(
            `round ${round + 1} ${s.suite} ${impl} keys=${s.keys} inflight=${s.inflight}: ${fmt(r.rps)}/s\n`,
          )
        }
      }
      if (!SUITES.includes('pacer')) continue
      for (const s of scenarios) {
        for (const impl of IMPLS) {
          const count = s.inflight === 1 ? 20000 : 200000
          const r = await runOne(client, { impl, ...s, count, url: redis.url, prefix: `bench${round}${impl}` })
          ;(results[`${impl}|${s.keys}|${s.inflight}`] ??= []).push(r)
          process.stderr.write(`round ${round + 1} ${impl} keys=${s.keys} inflight=${s.inflight}: ${fmt(r.rps)}/s\n`)
        }
      }
      for (const impl of SUITES.includes('pacer') ? ['sluice-memory', 'sluice-memory-reused', 'noop'] : []) {
        for (const inflight of [1, 256]) {
          const r = await runOne(client, { impl, keys: 10000, inflight, count: 2000000, url: redis.url, prefix: 'mem' })
          ;(results[`${impl}|10000|${inflight}`] ??= []).push(r)
          process.stderr.write(`round ${round + 1} ${impl} inflight=${inflight}: ${fmt(r.rps)}/s\n`)
        }
      }
    }
  } finally {
    client.disconnect()
    redis.stop()
  }

  const summary = (key) => {
    const runs = results[key]
    return {
      rps: median(runs.map((r) => r.rps)),
      min: Math.min(...runs.map((r) => r.rps)),
      max: Math.max(...runs.map((r) => r.rps)),
      p50Us: median(runs.map((r) => r.p50Us)),
      p99Us: median(runs.map((r) => r.p99Us)),
      redisCpuUs: median(runs.map((r) => r.redisCpuUs)),
      nodeCpuUs: median(runs.map((r) => r.nodeCpuUs)),
      switches: median(runs.map((r) => r.switchesPerDecision)),
    }
  }
  const lines = []
  if (SUITES.includes('pacer')) lines.push(...pacerTable(scenarios, summary, results))
  if (SUITES.includes('limiters')) lines.push('', ...limiterTable(limiterScenarios, limiterKey, summary))
  if (SUITES.includes('sliding')) lines.push('', ...slidingTables(slidingScenarios, limiterKey, summary))
  const table = lines.join('\n')
  console.log(`\nsluice benchmark, ${ROUNDS} interleaved rounds, ${os.cpus().length} cores, Node ${process.version}\n`)
  console.log(table)
  fs.mkdirSync(path.join(__dirname, 'results'), { recursive: true })
  fs.writeFileSync(path.join(__dirname, 'results', 'latest.md'), table + '\n')
  fs.writeFileSync(path.join(__dirname, 'results', 'latest.json'), JSON.stringify(results, null, 1))
}

function limiterTable(limiterScenarios, limiterKey, summary) {
  const lines = [
    `| limiter scenario | implementation | decisions/s (median, min-max) | vs peer | p50 µs | p99 µs | Redis CPU µs/decision | Node CPU µs/decision |`,
    `| --- | --- | --- | --- | --- | --- | --- | --- |`,
  ]
  for (const s of limiterScenarios) {
    const peer = s.suite === 'check' ? 'rate-limiter-flexible' : 'redis-semaphore'
    const p = s.impls.includes(peer) ? summary(limiterKey(s, peer)) : { rps: NaN }
    const label =
      s.suite === 'check'
        ? `check(), ${s.keys === 1 ? 'hot key' : '10k keys'}, ${s.inflight} in flight`
        : `acquire+release, ${s.keys === 1 ? 'hot key' : '10k keys'}, limit ${s.limit}, ${s.inflight} in flight`
    for (const impl of s.impls) {
      const m = summary(limiterKey(s, impl))
      lines.push(
        `| ${label} | ${impl} | ${fmt(m.rps)} (${fmt(m.min)}-${fmt(m.max)}) | ${(m.rps / p.rps).toFixed(2)}x | ${fmt(m.p50Us)} | ${fmt(m.p99Us)} | ${fmt(m.redisCpuUs, 2)} | ${fmt(m.nodeCpuUs, 2)} |`,
      )
    }
  }
  return lines
}

function slidingTables(slidingScenarios, limiterKey, summary) {
  const lines = []
  for (const [suite, title, peer] of [
    ['sliding', 'multi-window check() (5 s + 1 min)', 'sliding-log-lua'],
    ['quota', 'checkAndUseQuotas() (per-org + global, 1 h in 60 s granules)', 'sentry-quota'],
  ]) {
    const scenarios = slidingScenarios.filter((s) => s.suite === suite)
    if (!scenarios.length) continue
    if (lines.length) lines.push('')
    lines.push(
      `| ${title} | implementation | decisions/s (median, min-max) | vs peer | p50 µs | p99 µs | Redis CPU µs/decision | Node CPU µs/decision |`,
      `| --- | --- | --- | --- | --- | --- | --- | --- |`,
    )
    for (const s of scenarios) {
      const p = s.impls.includes(peer) ? summary(limiterKey(s, peer)) : { rps: NaN }
      const label = `${s.keys === 1 ? 'hot key' : '10k keys'}, ${s.inflight} in flight`
      for (const impl of s.impls) {
        const m = summary(limiterKey(s, impl))
        lines.push(
          `| ${label} | ${impl} | ${fmt(m.rps)} (${fmt(m.min)}-${fmt(m.max)}) | ${(m.rps / p.rps).toFixed(2)}x | ${fmt(m.p50Us)} | ${fmt(m.p99Us)} | ${fmt(m.redisCpuUs, 2)} | ${fmt(m.nodeCpuUs, 2)} |`,
        )
      }
    }
  }
  return lines
}

function pacerTable(scenarios, summary, results) {
  const lines = []
  lines.push(
    `| scenario | implementation | decisions/s (median, min-max) | vs reference | vs rate-limiter-flexible | p50 µs | p99 µs | Redis CPU µs/decision | Node CPU µs/decision | Node context switches/decision |`,
  )
  lines.push(`| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |`)
  for (const s of scenarios) {
    const ref = results[`reference|${s.keys}|${s.inflight}`]
      ? summary(`reference|${s.keys}|${s.inflight}`)
      : { rps: NaN }
    const rlf = results[`rate-limiter-flexible|${s.keys}|${s.inflight}`]
      ? summary(`rate-limiter-flexible|${s.keys}|${s.inflight}`)
      : { rps: NaN }
    for (const impl of IMPLS) {
      const m = summary(`${impl}|${s.keys}|${s.inflight}`)
      lines.push(
        `| ${s.keys === 1 ? 'hot key' : '10k keys'}, ${s.inflight} in flight | ${impl} | ${fmt(m.rps)} (${fmt(m.min)}-${fmt(m.max)}) | ${(m.rps / ref.rps).toFixed(2)}x | ${(m.rps / rlf.rps).toFixed(2)}x | ${fmt(m.p50Us)} | ${fmt(m.p99Us)} | ${fmt(m.redisCpuUs, 2)} | ${fmt(m.nodeCpuUs, 2)} | ${fmt(m.switches, 2)} |`,
      )
    }
  }
  for (const [impl, label] of [
    ['sluice-memory', 'sluice MemoryStore, a pacer per decision'],
    ['sluice-memory-reused', 'sluice MemoryStore, a pacer per key'],
    ['noop', 'no-op (harness ceiling)'],
  ]) {
    for (const inflight of [1, 256]) {
      const m = summary(`${impl}|10000|${inflight}`)
      lines.push(
        `| 10k keys, ${inflight} in flight | ${label} | ${fmt(m.rps)} (${fmt(m.min)}-${fmt(m.max)}) | | | ${fmt(m.p50Us, 1)} | ${fmt(m.p99Us, 1)} | 0 | ${fmt(m.nodeCpuUs, 2)} | ${fmt(m.switches, 2)} |`,
      )
    }
  }
  return lines
}

main().catch((err) => {
  console.error(err)
  process.exit(1)
})
