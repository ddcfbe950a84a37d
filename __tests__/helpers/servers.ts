// Redis servers a test file starts and stops itself (for failures, pauses and settings
// that must not disturb the shared servers of the suite).
import { spawn, type ChildProcess } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import net from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll } from 'vitest'

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer()
    server.once('error', reject)
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo
      server.close(() => resolve(port))
    })
  })
}

const dirsToRemove: string[] = []
afterAll(() => dirsToRemove.forEach((d) => rmSync(d, { recursive: true, force: true })))

export async function startRedis(port: number, extra: string[] = []): Promise<ChildProcess> {
  const dir = mkdtempSync(join(tmpdir(), 'sluice-fault-'))
  dirsToRemove.push(dir)
  return startRedisIn(port, dir, extra)
}

/** A redis-server on `port` keeping its files in `dir` (`extra` may override `--port`). */
export async function startRedisIn(port: number, dir: string, extra: string[]): Promise<ChildProcess> {
  const child = spawn(
    'redis-server',
    ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir, ...extra],
    {
      stdio: ['ignore', 'pipe', 'ignore'],
    },
  )
  await new Promise<void>((resolve, reject) => {
    let out = ''
    child.stdout!.on('data', (chunk) => {
      out += chunk
      if (out.includes('Ready to accept connections')) resolve()
    })
    child.once('exit', (code) => reject(new Error(`redis-server exited with ${code}`)))
  })
  return child
}

export function stop(child: ChildProcess, signal: NodeJS.Signals = 'SIGKILL'): Promise<void> {
  return new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) return resolve()
    child.once('exit', () => resolve())
    child.kill(signal)
  })
}

export async function timed<T>(promise: Promise<T>): Promise<{ ms: number; error: unknown }> {
  const start = performance.now()
  try {
    await promise
    return { ms: performance.now() - start, error: null }
  } catch (error) {
    return { ms: performance.now() - start, error }
  }
}

export async function eventually(fn: () => Promise<unknown>, withinMs: number): Promise<number> {
  const start = performance.now()
  for (;;) {
    try {
      await fn()
      return performance.now() - start
    } catch (err) {
      if (performance.now() - start > withinMs) throw err
      await new Promise((r) => setTimeout(r, 50))
    }
  }
}

/** A port p with p + 10000 (its cluster bus) free too. */
async function clusterPort(): Promise<number> {
  for (let i = 0; i < 200; i++) {
    const port = 20000 + Math.floor(Math.random() * 30000)
    const free = (p: number) =>
      new Promise<boolean>((resolve) => {
        const s = net.createServer()
        s.once('error', () => resolve(false))
        s.listen(p, '127.0.0.1', () => s.close(() => resolve(true)))
      })
    if ((await free(port)) && (await free(port + 10000))) return port
  }
  throw new Error('no free port pair')
}

/**
 * A private 3-master Redis Cluster (for failures that must not disturb the suite's shared
 * one). Each node keeps its directory and nodes.conf, so a killed node restarted with
 * `restart(i)` rejoins with its slots.
 */
export async function startCluster({ fullCoverage = true } = {}) {
  const ports = [await clusterPort(), await clusterPort(), await clusterPort()]
  const dirs = ports.map(() => {
    const d = mkdtempSync(join(tmpdir(), 'sluice-cluster-'))
    dirsToRemove.push(d)
    return d
  })
  const args = ['--cluster-enabled', 'yes', '--cluster-config-file', 'nodes.conf', '--cluster-node-timeout', '2000']
  // 'no': the other masters go on serving their slots once a killed one is marked failed
  if (!fullCoverage) args.push('--cluster-require-full-coverage', 'no')
  const nodes: ChildProcess[] = []
  const launch = async (i: number) => {
    nodes[i] = await startRedisIn(ports[i], dirs[i], args)
  }
  for (let i = 0; i < 3; i++) await launch(i)
  await new Promise<void>((resolve, reject) => {
    const create = spawn(
      'redis-cli',
      ['--cluster', 'create', ...ports.map((p) => `127.0.0.1:${p}`), '--cluster-replicas', '0', '--cluster-yes'],
      { stdio: 'ignore' },
    )
    create.once('exit', (code) => (code === 0 ? resolve() : reject(new Error(`cluster create exited with ${code}`))))
  })
  const state = (port: number) =>
    new Promise<string>((resolve) => {
      const cli = spawn('redis-cli', ['-p', String(port), 'CLUSTER', 'INFO'])
      let out = ''
      cli.stdout.on('data', (c) => (out += c))
      cli.once('exit', () => resolve(out))
    })
  const ready = async () => {
    for (let i = 0; i < 200; i++) {
      const states = await Promise.all(ports.map(state))
      if (states.every((s) => s.includes('cluster_state:ok'))) return
      await new Promise((r) => setTimeout(r, 50))
    }
    throw new Error('the cluster never became ok')
  }
  await ready()
  return {
    urls: ports.map((p) => `redis://127.0.0.1:${p}`),
    kill: (i: number) => stop(nodes[i]),
    restart: async (i: number) => {
      await launch(i)
      await ready()
    },
    stopAll: () => Promise.all(nodes.map((n) => stop(n))),
  }
}

