#!/usr/bin/env node
'use strict'
// Starts (or stops) the Redis servers the test suite runs on: one standalone server and a
// 3-master Redis Cluster, on free loopback ports, persistence off, state under .redis-test/.
//   node scripts/redis-servers.js start   -> prints shell exports, writes .redis-test/servers.json
//   node scripts/redis-servers.js env     -> the same exports, for servers already running
//   node scripts/redis-servers.js stop
const { execFileSync } = require('node:child_process')
const fs = require('node:fs')
const net = require('node:net')
const path = require('node:path')

const root = path.resolve(__dirname, '..', '.redis-test')
const stateFile = path.join(root, 'servers.json')

function portFree(port) {
  return new Promise((resolve) => {
    const server = net.createServer()
    server.once('error', () => resolve(false))
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)))
  })
}

/** A port p with p and p + 10000 (the cluster bus) both free. */
async function freePort(taken) {
  for (let attempt = 0; attempt < 200; attempt++) {
    const port = 20000 + Math.floor(Math.random() * 30000)
    if (taken.has(port) || taken.has(port + 10000)) continue
    if ((await portFree(port)) && (await portFree(port + 10000))) {
      taken.add(port)
      taken.add(port + 10000)
      return port
    }
  }
  throw new Error('no free port pair found')
}

function cli(port, ...args) {
  return execFileSync('redis-cli', ['-h', '127.0.0.1', '-p', String(port), ...args], { encoding: 'utf8' }).trim()
}

async function waitFor(check, what, ms = 10000) {
  const until = Date.now() + ms
  for (;;) {
    try {
      if (check()) return
    } catch {}
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`)
    await new Promise((r) => setTimeout(r, 50))
  }
}

function startServer(port, dir, extra) {
  fs.mkdirSync(dir, { recursive: true })
  execFileSync('redis-server', [
    '--port',
    String(port),
    '--bind',
    '127.0.0.1',
    '--save',
    '',
    '--appendonly',
    'no',
    '--daemonize',
    'yes',
    '--dir',
    dir,
    '--pidfile',
    path.join(dir, 'redis.pid'),
    '--logfile',
    path.join(dir, 'redis.log'),
    ...extra,
  ])
}

async function start() {
  stop()
  const taken = new Set()
  const standalone = await freePort(taken)
  const cluster = [await freePort(taken), await freePort(taken), await freePort(taken)]
  startServer(standalone, path.join(root, String(standalone)), [])
  for (const p of cluster) {
    startServer(p, path.join(root, String(p)), [
      '--cluster-enabled',
      'yes',
      '--cluster-config-file',
      `nodes-${p}.conf`,
      '--cluster-node-timeout',
      '5000',
    ])
  }
  fs.writeFileSync(stateFile, JSON.stringify({ standalone, cluster }))
  for (const p of [standalone, ...cluster]) await waitFor(() => cli(p, 'PING') === 'PONG', `redis on ${p}`)
  execFileSync(
    'redis-cli',
    ['--cluster', 'create', ...cluster.map((p) => `127.0.0.1:${p}`), '--cluster-replicas', '0', '--cluster-yes'],
    { stdio: 'ignore' },
  )
  await waitFor(() => cluster.every((p) => /cluster_state:ok/.test(cli(p, 'CLUSTER', 'INFO'))), 'cluster state ok')
  printEnv()
}

/** The shell exports that point the suites at the running servers. */
function printEnv() {
  const { standalone, cluster } = JSON.parse(fs.readFileSync(stateFile, 'utf8'))
  console.log(`export SLUICE_REDIS_URL=redis://127.0.0.1:${standalone}`)
  console.log(`export SLUICE_REDIS_CLUSTER=${cluster.map((p) => `redis://127.0.0.1:${p}`).join(',')}`)
}

function alive(pid) {
  try {
    process.kill(pid, 0)
    return true
  } catch {
    return false
  }
}

/** Stops the servers of the last start (if any), waits until they exit, removes their files. */
function stop() {
  if (!fs.existsSync(stateFile)) return
  const { standalone, cluster } = JSON.parse(fs.readFileSync(stateFile, 'utf8'))
  const pids = []
  for (const p of [standalone, ...cluster]) {
    try {
      const pid = Number(fs.readFileSync(path.join(root, String(p), 'redis.pid'), 'utf8'))
      process.kill(pid, 'SIGTERM')
      pids.push(pid)
    } catch {}
  }
  const until = Date.now() + 10000
  while (pids.some(alive) && Date.now() < until) execFileSync('sleep', ['0.05'])
  for (const pid of pids.filter(alive)) process.kill(pid, 'SIGKILL')
  fs.rmSync(root, { recursive: true, force: true, maxRetries: 10, retryDelay: 100 })
}

if (process.argv[2] === 'start') {
  start().catch((err) => {
    console.error(err.message)
    stop()
    process.exit(1)
  })
} else if (process.argv[2] === 'env') {
  printEnv()
} else if (process.argv[2] === 'stop') {
  stop()
} else {
  console.error('usage: redis-servers.js start|env|stop')
  process.exit(2)
}
