// Issue 15: TLS for real. Debian's redis-server with tls-port and a CA made here with openssl:
// rediss:// with `tls: { ca }` works for every kind of call (a semaphore hand-over included, over
// the TLS subscriber connection); a wrong CA or a missing client certificate fails fast with a
// code; rejectUnauthorized: false accepts the server; the key never shows in an error. On a TLS
// cluster too.
import { execFileSync, type ChildProcess } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import util from 'node:util'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { BucketLimiter, ConcurrentLimiter, RedisStore, SlidingWindowLimiter, type Store } from '../lib/entries/index.js'
import { freePort, startRedisIn, stop, timed } from './helpers/servers.js'

const dir = mkdtempSync(join(tmpdir(), 'sluice-tls-'))
const file = (name: string) => join(dir, name)
const read = (name: string) => readFileSync(file(name), 'utf8')

function openssl(...args: string[]) {
  execFileSync('openssl', args, { cwd: dir, stdio: 'ignore' })
}

/** A CA, and certificates it signs (EC keys: fast). */
function makeCerts() {
  const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes']
  for (const ca of ['ca', 'other-ca']) {
    openssl(
      'req',
      '-x509',
      '-new',
      ...ec,
      '-keyout',
      `${ca}.key`,
      '-out',
      `${ca}.crt`,
      '-days',
      '2',
      '-subj',
      `/CN=sluice test ${ca}`,
    )
  }
  writeFileSync(file('san.ext'), 'subjectAltName=IP:127.0.0.1,DNS:localhost\n')
  for (const [name, ca] of [
    ['server', 'ca'],
    ['client', 'ca'],
    ['stranger', 'other-ca'],
  ]) {
    openssl('req', '-new', ...ec, '-keyout', `${name}.key`, '-out', `${name}.csr`, '-subj', `/CN=${name}`)
    openssl(
      'x509',
      '-req',
      '-in',
      `${name}.csr`,
      '-CA',
      `${ca}.crt`,
      '-CAkey',
      `${ca}.key`,
      '-CAcreateserial',
      '-out',
      `${name}.crt`,
      '-days',
      '2',
      '-extfile',
      'san.ext',
    )
  }
}

const TLS_ARGS = () => [
  '--tls-cert-file',
  file('server.crt'),
  '--tls-key-file',
  file('server.key'),
  '--tls-ca-cert-file',
  file('ca.crt'),
]

/** A redis-server that speaks TLS only, on `port` (`--port 0`: no plain TCP). */
function startTlsRedis(port: number, extra: string[]): Promise<ChildProcess> {
  return startRedisIn(port, dir, ['--port', '0', '--tls-port', String(port), ...TLS_ARGS(), ...extra])
}

/** A bucket check and a semaphore hand-over (a release wakes a waiter over the TLS subscriber). */
async function works(store: Store) {
  expect((await new BucketLimiter(store, { name: 'tls', limit: 10, interval: 60_000 }).check()).allowed).toBe(true)
  const sliding = new SlidingWindowLimiter(store, { name: 'tls', windows: [{ limit: 10, intervalMs: 60_000 }] })
  expect((await sliding.check()).allowed).toBe(true)
  const mutex = new ConcurrentLimiter(store, { name: `tls${Date.now()}`, limit: 1, waitTimeoutMs: 5000 })
  const held = await mutex.acquire()
  const waiting = mutex.acquire()
  await new Promise((r) => setTimeout(r, 100))
  const t0 = performance.now()
  await held.release()
  await (await waiting).release()
  expect(performance.now() - t0).toBeLessThan(2000)
}

const fast = { connectTimeoutMs: 2000, commandTimeoutMs: 2000 }

beforeAll(() => makeCerts(), 60_000)
afterAll(() => rmSync(dir, { recursive: true, force: true }))

