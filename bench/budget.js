#!/usr/bin/env node
'use strict'
// Budget against a simulated token-priced API (issue 27): 4 processes x 32 callers reserve
// { requests: 1, inputTokens: prompt, outputTokens: estimate } on one Redis, call the API, and
// settle the true output from the response's `usage`. The API (an HTTP server in this process)
// counts like the real ones: a token bucket per dimension of `limit` per second, refilled
// continuously; a request is charged 1 request, its prompt and its `max_tokens` when it
// arrives (429, nothing charged, when any bucket lacks it), answers after 20..80 ms, and then
// gives back `max_tokens - actual output`. Reports useful tokens per second as a share of each
// limit, 429s, and what a reservation costs (Node and Redis CPU) next to a one-dimension pace().
// BUDGET_BENCH_MS=8000 BUDGET_ESTIMATES=max,mean  SLUICE_REDIS_URL=redis://... (else one is started)
const { fork, spawn } = require('node:child_process')
const fs = require('node:fs')
const http = require('node:http')
const net = require('node:net')
const os = require('node:os')
const path = require('node:path')

// per second; output (charged at max_tokens, then settled) is the tightest: 12,000 / 225 = 53 calls/s
const LIMITS = { requests: 400, inputTokens: 60_000, outputTokens: 12_000 }
const MAX_TOKENS = 400
const PROCESSES = 4
const CALLERS = 32
const DURATION_MS = Number(process.env.BUDGET_BENCH_MS || 10_000)
/** Counted from this long after the start: the buckets' first second of burst is not a rate. */
const WARMUP_MS = 3000

// --- the simulated API -------------------------------------------------------------------

class Bucket {
  constructor(limit) {
    this.limit = limit
    this.level = limit
    this.at = performance.now()
  }
  refill() {
    const now = performance.now()
    this.level = Math.min(this.limit, this.level + ((now - this.at) * this.limit) / 1000)
    this.at = now
  }
}

function startApi() {
  const buckets = Object.fromEntries(Object.entries(LIMITS).map(([k, v]) => [k, new Bucket(v)]))
  const counts = { ok: 0, refused: 0, input: 0, output: 0, from: Infinity, to: Infinity }
  const server = http.createServer((req, res) => {
    let body = ''
    req.on('data', (d) => (body += d))
    req.on('end', () => {
      const { prompt, max_tokens: maxTokens, output } = JSON.parse(body)
      const charge = { requests: 1, inputTokens: prompt, outputTokens: maxTokens }
      for (const b of Object.values(buckets)) b.refill()
      if (Object.entries(charge).some(([k, v]) => buckets[k].level < v)) {
        counts.refused++
        res.writeHead(429).end()
        return
      }
      for (const [k, v] of Object.entries(charge)) buckets[k].level -= v
      setTimeout(
        () => {
          buckets.outputTokens.refill()
          buckets.outputTokens.level = Math.min(LIMITS.outputTokens, buckets.outputTokens.level + maxTokens - output)
          if (Date.now() >= counts.from && Date.now() < counts.to) {
            counts.ok++
            counts.input += prompt
            counts.output += output
          }
          res.writeHead(200, { 'content-type': 'application/json' })
          res.end(JSON.stringify({ usage: { prompt_tokens: prompt, completion_tokens: output } }))
        },
        20 + Math.random() * 60,
      )
    })
  })
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve({ server, counts })))
}

// --- a client process ----------------------------------------------------------------------

async function client(cfg) {
  const { RedisStore, Budget, DistributedPacer } = require('../lib/entries/index.js')
  const store = await RedisStore.connect({ url: cfg.url, keyPrefix: cfg.prefix })
  const agent = new http.Agent({ keepAlive: true, maxSockets: CALLERS })
  const call = (payload) =>
    new Promise((resolve, reject) => {
      const req = http.request(
        { host: '127.0.0.1', port: cfg.port, method: 'POST', path: '/v1/chat', agent },
        (res) => {
          let body = ''
          res.on('data', (d) => (body += d))
          res.on('end', () => resolve({ status: res.statusCode, body }))
        },
      )
      req.on('error', reject)
      req.end(JSON.stringify(payload))
    })
  const out = { reservations: 0, refused: 0, cpuUs: 0 }
  await new Promise((r) => setTimeout(r, Math.max(0, cfg.startAt - Date.now())))
  const cpu = process.cpuUsage()
  if (cfg.mode === 'api') {
    const budget = new Budget(store, { name: 'llm', dimensions: cfg.dimensions })
    const loop = async () => {
      while (Date.now() < cfg.startAt + cfg.durationMs) {
        const prompt = 100 + Math.floor(Math.random() * 900)
        const output = 50 + Math.floor(Math.random() * 350)
        const estimate = cfg.estimate === 'max' ? MAX_TOKENS : 225
        const r = await budget.reserve(
          { requests: 1, inputTokens: prompt, outputTokens: estimate },
          { maxWaitMs: Infinity },
        )
        const res = await call({ prompt, max_tokens: MAX_TOKENS, output })
        out.reservations++
        if (res.status !== 200) {
          out.refused++
          await r.settle({ outputTokens: 0 }) // the API charged nothing
          continue
        }
        await r.settle({ outputTokens: JSON.parse(res.body).usage.completion_tokens })
      }
    }
    await Promise.all(Array.from({ length: CALLERS }, loop))
  } else {
    // cost: no waiting (limits far above the load), reserve+settle or one pace()
    const budget = new Budget(store, {
      name: 'cost',
      dimensions: {
        requests: { limit: 1e9, intervalMs: 1000, maxBurst: 1e9 },
        inputTokens: { limit: 1e9, intervalMs: 1000, maxBurst: 1e9 },
        outputTokens: { limit: 1e9, intervalMs: 1000, maxBurst: 1e9 },
      },
    })
    const pacer = new DistributedPacer(store, { key: 'cost', qps: 1e9, maxBurst: 1e9 })
    const loop = async () => {
      while (Date.now() < cfg.startAt + cfg.durationMs) {
        if (cfg.mode === 'pace') await pacer.pace()
        else
          await (
            await budget.reserve({ requests: 1, inputTokens: 500, outputTokens: 400 })
          ).settle({ outputTokens: 225 })
        out.reservations++
      }
    }
    await Promise.all(Array.from({ length: CALLERS }, loop))
  }
  const used = process.cpuUsage(cpu)
  out.cpuUs = used.user + used.system
  agent.destroy()
  await store.close()
  process.send(out, () => process.exit(0))
}