/**
 * A private Redis Cluster of 3 masters with one replica each (6 nodes), a short node timeout so
 * that a killed master's replica is promoted within a few seconds. Returns the seed URLs, the
 * masters' and replicas' ports and a way to kill one node. `fullCoverage`: the servers'
 * cluster-require-full-coverage.
 */
export async function startReplicatedCluster({ fullCoverage = true } = {}) {
  const ports: number[] = []
  for (let i = 0; i < 6; i++) ports.push(await clusterPort())
  const nodes: ChildProcess[] = []
  const args = [
    '--cluster-enabled',
    'yes',
    '--cluster-config-file',
    'nodes.conf',
    '--cluster-node-timeout',
    '1000',
    '--cluster-replica-validity-factor',
    '0',
    // 'no': the other masters go on serving their slots while one has no reachable owner
    // (with the default, every master answers CLUSTERDOWN until the replica is promoted)
    '--cluster-require-full-coverage',
    fullCoverage ? 'yes' : 'no',
  ]
  for (const p of ports) {
    const d = mkdtempSync(join(tmpdir(), 'sluice-rcluster-'))
    dirsToRemove.push(d)
    nodes.push(await startRedisIn(p, d, args))
  }
  await new Promise<void>((resolve, reject) => {
    const create = spawn(
      'redis-cli',
      ['--cluster', 'create', ...ports.map((p) => `127.0.0.1:${p}`), '--cluster-replicas', '1', '--cluster-yes'],
      { stdio: 'ignore' },
    )
    create.once('exit', (code) => (code === 0 ? resolve() : reject(new Error(`cluster create exited with ${code}`))))
  })
  const cli = (port: number, ...args: string[]) =>
    new Promise<string>((resolve) => {
      const c = spawn('redis-cli', ['-p', String(port), ...args])
      let out = ''
      c.stdout.on('data', (chunk) => (out += chunk))
      c.once('exit', () => resolve(out))
    })
  const alive = () => ports.filter((_, i) => nodes[i].exitCode === null && nodes[i].signalCode === null)
  /** Waits until every live node says cluster_state:ok and every slot has a live master. */
  const ready = async () => {
    for (let i = 0; i < 600; i++) {
      const states = await Promise.all(alive().map((p) => cli(p, 'CLUSTER', 'INFO')))
      if (states.every((s) => s.includes('cluster_state:ok') && s.includes('cluster_slots_ok:16384'))) {
        // replicas attached: every master has one
        const roles = await Promise.all(alive().map((p) => cli(p, 'ROLE')))
        // and every replica in sync with its master (a replica still loading its first copy
        // could be promoted empty: cluster-replica-validity-factor 0 lets any replica win)
        const repl = await Promise.all(alive().map((p) => cli(p, 'INFO', 'replication')))
        const synced = repl.every(
          (r) =>
            !r.includes('role:slave') ||
            (r.includes('master_link_status:up') && r.includes('master_sync_in_progress:0')),
        )
        if (
          roles.filter((r) => r.startsWith('master')).length === 3 &&
          roles.length - 3 === alive().length - 3 &&
          synced
        ) {
          if (alive().length === 6 && roles.filter((r) => r.startsWith('slave')).length !== 3) continue
          return
        }
      }
      await new Promise((r) => setTimeout(r, 50))
    }
    throw new Error('the cluster never became ok')
  }
  await ready()
  const masters = async () => {
    const out: number[] = []
    for (const p of alive()) if ((await cli(p, 'ROLE')).startsWith('master')) out.push(p)
    return out
  }
  return {
    urls: ports.map((p) => `redis://127.0.0.1:${p}`),
    ports,
    cli,
    ready,
    masters,
    /** The replica of master `port`. */
    replicaOf: async (port: number) => {
      for (const p of alive()) {
        const role = await cli(p, 'ROLE')
        if (role.startsWith('slave') && role.includes(`\n${port}\n`)) return p
      }
      throw new Error(`no replica of ${port}`)
    },
    kill: (port: number) => stop(nodes[ports.indexOf(port)]),
    stopAll: () => Promise.all(nodes.map((n) => stop(n))),
  }
}
