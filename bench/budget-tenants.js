#!/usr/bin/env node
'use strict'
// What a tenant's reservation costs as a budget's tenants grow (issue 27 item 4): N tenants
// registered on one budget (shares summing to 1), then 4,000 reserve+settle through one
// tenant (32 at a time), Redis CPU (INFO cpu) and Node CPU per reserve+settle; and the same on
// a budget without tenants. One process, its own Redis unless SLUICE_REDIS_URL is set.
// TENANT_COUNTS=1,1000,100000
const { Budget, RedisStore } = require('../lib/entries/index.js')
const { spawn } = require('node:child_process')
const fs = require('node:fs')
const net = require('node:net')
const os = require('node:os')
const path = require('node:path')

const CALLS = 4000
const PARALLEL = 32
const DIMENSIONS = {
  requests: { limit: 1e9, intervalMs: 1000 },
  inputTokens: { limit: 1e9, intervalMs: 1000 },
  outputTokens: { limit: 1e9, intervalMs: 1000 },
}

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
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sluice-tenants-bench-'))
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

async function measure(url, budget) {
  const amounts = { requests: 1, inputTokens: 1200, outputTokens: 400 }
  const before = await redisCpuUs(url)
  const cpu = process.cpuUsage()
  let left = CALLS
  await Promise.all(
    Array.from({ length: PARALLEL }, async () => {
      while (left-- > 0) await (await budget.reserve(amounts)).settle({ outputTokens: 225 })
    }),
  )
  const node = process.cpuUsage(cpu)
  const redisUs = (await redisCpuUs(url)) - before
  return { redis: redisUs / CALLS, node: (node.user + node.system) / CALLS }
}

async function main() {
  const redis = await startRedis()
  const store = await RedisStore.connect({ url: redis.url, keyPrefix: `bt${process.pid}` })
  const rows = []
  try {
    const plain = new Budget(store, { name: 'plain', dimensions: DIMENSIONS })
    await measure(redis.url, plain) // warm up
    const p = await measure(redis.url, plain)
    rows.push(['none (the budget itself)', '-', p.redis.toFixed(1), p.node.toFixed(1), '-'])
    for (const n of (process.env.TENANT_COUNTS || '1,1000,100000').split(',').map(Number)) {
      const budget = new Budget(store, { name: `t${n}`, dimensions: DIMENSIONS })
      const share = Math.floor(1e6 / n) / 1e6
      // register n tenants (a stats call each, 1,000 at a time)
      for (let i = 0; i < n; i += 1000) {
        const views = []
        for (let k = i; k < Math.min(n, i + 1000); k++) views.push(budget.tenant(`tenant-${k}`, { share }))
        await Promise.all(views.map((v) => v.stats()))
      }
      const one = budget.tenant('tenant-0', { share })
      const Redis = require('ioredis')
      const r = new Redis(redis.url)
      const held = await r.hlen(`bt${process.pid}:budget:{t${n}}:t`)
      const bytes = await r.memory('USAGE', `bt${process.pid}:budget:{t${n}}:t`)
      r.disconnect()
      const m = await measure(redis.url, one)
      rows.push([
        n.toLocaleString('en-US'),
        held.toLocaleString('en-US'),
        m.redis.toFixed(1),
        m.node.toFixed(1),
        bytes.toLocaleString('en-US'),
      ])
    }
  } finally {
    await store.close()
    redis.stop()
  }
  console.log('| tenants | held in :t | Redis CPU µs/reserve+settle | Node CPU µs/reserve+settle | :t bytes |')
  console.log('| --- | --- | --- | --- | --- |')
  for (const r of rows) console.log(`| ${r.join(' | ')} |`)
}

main().catch((err) => {
  console.error(err)
  process.exit(1)
})
