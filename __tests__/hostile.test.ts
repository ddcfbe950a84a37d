// Issue 15: no reply can crash or exhaust the host. A proxy in front of the real Redis
// replaces one reply with a hostile one (nested 2,000 deep, a 2 GB bulk or array announced,
// half a reply, garbage, random bytes), on the direct lane and on the pool, at connect() and on
// a decision. The process using sluice must live (no signal, exit 0), the call must settle with
// a code, and a later call must succeed through the same store.
import { fork } from 'node:child_process'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { HostileProxy, payloads } from './helpers/hostile-proxy.js'
import { redisUrl } from './helpers/stores.js'

const CLIENT = join(__dirname, 'helpers', 'hostile-client.js')
const CODES = ['ERR_STORE_UNAVAILABLE', 'ERR_TIMEOUT', 'ERR_SCRIPT']

interface Outcome {
  ok: boolean
  code?: string | null
  message?: string
  ms: number
}
interface Report {
  first: Outcome
  recoveredMs?: number | null
  after?: Outcome
  rssMb: number
  crashed?: string
}

let proxy: HostileProxy

beforeAll(async () => {
  const u = new URL(redisUrl())
  proxy = new HostileProxy({ host: u.hostname, port: Number(u.port) })
  await proxy.listen()
})
afterAll(() => proxy.close())

/** Runs the client through the proxy; resolves with its report and how it exited. */
function run(phase: 'connect' | 'call', lane: 'direct' | 'pool', name: string, seed = 1) {
  const { payload, then } = payloads(seed)[name]
  const command = phase === 'connect' ? 'FIRST' : lane === 'direct' ? 'EVALSHA' : 'EVALSHA'
  if (phase === 'connect') proxy.arm({ command, payload, then })
  const fired = proxy.fired
  return new Promise<{ report: Report | null; code: number | null; signal: string | null; fired: number }>(
    (resolve) => {
      const child = fork(CLIENT, [JSON.stringify({ url: `redis://127.0.0.1:${proxy.port}`, phase, lane })], {
        stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
      })
      let report: Report | null = null
      const killer = setTimeout(() => child.kill('SIGKILL'), 40_000)
      child.on('message', (m) => {
        if (m === 'ready') {
          proxy.arm({ command, payload, then })
          child.send('go')
        } else report = m as Report
      })
      child.on('exit', (code, signal) => {
        clearTimeout(killer)
        proxy.disarm()
        resolve({ report, code, signal, fired: proxy.fired - fired })
      })
    },
  )
}

function expectSurvived(r: Awaited<ReturnType<typeof run>>, label: string) {
  expect(r.signal, `${label}: killed by a signal`).toBeNull()
  expect(r.code, `${label}: exit code`).toBe(0)
  expect(r.report?.crashed, label).toBeUndefined()
  expect(r.fired, `${label}: the hostile reply was sent`).toBe(1)
  const report = r.report!
  // the call that met the hostile reply settled with a code (or, for a reply it could read, an answer)
  if (!report.first.ok) expect(CODES, `${label}: ${report.first.message}`).toContain(report.first.code)
  expect(report.first.ms, `${label}: settled within the deadline`).toBeLessThan(3_000)
  if (!report.first.ok) expect(report.recoveredMs, `${label}: a later call succeeded`).not.toBeNull()
  expect(report.after?.ok, `${label}: the store works afterwards`).toBe(true)
  expect(report.rssMb, `${label}: memory`).toBeLessThan(400)
}

describe.each(['direct', 'pool'] as const)('hostile replies to a decision on the %s lane', (lane) => {
  for (const name of Object.keys(payloads())) {
    it(`${name}: the process lives, the call settles with a code, the next one succeeds`, async () => {
      const r = await run('call', lane, name)
      expectSurvived(r, `${lane} ${name}`)
      if (name !== 'random') expect(r.report!.first.ok, `${lane} ${name}`).toBe(false)
    }, 60_000)
  }

  it('random replies, several seeds', async () => {
    for (const seed of [2, 3, 4, 5]) expectSurvived(await run('call', lane, 'random', seed), `${lane} random ${seed}`)
  }, 240_000)
})

describe('hostile replies at connect()', () => {
  for (const name of ['nested', 'nested-deep', 'garbage', 'truncated', 'huge-bulk']) {
    it(`${name}: connect() fails with a code or gets through, never crashes; it works afterwards`, async () => {
      const r = await run('connect', 'direct', name)
      expectSurvived(r, `connect ${name}`)
    }, 60_000)
  }
})
