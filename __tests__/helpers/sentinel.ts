// A private Redis Sentinel setup for a test file: 1 master, 1 replica, 3 sentinels (the
// redis-server binary in sentinel mode: Debian's redis-sentinel package runs the same binary),
// with short timeouts, so that a killed master's replica is promoted within a few seconds.
import { spawn, type ChildProcess } from 'node:child_process'
import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { freePort, startRedisIn, stop } from './servers.js'

export const MASTER_NAME = 'sluicemaster'

function cli(port: number, ...args: string[]): Promise<string> {
  return new Promise((resolve) => {
    const c = spawn('redis-cli', ['-p', String(port), ...args])
    let out = ''
    c.stdout.on('data', (chunk) => (out += chunk))
    c.once('exit', () => resolve(out.trim()))
  })
}

async function until(what: string, check: () => Promise<boolean>, ms = 30_000) {
  const end = Date.now() + ms
  for (;;) {
    if (await check()) return
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`)
    await new Promise((r) => setTimeout(r, 100))
  }
}

async function startSentinel(port: number, masterPort: number, extra: string): Promise<ChildProcess> {
  const dir = mkdtempSync(join(tmpdir(), 'sluice-sentinel-'))
  const conf = join(dir, 'sentinel.conf')
  writeFileSync(
    conf,
    [
      `port ${port}`,
      'bind 127.0.0.1',
      `dir ${dir}`,
      `sentinel monitor ${MASTER_NAME} 127.0.0.1 ${masterPort} 2`,
      `sentinel down-after-milliseconds ${MASTER_NAME} 1000`,
      `sentinel failover-timeout ${MASTER_NAME} 10000`,
      `sentinel parallel-syncs ${MASTER_NAME} 1`,
      extra,
    ].join('\n') + '\n',
  )
  const child = spawn('redis-server', [conf, '--sentinel'], { stdio: ['ignore', 'pipe', 'ignore'] })
  await new Promise<void>((resolve, reject) => {
    let out = ''
    child.stdout!.on('data', (chunk) => {
      out += chunk
      if (out.includes('+monitor')) resolve()
    })
    child.once('exit', (code) => reject(new Error(`redis-sentinel exited with ${code}`)))
  })
  return child
}

/**
 * Starts the setup; `password` (optional) is the master's and replica's `requirepass`, and
 * `sentinelPassword` the sentinels'. Resolves once every sentinel knows the replica and the
 * other two sentinels (a failover can then be agreed).
 */
export async function startSentinelSetup(options: { password?: string; sentinelPassword?: string } = {}) {
  const auth = options.password ? ['--requirepass', options.password, '--masterauth', options.password] : []
  const masterPort = await freePort()
  const replicaPort = await freePort()
  const dirs = [0, 1].map(() => mkdtempSync(join(tmpdir(), 'sluice-sentinel-data-')))
  const servers = new Map<number, ChildProcess>()
  servers.set(masterPort, await startRedisIn(masterPort, dirs[0], auth))
  servers.set(
    replicaPort,
    await startRedisIn(replicaPort, dirs[1], [...auth, '--replicaof', '127.0.0.1', String(masterPort)]),
  )
  const dataCli = (port: number, ...args: string[]) =>
    cli(port, ...(options.password ? ['-a', options.password, '--no-auth-warning'] : []), ...args)
  await until('the replica in sync', async () =>
    /master_link_status:up/.test(await dataCli(replicaPort, 'INFO', 'replication')),
  )
  const extra = [
    options.password ? `sentinel auth-pass ${MASTER_NAME} ${options.password}` : '',
    options.sentinelPassword ? `requirepass ${options.sentinelPassword}` : '',
    options.sentinelPassword ? `sentinel sentinel-pass ${options.sentinelPassword}` : '',
  ].join('\n')
  const sentinelPorts: number[] = []
  const sentinels: ChildProcess[] = []
  for (let i = 0; i < 3; i++) {
    // a port freePort() found may be taken before the sentinel binds it (other test files start
    // servers at the same time): a sentinel that exits at its start is started on another port
    for (let attempt = 1; ; attempt++) {
      const port = await freePort()
      try {
        sentinels.push(await startSentinel(port, masterPort, extra))
        sentinelPorts.push(port)
        break
      } catch (err) {
        if (attempt >= 3) throw err
      }
    }
  }
  const sentinelCli = (port: number, ...args: string[]) =>
    cli(port, ...(options.sentinelPassword ? ['-a', options.sentinelPassword, '--no-auth-warning'] : []), ...args)
  const ready = () =>
    until('the sentinels to know the replica and each other', async () => {
      for (const p of sentinelPorts) {
        const info = await sentinelCli(p, 'SENTINEL', 'MASTER', MASTER_NAME)
        const lines = info.split('\n')
        const field = (name: string) => lines[lines.indexOf(name) + 1]
        if (field('num-slaves') !== '1' || field('num-other-sentinels') !== '2' || field('flags') !== 'master')
          return false
        const replicas = await sentinelCli(p, 'SENTINEL', 'REPLICAS', MASTER_NAME)
        if (/s_down|o_down|disconnected/.test(replicas)) return false
      }
      // the replica (after a failover: the old master, once the sentinels converted it)
      // copies the current master: promoting it loses nothing
      const master = await currentMaster()
      const replica = [...servers.keys()].find((p) => p !== master)!
      const info = await dataCli(replica, 'INFO', 'replication')
      return info.includes('role:slave') && info.includes(`master_port:${master}`) && /master_link_status:up/.test(info)
    })
  const currentMaster = async () =>
    Number((await sentinelCli(sentinelPorts[0], 'SENTINEL', 'get-master-addr-by-name', MASTER_NAME)).split('\n')[1])
  await ready()
  return {
    name: MASTER_NAME,
    sentinels: sentinelPorts.map((p) => `redis://127.0.0.1:${p}`),
    master: currentMaster,
    masterPort,
    replicaPort,
    cli: dataCli,
    sentinelCli,
    ready,
    /** SIGKILLs the data server on `port`. */
    kill: (port: number) => stop(servers.get(port)!),
    stopAll: () => Promise.all([...servers.values(), ...sentinels].map((c) => stop(c))),
  }
}
