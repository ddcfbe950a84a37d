'use strict'
// The HTTP doors suite of `npm run bench` (BENCH_SUITES=doors): sluice/express and
// sluice/fastify next to their peers and to no limiter at all, the servers (bench/doors-server.js)
// and the load (autocannon, bench/doors-load.js) in separate processes, all on the run's Redis.
//
// Throughput: one server of each framework (Express 5, Fastify 5, Hono 4, Koa 3, NestJS 12), GET /
// with a 2-byte body, behind sluice, behind its usual Redis-backed limiter (express-rate-limit +
// rate-limit-redis; @fastify/rate-limit; hono-rate-limiter's RedisStore; koa-ratelimit;
// @nestjs/throttler + @nest-lab/throttler-storage-redis), or behind nothing; a limit nobody reaches (1e9 per minute), so every request is admitted and the cost
// of the limiter is what is measured; the key is the `x-client` header, a client id drawn at
// random among BENCH_DOORS_CLIENTS (10,000) for every request.
//
// Hot key: BENCH_DOORS_HOT_SERVERS (4) Express servers (one process and one port each, as 4
// instances behind a load balancer), the same conns on each, every request on ONE key limited
// to 1,000 per second (a fixed window): sluice without and with `localDenyCache` (a refusal
// remembered in the process until its retry time, answered with no round trip), and
// express-rate-limit + rate-limit-redis for reference. What it shows: how many requests are
// served, that no more than the limit are admitted, and what the refused ones cost Redis.
//
// Measured over the load's measured window only (after its warm-up): requests/s and latency
// (autocannon), Redis CPU (INFO cpu) and Redis commands (INFO commandstats, our INFO calls
// excepted) per request, server CPU (process.cpuUsage() in every server) per request.
// BENCH_DOORS_SECONDS (8) measured, BENCH_DOORS_WARMUP (2) unmeasured, BENCH_DOORS_CONNS (64)
// connections per server, BENCH_DOORS_VARIANTS (a comma list of the ids below; all by default).
const { fork } = require('node:child_process')
const path = require('node:path')

const SECONDS = Number(process.env.BENCH_DOORS_SECONDS || 8)
const WARMUP = Number(process.env.BENCH_DOORS_WARMUP || 2)
const CONNS = Number(process.env.BENCH_DOORS_CONNS || 64)
const CLIENTS = Number(process.env.BENCH_DOORS_CLIENTS || 10000)
const HOT_SERVERS = Number(process.env.BENCH_DOORS_HOT_SERVERS || 4)
const HOT_LIMIT = 1000 // admissions per window of 1 s, on the hot key
const BIG = 1e9 // a limit nobody reaches

const PEER = {
  express: 'express-rate-limit + rate-limit-redis',
  fastify: '@fastify/rate-limit',
  hono: 'hono-rate-limiter + its RedisStore',
  koa: 'koa-ratelimit',
  nestjs: '@nestjs/throttler + @nest-lab/throttler-storage-redis',
}
const throughput = (framework, impl) => ({
  id: `${framework}-${impl}`,
  group: 'throughput',
  framework,
  impl,
  label: impl === 'none' ? 'no limiter' : impl === 'peer' ? PEER[framework] : `sluice/${framework}`,
  servers: 1,
  clients: CLIENTS,
  limit: BIG,
  windowMs: 60_000,
})
const hot = (id, impl, label, localDenyCache) => ({
  id,
  group: 'hot',
  framework: 'express',
  impl,
  label,
  localDenyCache,
  servers: HOT_SERVERS,
  clients: 1,
  limit: HOT_LIMIT,
  windowMs: 1000,
  // calendar seconds, so that "200s in one second" is the window's count
  algorithm: 'fixed',
})
const ALL = [
  throughput('express', 'none'),
  throughput('express', 'peer'),
  throughput('express', 'sluice'),
  throughput('fastify', 'none'),
  throughput('fastify', 'peer'),
  throughput('fastify', 'sluice'),
  ...['hono', 'koa', 'nestjs'].flatMap((f) => ['none', 'peer', 'sluice'].map((impl) => throughput(f, impl))),
  hot('hot-sluice', 'sluice', 'sluice/express', false),
  hot('hot-sluice-deny-cache', 'sluice', 'sluice/express, localDenyCache', true),
  hot('hot-peer', 'peer', PEER.express, false),
]
const ONLY = process.env.BENCH_DOORS_VARIANTS ? process.env.BENCH_DOORS_VARIANTS.split(',') : null
const VARIANTS = ALL.filter((v) => !ONLY || ONLY.includes(v.id))

