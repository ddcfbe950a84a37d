'use strict'
// The sluice/fetch benchmark (issue 26; suite `fetch` of `npm run bench`, or `node bench/fetch.js`
// with SLUICE_REDIS_URL set): the seed scenario, a fleet of N processes x 16 callers calling a
// fake upstream with a hidden limit of L per second (__tests__/helpers/upstream.js: a token bucket
// with a small burst, or a fixed one-second window; no rate headers, IETF draft-10, or
// X-RateLimit-* with an epoch or a delta reset), compared in one run: no pacing (concurrency only),
// bottleneck per process with a reservoir of L/N, sluice with qps L, sluice learning from headers
// with no rate given, and sluice adaptive with no limit given (startQps = maxQps = 10 L). Reported:
// served calls/s / L, the share of requests answered 429 (retries included), 429s after the
// first answer that carried headers, and when the fleet settled (the first second S from which
// every 5 s average of served / L is >= 0.9; S + 5 reads the same moment from trailing
// averages) with the 429 share after it. Then the per-call overhead of the
// door on a RedisStore (an upstream with no limit, 64 in flight): calls/s and Node CPU per call,
// bare fetch vs pacedFetch.
// FETCH_BENCH_SECONDS (10: the rows without sluice), FETCH_BENCH_SLUICE_SECONDS (30),
// FETCH_BENCH_LIMIT (100), FETCH_BENCH_BURST (L/20), FETCH_BENCH_PROCS (4), FETCH_BENCH_SHAPES
// (bucket,window), FETCH_BENCH_DIALECTS (none,draft10,xrl-epoch,xrl-delta), FETCH_BENCH_MODES,
// FETCH_BENCH_TRACE=1 (served/429 per second, on stderr).
const { fork } = require('node:child_process')
const path = require('node:path')
const { startUpstream } = require('../__tests__/helpers/upstream.js')

const SECONDS = Number(process.env.FETCH_BENCH_SECONDS || 10)
// sluice's rows: served / L over a longer run (the first second's 429s and block, when the
// limit is not given, are a third of a 10 s run's shortfall)
const SLUICE_SECONDS = Number(process.env.FETCH_BENCH_SLUICE_SECONDS || 30)
const LIMIT = Number(process.env.FETCH_BENCH_LIMIT || 100)
const PROCS = Number(process.env.FETCH_BENCH_PROCS || 4)
// the token bucket's burst (default L/20, at least 1)
const BURST = Number(process.env.FETCH_BENCH_BURST) || Math.max(1, Math.round(LIMIT / 20))
const CONCURRENCY = 16
const list = (name, def) => (process.env[name] || def).split(',')
const SHAPES = list('FETCH_BENCH_SHAPES', 'bucket,window')
const DIALECTS = list('FETCH_BENCH_DIALECTS', 'none,draft10,xrl-epoch,xrl-delta')
const MODES = list('FETCH_BENCH_MODES', 'none,bottleneck,sluice-qps,sluice-learn,sluice-adaptive')
const WORKER = path.join(__dirname, 'fetch-worker.js')

/** Runs `n` worker processes with `cfg`, started together; resolves their reports. */
async function fleet(n, cfg) {
  const children = Array.from({ length: n }, () =>
    fork(WORKER, [JSON.stringify(cfg)], { stdio: ['ignore', 'pipe', 'inherit', 'ipc'] }),
  )
  const reports = children.map(
    (c) =>
      new Promise((resolve, reject) => {
        let out = ''
        c.stdout.on('data', (d) => (out += d))
        c.once('exit', (code) =>
          code === 0 ? resolve(JSON.parse(out.trim().split('\n').pop())) : reject(new Error(`worker exited ${code}`)),
        )
      }),
  )
  await Promise.all(children.map((c) => new Promise((r) => c.once('message', r))))
  children.forEach((c) => c.send('go'))
  return Promise.all(reports)
}

/**
 * When the fleet settled: the first second S from which every 5 s average of served / L is
 * >= 0.9 (the average over [S, S + 5) and over every later span), or null. S + 5 is the same
 * moment read from trailing averages (the first second T at which the average of the last 5 s
 * is >= 0.9 and stays so), which cannot be under 5.
 */
const { settledFrom: convergence } = require('../__tests__/helpers/adaptive-sim.js')

