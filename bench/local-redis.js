'use strict'
// A local redis-server for the benchmarks (bench/run.js, bench/one-in-flight.js): a free loopback
// port, no persistence, removed on stop (or SLUICE_REDIS_URL when given), and Redis' CPU so far.
const { spawn } = require('node:child_process')
const fs = require('node:fs')
const net = require('node:net')
const os = require('node:os')
const path = require('node:path')

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

module.exports = { freePort, startRedis, redisCpuUs }