async function redisCpuUs(client) {
  const info = await client.info('cpu')
  const get = (name) => Number(new RegExp(`${name}:([\\d.]+)`).exec(info)[1])
  return (get('used_cpu_user') + get('used_cpu_sys')) * 1e6
}

const SCRIPT_COMMANDS = new Set(['evalsha', 'eval', 'evalsha_ro', 'eval_ro', 'fcall', 'fcall_ro'])

/**
 * Calls per command Redis ran so far (our own INFO calls left out). Redis counts there the
 * commands a script runs as well as the script call itself: rate-limit-redis' EVALSHA counts
 * as 3 (EVALSHA, PTTL, INCR). The limiters here call Redis with scripts only, so the script
 * calls are the round trips' commands, and all the commands are the work done in Redis.
 */
async function redisCommands(client) {
  const info = await client.info('commandstats')
  const calls = {}
  for (const m of info.matchAll(/cmdstat_([^:]+):calls=(\d+)/g)) if (m[1] !== 'info') calls[m[1]] = Number(m[2])
  return calls
}

function commandsDelta(before, after) {
  const delta = {}
  for (const [name, n] of Object.entries(after)) if (n - (before[name] || 0)) delta[name] = n - (before[name] || 0)
  const of = (f) => Object.entries(delta).reduce((sum, [name, n]) => sum + (f(name) ? n : 0), 0)
  return { delta, commands: of(() => true), scripts: of((name) => SCRIPT_COMMANDS.has(name)) }
}

const message = (child) => new Promise((resolve) => child.once('message', resolve))

/** Rejects when `child` exits with an error (never settles otherwise). */
function failure(child, what) {
  const p = new Promise((resolve, reject) =>
    child.once('exit', (code) => code !== 0 && reject(new Error(`${what} exited with ${code}`))),
  )
  p.catch(() => {})
  return p
}

