'use strict'
// The sluice/fetch benchmark (issue 26; suite `fetch` of `npm run bench`, or `node bench/fetch.js`
// with SLUICE_REDIS_URL set): the seed scenario, a fleet of N processes x 16 callers calling a
// fake upstream with a hidden limit of L per second (__tests__/helpers/upstream.js: a token bucket
// with a small burst, or a fixed one-second window; no rate headers, IETF draft-10, or
// X-RateLimit-* with an epoch or a delta reset), compared in one run: no pacing (concurrency only),
// bottleneck per process with a reservoir of L/N, sluice with qps L, sluice learning from headers
// with no rate given, and sluice adaptive with no limit given (startQps = maxQps = 10 L). Reported:
// served calls/s / L, the share of requests answered 429 (retries included), 429s after the
// first answer that carried headers, and the time to converge (the first second T >= 5 after
// which every trailing 5 s average of served / L is >= 0.9). Then the per-call overhead of the
// door on a RedisStore (an upstream with no limit, 64 in flight): calls/s and Node CPU per call,
// bare fetch vs pacedFetch.
// FETCH_BENCH_SECONDS (10), FETCH_BENCH_LIMIT (100), FETCH_BENCH_PROCS (4), FETCH_BENCH_SHAPES
// (bucket,window), FETCH_BENCH_DIALECTS (none,draft10,xrl-epoch,xrl-delta), FETCH_BENCH_MODES,
// FETCH_BENCH_TRACE=1 (served/429 per second, on stderr).
const { fork } = require('node:child_process')
const path = require('node:path')
const { startUpstream } = require('../__tests__/helpers/upstream.js')

const SECONDS = Number(process.env.FETCH_BENCH_SECONDS || 10)
const LIMIT = Number(process.env.FETCH_BENCH_LIMIT || 100)
const PROCS = Number(process.env.FETCH_BENCH_PROCS || 4)
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

/** The first second T >= 5 after which every trailing 5 s average of served / L is >= 0.9, or null. */
function convergence(served, limit) {
  let at = null
  for (let t = 5; t <= served.length; t++) {
    const avg = served.slice(t - 5, t).reduce((a, b) => a + b, 0) / 5 / limit
    if (avg >= 0.9) at ??= t
    else at = null
  }
  return at
}

async function scenario(redis, shape, dialect, mode) {
  const [d, reset] = dialect.startsWith('xrl') ? ['xrl', dialect.slice(4)] : [dialect, 'epoch']
  const up = await startUpstream({ limit: LIMIT, burst: Math.max(1, Math.round(LIMIT / 20)), shape, dialect: d, reset })
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
  const run = fleet(PROCS, { ...base, startAt, endAt: startAt + SECONDS * 1000 })
  await new Promise((r) => setTimeout(r, Math.max(0, startAt - Date.now())))
  up.reset()
  const reports = await run
  const c = up.counts
  await up.close()
  const served = Array.from({ length: SECONDS }, (_, s) => (c.perSecond.get(s) || [0, 0, 0])[1])
  const conv = convergence(served, LIMIT)
  if (process.env.FETCH_BENCH_TRACE) {
    // per second: served/refused (what the upstream saw), to see how a client settles
    const row = (s) => (c.perSecond.get(s) || [0, 0, 0]).slice(1).join('/')
    console.error(`  ${shape} ${dialect} ${mode} per second served/429: ${served.map((_, s) => row(s)).join(' ')}`)
  }
  const after = (from) => {
    let req = 0
    let ref = 0
    for (const [s, row] of c.perSecond) if (s >= from && s < SECONDS) ((req += row[0]), (ref += row[2]))
    return { req, ref }
  }
  const firstHeaders = c.firstHeadersAt === null ? null : Math.floor((c.firstHeadersAt - c.start) / 1000) + 1
  const afterHeaders = firstHeaders === null ? null : after(firstHeaders).ref
  const settled = conv === null ? null : after(conv)
  return {
    shape,
    dialect,
    mode,
    servedShare: served.reduce((a, b) => a + b, 0) / SECONDS / LIMIT,
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
          `fetch ${shape} ${dialect} ${mode}: served ${r.servedShare.toFixed(3)} L, 429 ${pct(r.share429)}, converge ${r.converge ?? '—'} s`,
        )
        rows.push(r)
      }
    }
  }
  const o = await overhead(redis)
  const lines = [
    `### sluice/fetch: ${PROCS} processes x ${CONCURRENCY} callers, upstream limit L = ${LIMIT}/s, ${SECONDS} s per run`,
    '',
    '| upstream | dialect | client | served / L | 429 share (retries incl.) | 429s after first headers | converged at (s) | 429 share after | failed calls |',
    '|---|---|---|---:|---:|---:|---:|---:|---:|',
    ...rows.map(
      (r) =>
        `| ${r.shape} | ${r.dialect} | ${r.mode} | ${r.servedShare.toFixed(3)} | ${pct(r.share429)} | ${r.afterHeaders ?? '—'} | ${r.converge ?? '—'} | ${pct(r.share429Settled)} | ${r.failed} |`,
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