// --- the parent ----------------------------------------------------------------------------

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
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sluice-budget-bench-'))
  const child = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--dir', dir], {
    stdio: ['ignore', 'pipe', 'ignore'],
  })
  await new Promise((resolve) => child.stdout.on('data', (d) => String(d).includes('Ready to accept') && resolve()))
  return {
    url: `redis://127.0.0.1:${port}`,
    stop: () => (child.kill(), fs.rmSync(dir, { recursive: true, force: true })),
  }
}

async function redisCpuUs(url) {
  const Redis = require('ioredis')
  const r = new Redis(url)
  const info = await r.info('cpu')
  r.disconnect()
  const f = (k) => Number(new RegExp(`${k}:([0-9.]+)`).exec(info)[1])
  return (f('used_cpu_sys') + f('used_cpu_user')) * 1e6
}

async function round(redis, mode, extra, counts = null) {
  const startAt = Date.now() + 1000
  if (counts) {
    counts.from = startAt + WARMUP_MS
    counts.to = startAt + DURATION_MS
  }
  const cfg = {
    url: redis.url,
    prefix: `bb${process.pid}${mode}${Date.now()}`,
    startAt,
    durationMs: DURATION_MS,
    mode,
    ...extra,
  }
  const before = await redisCpuUs(redis.url)
  const results = await Promise.all(
    Array.from({ length: PROCESSES }, () => {
      const child = fork(__filename, ['--client', JSON.stringify(cfg)])
      return new Promise((resolve, reject) => {
        child.once('message', resolve)
        child.once('exit', (code) => code !== 0 && reject(new Error(`client exited with ${code}`)))
      })
    }),
  )
  const redisUs = (await redisCpuUs(redis.url)) - before
  const n = results.reduce((x, r) => x + r.reservations, 0)
  const nodeUs = results.reduce((x, r) => x + r.cpuUs, 0)
  return { n, refused: results.reduce((x, r) => x + r.refused, 0), nodeUsPer: nodeUs / n, redisUsPer: redisUs / n }
}

/** `rows` (objects with the same keys) as a Markdown table. */
function markdown(rows) {
  const keys = Object.keys(rows[0])
  const line = (cells) => `| ${cells.join(' | ')} |`
  return [line(keys), line(keys.map(() => '---')), ...rows.map((r) => line(keys.map((k) => String(r[k]))))].join('\n')
}

async function main() {
  const redis = await startRedis()
  const rows = []
  try {
    for (const estimate of (process.env.BUDGET_ESTIMATES || 'max,mean').split(',')) {
      const { server, counts } = await startApi()
      // maxBurst: 90 % of a second's limit less the largest reservation (latency margin)
      const dimensions = {
        requests: { limit: LIMITS.requests, intervalMs: 1000, maxBurst: Math.floor(0.9 * LIMITS.requests) - 1 },
        inputTokens: {
          limit: LIMITS.inputTokens,
          intervalMs: 1000,
          maxBurst: Math.floor(0.9 * LIMITS.inputTokens) - 1000,
        },
        outputTokens: {
          limit: LIMITS.outputTokens,
          intervalMs: 1000,
          maxBurst: Math.floor(0.9 * LIMITS.outputTokens) - MAX_TOKENS,
        },
      }
      await round(redis, 'api', { port: server.address().port, dimensions, estimate }, counts)
      server.close()
      const s = (DURATION_MS - WARMUP_MS) / 1000
      rows.push({
        estimate: estimate === 'max' ? 'max_tokens (400)' : 'mean output (225)',
        'calls/s': Math.round(counts.ok / s),
        '429s': counts.refused,
        'requests/limit': (counts.ok / s / LIMITS.requests).toFixed(3),
        'input/limit': (counts.input / s / LIMITS.inputTokens).toFixed(3),
        'output/limit': (counts.output / s / LIMITS.outputTokens).toFixed(3),
      })
    }
    console.log(markdown(rows))
    const cost = []
    for (const mode of ['reserve+settle', 'pace']) {
      const r = await round(redis, mode === 'pace' ? 'pace' : 'cost', {})
      cost.push({
        call: mode,
        calls: r.n,
        'Node CPU µs/call': r.nodeUsPer.toFixed(1),
        'Redis CPU µs/call': r.redisUsPer.toFixed(1),
      })
    }
    console.log('')
    console.log(markdown(cost))
  } finally {
    redis.stop()
  }
}

if (process.argv[2] === '--client') {
  client(JSON.parse(process.argv[3])).catch((err) => {
    console.error(err)
    process.exit(1)
  })
} else {
  main().catch((err) => {
    console.error(err)
    process.exit(1)
  })
}