describe('rediss:// on a standalone server', () => {
  let server: ChildProcess
  let strict: ChildProcess
  let url: string
  let strictUrl: string

  beforeAll(async () => {
    const port = await freePort()
    server = await startTlsRedis(port, ['--tls-auth-clients', 'no'])
    url = `rediss://127.0.0.1:${port}`
    const strictPort = await freePort()
    strict = await startTlsRedis(strictPort, ['--tls-auth-clients', 'yes'])
    strictUrl = `rediss://127.0.0.1:${strictPort}`
  }, 30_000)
  afterAll(async () => {
    await stop(server)
    await stop(strict)
  })

  it('with the CA given: every kind of call works (as a string, a Buffer or a list)', async () => {
    for (const ca of [read('ca.crt'), readFileSync(file('ca.crt')), [read('other-ca.crt'), read('ca.crt')]]) {
      const store = await RedisStore.connect({ url, tls: { ca }, ...fast })
      await works(store)
      await store.close()
    }
  }, 30_000)

  it('a wrong CA fails fast with a code; rejectUnauthorized: false accepts the server', async () => {
    const r = await timed(RedisStore.connect({ url, tls: { ca: read('other-ca.crt') }, ...fast }))
    expect((r.error as { code: string }).code).toBe('ERR_STORE_UNAVAILABLE')
    expect(r.ms).toBeLessThan(fast.connectTimeoutMs + 500)
    // no CA: the system's roots do not know this test CA either
    const system = await timed(RedisStore.connect({ url, ...fast }))
    expect((system.error as { code: string }).code).toBe('ERR_STORE_UNAVAILABLE')
    const store = await RedisStore.connect({
      url,
      tls: { ca: read('other-ca.crt'), rejectUnauthorized: false },
      ...fast,
    })
    await works(store)
    await store.close()
  }, 30_000)

  it('client certificates: required by the server, refused without or with a stranger, accepted with ours', async () => {
    const none = await timed(RedisStore.connect({ url: strictUrl, tls: { ca: read('ca.crt') }, ...fast }))
    expect((none.error as { code: string }).code).toBe('ERR_STORE_UNAVAILABLE')
    const key = read('stranger.key')
    const stranger = await timed(
      RedisStore.connect({ url: strictUrl, tls: { ca: read('ca.crt'), cert: read('stranger.crt'), key }, ...fast }),
    )
    expect((stranger.error as { code: string }).code).toBe('ERR_STORE_UNAVAILABLE')
    for (const err of [none.error, stranger.error]) {
      const text = util.inspect(err, { depth: 10, showHidden: true }) + String((err as Error).stack)
      expect(text).not.toContain('PRIVATE KEY')
      expect(text).not.toContain(key.split('\n')[1])
    }
    const store = await RedisStore.connect({
      url: strictUrl,
      tls: { ca: read('ca.crt'), cert: read('client.crt'), key: read('client.key') },
      ...fast,
    })
    expect(util.inspect(store, { depth: 10, showHidden: true })).not.toContain('PRIVATE KEY')
    await works(store)
    await store.close()
  }, 30_000)

  it('bad tls options are ERR_INVALID_CONFIG, and the key is never quoted', async () => {
    const key = read('client.key')
    for (const tls of [
      'ca',
      { ca: 7 },
      { ca: [] },
      { nope: 1 },
      { cert: read('client.crt') },
      { ca: 'not pem' },
      { ca: read('ca.crt'), cert: read('client.crt'), key: 'not a key' },
      { rejectUnauthorized: 'no' },
    ]) {
      const err = await RedisStore.connect({ url, tls: tls as never, ...fast }).catch((e) => e)
      expect(err.code, JSON.stringify(tls).slice(0, 60)).toBe('ERR_INVALID_CONFIG')
      expect(String(err.message)).not.toContain(key.split('\n')[1])
    }
    // tls options with a plain redis:// URL are a mistake, not ignored
    const plain = await RedisStore.connect({ url: 'redis://127.0.0.1:1', tls: { ca: read('ca.crt') }, ...fast }).catch(
      (e) => e,
    )
    expect(plain.code).toBe('ERR_INVALID_CONFIG')
  })
})

describe('rediss:// on a TLS cluster', () => {
  const nodes: ChildProcess[] = []
  let urls: string[] = []

  beforeAll(async () => {
    const ports = [await freePort(), await freePort(), await freePort()]
    for (const p of ports) {
      const bus = await freePort()
      const d = mkdtempSync(join(dir, 'node-'))
      nodes.push(
        await startTlsRedis(p, [
          '--dir',
          d,
          '--cluster-enabled',
          'yes',
          '--cluster-port',
          String(bus),
          '--cluster-config-file',
          'nodes.conf',
          '--tls-cluster',
          'yes',
          '--tls-auth-clients',
          'no',
        ]),
      )
    }
    execFileSync(
      'redis-cli',
      [
        '--tls',
        '--cacert',
        file('ca.crt'),
        '--cluster',
        'create',
        ...ports.map((p) => `127.0.0.1:${p}`),
        '--cluster-replicas',
        '0',
        '--cluster-yes',
      ],
      { stdio: 'ignore' },
    )
    for (let i = 0; i < 200; i++) {
      const info = execFileSync(
        'redis-cli',
        ['--tls', '--cacert', file('ca.crt'), '-p', String(ports[0]), 'CLUSTER', 'INFO'],
        {
          encoding: 'utf8',
        },
      )
      if (info.includes('cluster_state:ok')) break
      await new Promise((r) => setTimeout(r, 50))
    }
    urls = ports.map((p) => `rediss://127.0.0.1:${p}`)
  }, 60_000)
  afterAll(async () => {
    for (const n of nodes) await stop(n)
  })

  it('every kind of call works across the slots; a wrong CA fails fast with a code', async () => {
    const store = await RedisStore.connect({ cluster: urls, tls: { ca: read('ca.crt') }, ...fast })
    await works(store)
    // names on several slots
    for (let i = 0; i < 20; i++) await new BucketLimiter(store, { name: `n${i}`, limit: 5, interval: 60_000 }).check()
    await store.close()
    const wrong = await timed(RedisStore.connect({ cluster: urls, tls: { ca: read('other-ca.crt') }, ...fast }))
    expect((wrong.error as { code: string }).code).toBe('ERR_STORE_UNAVAILABLE')
    expect(wrong.ms).toBeLessThan(fast.connectTimeoutMs + 500)
  }, 60_000)
})