/** One run of a variant: its servers, a load process, Redis read around the measured window. */
async function runDoor(client, url, v, round) {
  const servers = Array.from({ length: v.servers }, () =>
    fork(path.join(__dirname, 'doors-server.js'), [
      JSON.stringify({
        framework: v.framework,
        impl: v.impl,
        url,
        prefix: `doors${round}${v.id}`,
        limit: v.limit,
        windowMs: v.windowMs,
        localDenyCache: v.localDenyCache,
        algorithm: v.algorithm,
      }),
    ]),
  )
  const failed = Promise.race(servers.map((s) => failure(s, `${v.id} server`)))
  let load = null
  try {
    const ports = await Promise.race([Promise.all(servers.map((s) => message(s).then((m) => m.port))), failed])
    load = fork(path.join(__dirname, 'doors-load.js'), [
      JSON.stringify({ ports, conns: CONNS, seconds: SECONDS, warmup: WARMUP, clients: v.clients }),
    ])
    const loadFailed = failure(load, `${v.id} load`)
    const warm = await Promise.race([message(load), failed, loadFailed])
    if (warm !== 'warm') throw new Error(`${v.id}: unexpected message ${JSON.stringify(warm)}`)
    // the measured window opens: Redis' counters, then the servers', then the load's
    const cpu0 = await redisCpuUs(client)
    const cmd0 = await redisCommands(client)
    for (const s of servers) s.send('start')
    load.send('go')
    const result = await Promise.race([message(load), failed, loadFailed])
    const cpu = (await redisCpuUs(client)) - cpu0
    const cmd1 = await redisCommands(client)
    const reports = await Promise.race([
      Promise.all(
        servers.map((s) => {
          const report = message(s)
          s.send('stop')
          return report
        }),
      ),
      failed,
    ])
    const sum = (f) => reports.reduce((n, r) => n + (f(r) ?? NaN), 0)
    const handled = sum((r) => r.handled)
    const count = (status) => result.statuses[status] || 0
    const refused = count('429')
    const { delta, commands, scripts } = commandsDelta(cmd0, cmd1)
    return {
      rps: result.requests / result.seconds,
      okPerS: count('200') / result.seconds,
      refusedPerS: refused / result.seconds,
      // responses neither 200 nor 429, and socket errors and timeouts
      others: result.requests - count('200') - refused + result.errors,
      statuses: result.statuses,
      // hot key: the 200s of each whole second (by the load's clock, when the answer came back)
      okPerSecond: result.okPerSecond,
      okMostInASecond: result.okPerSecond.length ? Math.max(...result.okPerSecond) : NaN,
      okFewestInASecond: result.okPerSecond.length ? Math.min(...result.okPerSecond) : NaN,
      p50Ms: result.p50Ms,
      p99Ms: result.p99Ms,
      handled,
      serverCpuUs: sum((r) => r.cpuUs) / handled,
      redisCpuUs: cpu / handled,
      // the commands Redis ran in the window, by name (those inside scripts included)
      redisCommands: delta,
      commandsPerRequest: commands / handled,
      scriptCallsPerRequest: scripts / handled,
      // every script call of the window (the admitted requests' too) per refused request
      scriptCallsPerRefused: refused ? scripts / refused : NaN,
      perNativeCall: v.impl === 'sluice' ? handled / sum((r) => r.nativeCalls) : NaN,
      localDenialShare: v.impl === 'sluice' && refused ? sum((r) => r.localDenials) / refused : NaN,
    }
  } finally {
    // on a failure, nothing left behind (after a run, they are exiting by themselves)
    for (const child of [...servers, load]) if (child && child.exitCode === null) child.kill()
  }
}

/** Whether a run's numbers make sense; a warning on stderr when they do not. */
function check(v, r) {
  const problems = []
  if (v.group === 'throughput' && r.okPerS * 1.0001 < r.rps) problems.push(`not all 200: ${JSON.stringify(r.statuses)}`)
  if (v.group === 'hot') {
    // a fixed window of 1 s: the measured window overlaps at most ceil(SECONDS) + 1 of them
    const most = (HOT_LIMIT * (Math.ceil(SECONDS) + 1)) / SECONDS
    // by the load's clock a few answers of the end of one window land in the next second
    if (r.okMostInASecond > HOT_LIMIT * 1.05) problems.push(`${r.okMostInASecond} admitted in one second`)
    if (r.okPerS > most)
      problems.push(`${r.okPerS.toFixed(0)} admitted/s, over the limit (${most.toFixed(0)}/s at most)`)
    if (r.others) problems.push(`${r.others} responses neither 200 nor 429: ${JSON.stringify(r.statuses)}`)
  }
  for (const p of problems) process.stderr.write(`WARNING ${v.id}: ${p}\n`)
}

/** One round of the suite: every variant once, in order; each run pushed to results[`doors|<id>`]. */
async function runDoorsRound(client, url, round, results, fmt) {
  for (const v of VARIANTS) {
    const r = await runDoor(client, url, v, round)
    ;(results[`doors|${v.id}`] ??= []).push(r)
    check(v, r)
    const extra = v.group === 'hot' ? `, ${fmt(r.okPerS)} 200s/s, ${fmt(r.refusedPerS)} 429s/s` : ''
    process.stderr.write(`round ${round + 1} doors ${v.id}: ${fmt(r.rps)} requests/s${extra}\n`)
  }
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]

