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

const dirs: string[] = []
afterAll(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })))

export async function startRedis(port: number, extra: string[] = []): Promise<ChildProcess> {
  const dir = mkdtempSync(join(tmpdir(), 'sluice-fault-'))
  dirs.push(dir)
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