async function scenario(redis, shape, dialect, mode) {
  const [d, reset] = dialect.startsWith('xrl') ? ['xrl', dialect.slice(4)] : [dialect, 'epoch']
  const up = await startUpstream({ limit: LIMIT, burst: BURST, shape, dialect: d, reset })
  const prefix = `fb${Date.now().toString(36)}${Math.random().toString(36).slice(2, 6)}`
  const base = {
    url: up.url + '/api',
    redis,
    prefix,
    mode,
    limit: LIMIT,
    reservoir: LIMIT / PROCS,
    concurrency: CONCURRENCY,
  }
  // the workers connect first, then all start at one moment
  const startAt = Date.now() + 1500
  const seconds = mode.startsWith('sluice') ? SLUICE_SECONDS : SECONDS
  const run = fleet(PROCS, { ...base, startAt, endAt: startAt + seconds * 1000 })
  await new Promise((r) => setTimeout(r, Math.max(0, startAt - Date.now())))
  up.reset()
  const reports = await run
  const c = up.counts
  await up.close()
  const served = Array.from({ length: seconds }, (_, s) => (c.perSecond.get(s) || [0, 0, 0])[1])
  const conv = convergence(served, LIMIT)
  if (process.env.FETCH_BENCH_TRACE) {
    // per second: served/refused (what the upstream saw), to see how a client settles
    const row = (s) => (c.perSecond.get(s) || [0, 0, 0]).slice(1).join('/')
    console.error(`  ${shape} ${dialect} ${mode} per second served/429: ${served.map((_, s) => row(s)).join(' ')}`)
  }
  const after = (from) => {
    let req = 0
    let ref = 0
    for (const [s, row] of c.perSecond) if (s >= from && s < seconds) ((req += row[0]), (ref += row[2]))
    return { req, ref }
  }
  const firstHeaders = c.firstHeadersAt === null ? null : Math.floor((c.firstHeadersAt - c.start) / 1000) + 1
  const afterHeaders = firstHeaders === null ? null : after(firstHeaders).ref
  const settled = conv === null ? null : after(conv)
  return {
    shape,
    dialect,
    mode,
    seconds,
    servedShare: served.reduce((a, b) => a + b, 0) / seconds / LIMIT,
    share429: c.requests ? c.refused / c.requests : 0,
    afterHeaders,
    converge: conv,
    share429Settled: settled && settled.req ? settled.ref / settled.req : null,
    failed: reports.reduce((a, r) => a + r.failed, 0),
  }
}

async function overhead(redis) {
  const up = await startUpstream({ limit: 1e9, burst: 1e9 })
  const out = {}
  for (const mode of ['bare', 'sluice-unpaced', 'bare', 'sluice-unpaced']) {
    const [r] = await fleet(1, {
      url: up.url + '/x',
      redis,
      prefix: `fo${Date.now().toString(36)}`,
      mode,
      concurrency: 64,
      calls: 20_000,
      startAt: Date.now() + 500,
    })
    const row = { callsPerS: (r.calls / r.elapsedMs) * 1000, cpuUsPerCall: r.cpuUs / r.calls }
    // best of two rounds each
    if (!out[mode] || row.callsPerS > out[mode].callsPerS) out[mode] = row
  }
  await up.close()
  return out
}

const pct = (x) => (x === null ? '—' : `${(100 * x).toFixed(1)} %`)

async function runFetch(redis) {
  const rows = []
  for (const shape of SHAPES) {
    for (const dialect of DIALECTS) {
      for (const mode of MODES) {
        if (mode === 'sluice-learn' && dialect === 'none') continue // nothing to learn from
        const r = await scenario(redis, shape, dialect, mode)
        console.error(
          `fetch ${shape} ${dialect} ${mode}: served ${r.servedShare.toFixed(3)} L over ${r.seconds} s, 429 ${pct(r.share429)}, settled from ${r.converge ?? '—'} s`,
        )
        rows.push(r)
      }
    }
  }
  const o = await overhead(redis)
  const lines = [
    `### sluice/fetch: ${PROCS} processes x ${CONCURRENCY} callers, upstream limit L = ${LIMIT}/s, ${SLUICE_SECONDS} s per run of sluice, ${SECONDS} s of the others`,
    '',
    'settled from S: every 5 s average of served / L from second S on is >= 0.9 (trailing 5 s averages: from S + 5)',
    '',
    '| upstream | dialect | client | run (s) | served / L | 429 share (retries incl.) | 429s after first headers | settled from (s) | 429 share after | failed calls |',
    '|---|---|---|---:|---:|---:|---:|---:|---:|---:|',
    ...rows.map(
      (r) =>
        `| ${r.shape} | ${r.dialect} | ${r.mode} | ${r.seconds} | ${r.servedShare.toFixed(3)} | ${pct(r.share429)} | ${r.afterHeaders ?? '—'} | ${r.converge ?? '—'} | ${pct(r.share429Settled)} | ${r.failed} |`,
    ),
    '',
    '### sluice/fetch overhead: one process, 64 in flight, 20,000 calls to a local upstream with no limit (best of 2)',
    '',
    '| client | calls/s | Node CPU per call (µs) |',
    '|---|---:|---:|',
    ...Object.entries(o).map(
      ([m, r]) =>
        `| ${m === 'bare' ? 'fetch' : 'pacedFetch (RedisStore, unpaced key)'} | ${r.callsPerS.toFixed(0)} | ${r.cpuUsPerCall.toFixed(1)} |`,
    ),
    '',
    `pacedFetch / fetch: ${((100 * o['sluice-unpaced'].callsPerS) / o.bare.callsPerS).toFixed(1)} % of the calls/s, ${((100 * o['sluice-unpaced'].cpuUsPerCall) / o.bare.cpuUsPerCall).toFixed(1)} % of the CPU per call`,
  ]
  return lines
}

module.exports = { runFetch }

if (require.main === module) {
  const redis = process.env.SLUICE_REDIS_URL
  if (!redis) throw new Error('set SLUICE_REDIS_URL')
  runFetch(redis).then((lines) => console.log(lines.join('\n')))
}