/** The suite's markdown tables, from the medians of the runs. */
function doorsTables(results, fmt) {
  const summary = (v) => {
    const runs = results[`doors|${v.id}`]
    if (!runs) return null
    const mid = (f) => median(runs.map(f))
    const out = { min: Math.min(...runs.map((r) => r.rps)), max: Math.max(...runs.map((r) => r.rps)) }
    for (const name of Object.keys(runs[0])) if (typeof runs[0][name] === 'number') out[name] = mid((r) => r[name])
    out.others = Math.max(...runs.map((r) => r.others))
    return out
  }
  const num = (n, d = 0) => (Number.isNaN(n) || n == null ? '-' : fmt(n, d))
  const ratio = (a, b) => (a && b ? `${(a.rps / b.rps).toFixed(2)}x` : '-')
  const lines = []
  const tp = VARIANTS.filter((v) => v.group === 'throughput')
  if (tp.length) {
    lines.push(
      `### HTTP doors: a server of each framework, GET /, every request admitted (limit 1e9 per minute), the key from an x-client header (one of ${fmt(CLIENTS)} clients at random per request), ${CONNS} keep-alive connections from autocannon in a separate process, ${SECONDS} s per run`,
      '',
      '| framework | limiter | requests/s (median, min-max) | vs no limiter | vs peer | p50 ms | p99 ms | server CPU µs/request | Redis CPU µs/request | Redis script calls/request | Redis commands/request (in scripts too) | requests/native call | not 200 (max) |',
      '| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |',
    )
    const NAMES = {
      express: 'Express 5',
      fastify: 'Fastify 5',
      hono: 'Hono 4 (node-server)',
      koa: 'Koa 3',
      nestjs: 'NestJS 12 (Express)',
    }
    for (const framework of Object.keys(NAMES)) {
      const of = (impl) => summary(ALL.find((v) => v.id === `${framework}-${impl}`))
      const none = of('none')
      const peer = of('peer')
      for (const v of tp.filter((x) => x.framework === framework)) {
        const m = summary(v)
        lines.push(
          `| ${NAMES[framework]} | ${v.label} | ${fmt(m.rps)} (${fmt(m.min)}-${fmt(m.max)}) | ${ratio(m, none)} | ${ratio(m, peer)} | ${num(m.p50Ms, 2)} | ${num(m.p99Ms, 2)} | ${num(m.serverCpuUs, 1)} | ${num(m.redisCpuUs, 2)} | ${num(m.scriptCallsPerRequest, 3)} | ${num(m.commandsPerRequest, 3)} | ${num(m.perNativeCall, 1)} | ${fmt(m.others)} |`,
        )
      }
    }
  }
  const hv = VARIANTS.filter((v) => v.group === 'hot')
  if (hv.length) {
    if (lines.length) lines.push('')
    lines.push(
      `### HTTP doors, hot key: ${HOT_SERVERS} Express 5 servers (a process and a port each) x ${CONNS} connections, every request on ONE key limited to ${fmt(HOT_LIMIT)} per second (fixed window), ${SECONDS} s per run`,
      '',
      '| limiter | requests/s (median, min-max) | vs peer | 200s/s | 200s in one second (fewest-most) | 429s/s | p99 ms | server CPU µs/request | Redis CPU µs/request | Redis commands/request (in scripts too) | Redis script calls per 429 (all calls / 429s) | 429s answered in process | not 200/429 (max) |',
      '| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |',
    )
    const peer = summary(ALL.find((v) => v.id === 'hot-peer'))
    for (const v of hv) {
      const m = summary(v)
      const runs = results[`doors|${v.id}`]
      const fewest = Math.min(...runs.map((r) => r.okFewestInASecond))
      const most = Math.max(...runs.map((r) => r.okMostInASecond))
      const local = Number.isNaN(m.localDenialShare) ? '-' : `${(m.localDenialShare * 100).toFixed(1)}%`
      lines.push(
        `| ${v.label} | ${fmt(m.rps)} (${fmt(m.min)}-${fmt(m.max)}) | ${ratio(m, peer)} | ${fmt(m.okPerS)} | ${num(fewest)}-${num(most)} | ${fmt(m.refusedPerS)} | ${num(m.p99Ms, 2)} | ${num(m.serverCpuUs, 1)} | ${num(m.redisCpuUs, 2)} | ${num(m.commandsPerRequest, 3)} | ${num(m.scriptCallsPerRefused, 4)} | ${local} | ${fmt(m.others)} |`,
      )
    }
  }
  return lines
}

module.exports = { runDoorsRound, doorsTables }
