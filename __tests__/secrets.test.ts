// Issue 15: secrets never leave. Every error path a password can meet (a bad URL, a bad host,
// WRONGPASS, NOAUTH, a TLS failure, a cluster seed that fails, a store that goes down), with a
// distinctive password: no message, stack, cause, util.inspect, JSON.stringify or log line of
// any error or store shows it, in its plain or URL-encoded form.
import util from 'node:util'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { ChildProcess } from 'node:child_process'
import { BucketLimiter, ConcurrentLimiter, RedisStore } from '../lib/entries/index.js'
import { freePort, startRedis, stop } from './helpers/servers.js'

const SECRET = 'Zq7-s3cr3t-PW'
const USER = 'alice'
const FORMS = [SECRET, encodeURIComponent(SECRET), Buffer.from(SECRET).toString('base64')]

/** Everything a person or a log could see of `value`. */
function views(value: unknown): string[] {
  const out = [util.inspect(value, { depth: 20, showHidden: true, getters: true })]
  try {
    out.push(JSON.stringify(value) ?? '')
  } catch {
    // circular: inspect covers it
  }
  if (value instanceof Error) {
    out.push(value.message, String(value.stack), String(value))
    let cause = (value as { cause?: unknown }).cause
    for (let i = 0; cause !== undefined && i < 10; i++) {
      out.push(util.inspect(cause, { depth: 20, showHidden: true }), String(cause))
      cause = (cause as { cause?: unknown })?.cause
    }
  }
  return out
}

function expectClean(label: string, value: unknown) {
  for (const text of views(value)) {
    for (const form of FORMS)
      expect(text.includes(form), `${label} shows the password: ${text.slice(0, 300)}`).toBe(false)
  }
}

/** The error `promise` rejects with (fails if it resolves). */
async function failure(promise: Promise<unknown>): Promise<Error> {
  try {
    await promise
  } catch (err) {
    return err as Error
  }
  throw new Error('expected a failure')
}

/** Captures what is written to stdout and stderr while `fn` runs. */
async function captured<T>(fn: () => Promise<T>): Promise<{ value: T; logs: string }> {
  let logs = ''
  const out = process.stdout.write.bind(process.stdout)
  const err = process.stderr.write.bind(process.stderr)
  const tap = (chunk: unknown) => {
    logs += String(chunk)
    return true
  }
  process.stdout.write = tap as typeof process.stdout.write
  process.stderr.write = tap as typeof process.stderr.write
  try {
    return { value: await fn(), logs }
  } finally {
    process.stdout.write = out
    process.stderr.write = err
  }
}

describe('no error or object shows a password', () => {
  let port: number
  let server: ChildProcess
  let aclPort: number
  let aclServer: ChildProcess
  const fast = { connectTimeoutMs: 800, commandTimeoutMs: 800 }

  beforeAll(async () => {
    port = await freePort()
    server = await startRedis(port, ['--requirepass', 'the-real-one'])
    aclPort = await freePort()
    aclServer = await startRedis(aclPort, ['--user', USER, 'on', `>${SECRET}`, '~*', '&*', '+@all'])
  }, 30_000)
  afterAll(async () => {
    await stop(server)
    await stop(aclServer)
  })

  const cases: [string, () => Promise<unknown>][] = [
    ['a malformed URL', () => RedisStore.connect({ url: `redis://${USER}:${SECRET}@127.0.0.1:notaport` })],
    ['a URL with a bad scheme', () => RedisStore.connect({ url: `http://${USER}:${SECRET}@127.0.0.1:1` })],
    [
      'a host that does not resolve',
      () => RedisStore.connect({ url: `redis://${USER}:${SECRET}@nowhere.invalid:6379`, ...fast }),
    ],
    ['a port nobody listens on', () => RedisStore.connect({ url: `redis://${USER}:${SECRET}@127.0.0.1:1`, ...fast })],
    ['WRONGPASS (requirepass)', () => RedisStore.connect({ url: `redis://:${SECRET}@127.0.0.1:${port}`, ...fast })],
    [
      'WRONGPASS (ACL user)',
      () => RedisStore.connect({ url: `redis://${USER}:x${SECRET}@127.0.0.1:${aclPort}`, ...fast }),
    ],
    [
      'a user that does not exist',
      () => RedisStore.connect({ url: `redis://nobody:${SECRET}@127.0.0.1:${aclPort}`, ...fast }),
    ],
    [
      'TLS to a plain port',
      () => RedisStore.connect({ url: `rediss://${USER}:${SECRET}@127.0.0.1:${aclPort}`, ...fast }),
    ],
    [
      'a cluster seed that fails',
      () =>
        RedisStore.connect({
          cluster: [`redis://${USER}:${SECRET}@127.0.0.1:1`, `redis://:${SECRET}@127.0.0.1:2`],
          ...fast,
        }),
    ],
    ['cluster URLs that are malformed', () => RedisStore.connect({ cluster: [`redis://${USER}:${SECRET}@h:x`] })],
  ]

  for (const [label, attempt] of cases) {
    it(`${label}: a coded error, no password in it or in the logs`, async () => {
      const { value: err, logs } = await captured(() => failure(attempt()))
      expect(err, label).toHaveProperty('code')
      expect(['ERR_INVALID_CONFIG', 'ERR_STORE_UNAVAILABLE', 'ERR_TIMEOUT']).toContain(
        (err as unknown as { code: string }).code,
      )
      expectClean(label, err)
      for (const form of FORMS) expect(logs.includes(form), `${label}: logs`).toBe(false)
    }, 20_000)
  }

  it('NOAUTH, a store that goes down, and the store objects themselves', async () => {
    const { logs } = await captured(async () => {
      // NOAUTH: the ACL server's default user is off once a password is required
      const noauth = await failure(RedisStore.connect({ url: `redis://127.0.0.1:${port}`, ...fast }))
      expect(noauth).toHaveProperty('code')
      expectClean('NOAUTH', noauth)
      // a store that works, then loses its server
      const downPort = await freePort()
      const down = await startRedis(downPort, ['--user', USER, 'on', `>${SECRET}`, '~*', '&*', '+@all'])
      const url = `redis://${USER}:${SECRET}@127.0.0.1:${downPort}`
      const store = await RedisStore.connect({ url, ...fast, whenDown: 'error' })
      expectClean('a connected store', store)
      const limiter = new BucketLimiter(store, { name: 'secret', limit: 5, interval: 60_000 })
      const mutex = new ConcurrentLimiter(store, { name: 'secret', limit: 1 })
      expectClean('a limiter', limiter)
      expect((await limiter.check()).allowed).toBe(true)
      const events: unknown[] = []
      store.on('down', (e) => events.push(e))
      await stop(down)
      const lost = await failure(limiter.check())
      expect(['ERR_STORE_UNAVAILABLE', 'ERR_TIMEOUT']).toContain((lost as unknown as { code: string }).code)
      expectClean('a call while down', lost)
      expectClean('an acquire while down', await failure(mutex.acquire()))
      for (const e of events) expectClean('a down event', e)
      expectClean('a store that is down', store)
      await store.close()
      expectClean('a closed store', store)
    })
    for (const form of FORMS) expect(logs.includes(form), 'logs').toBe(false)
  }, 30_000)
})
