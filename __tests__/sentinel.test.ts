// Issue 28: a master behind Redis Sentinel. 1 master, 1 replica, 3 sentinels (real processes);
// 4 client processes check 60 WindowLimiters about 4,000 times a second through a manual
// `SENTINEL FAILOVER` and through a SIGKILL of the master. Every decision settles within its
// deadline with an answer or a store code, the store follows the new master without a restart
// (the pool and the direct lane, at the sentinels' +switch-master), and over-admission is
// counted: 0 for the manual failover; what asynchronous replication lost for the SIGKILL.
import { fork, type ChildProcess } from 'node:child_process'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { RedisStore, WindowLimiter } from '../lib/entries/index.js'
import { freshPrefix } from './helpers/stores.js'
import { startSentinelSetup } from './helpers/sentinel.js'
import { eventually } from './helpers/servers.js'

const WORKER = join(__dirname, 'helpers', 'failover-worker.js')
const TIMEOUT_MS = 500
const LIMIT = 300
const NAMES = Array.from({ length: 60 }, (_, i) => `n${i}`)
const PASSWORD = 'data-s3cret'
const SENTINEL_PASSWORD = 'sentinel-s3cret'

interface Result {
  admitted: Record<string, number>
  failed: Record<string, number>
  answeredAt: Record<string, number>
  codes: Record<string, number>
  messages: Record<string, number>
  decisions: number
  slowest: number
  direct: number
  crashed?: string
}

type Setup = Awaited<ReturnType<typeof startSentinelSetup>>

describe('RedisStore.connect({ sentinel }): options checked before any connection', () => {
  const sentinels = ['redis://127.0.0.1:1']
  it.each([
    [{ sentinel: 'x' }],
    [{ sentinel: { name: 'm' } }],
    [{ sentinel: { name: '', sentinels } }],
    [{ sentinel: { name: 'a b', sentinels } }],
    [{ sentinel: { name: 'm', sentinels: [] } }],
    [{ sentinel: { name: 'm', sentinels: ['http://h:1'] } }],
    [{ sentinel: { name: 'm', sentinels: ['redis://u:pw@h:1'] } }],
    [{ sentinel: { name: 'm', sentinels: ['redis://h:99999'] } }],
    [{ sentinel: { name: 'm', sentinels, password: 5 } }],
    [{ sentinel: { name: 'm', sentinels, sentinelPassword: '' } }],
    [{ sentinel: { name: 'm', sentinels, other: 1 } }],
    [{ sentinel: { name: 'm', sentinels }, url: 'redis://127.0.0.1:1' }],
    [{ sentinel: { name: 'm', sentinels }, cluster: ['redis://127.0.0.1:1'] }],
  ])('%j: ERR_INVALID_CONFIG', async (options) => {
    await expect(RedisStore.connect(options as never)).rejects.toMatchObject({ code: 'ERR_INVALID_CONFIG' })
  })

  it('a password is never shown in the error', async () => {
    const err = await RedisStore.connect({
      sentinel: { name: 'm', sentinels: ['redis://u:hunter2@h:1'], password: 'hunter2' },
    } as never).catch((e) => e)
    expect(err.code).toBe('ERR_INVALID_CONFIG')
    expect(err.message).not.toContain('hunter2')
  })
})

describe('behind Sentinel (1 master, 1 replica, 3 sentinels, 4 processes)', () => {
  let setup: Setup
  const sentinel = () => ({
    name: setup.name,
    sentinels: setup.sentinels,
    password: PASSWORD,
    sentinelPassword: SENTINEL_PASSWORD,
  })

  beforeAll(async () => {
    setup = await startSentinelSetup({ password: PASSWORD, sentinelPassword: SENTINEL_PASSWORD })
  }, 60_000)
  afterAll(() => setup?.stopAll())
  const sentinelPort = () => Number(setup.sentinels[0].split(':')[2])

  /** Runs 4 workers; `during()` runs once they are all checking; stops them `afterMs` later. */
  async function load(prefix: string, during: () => Promise<void>, afterMs: number) {
    const workers: ChildProcess[] = []
    const ready: Promise<void>[] = []
    const results: Promise<Result>[] = []
    for (let i = 0; i < 4; i++) {
      const w = fork(WORKER, [
        JSON.stringify({ sentinel: sentinel(), prefix, names: NAMES, limit: LIMIT, commandTimeoutMs: TIMEOUT_MS }),
      ])
      workers.push(w)
      ready.push(new Promise((r) => w.once('message', () => r())))
      results.push(new Promise((r) => w.on('message', (m) => m !== 'ready' && r(m as Result))))
    }
    await Promise.all(ready)
    await new Promise((r) => setTimeout(r, 1000))
    await during()
    await new Promise((r) => setTimeout(r, afterMs))
    for (const w of workers) w.send('stop')
    const all = await Promise.all(results)
    for (const r of all) expect(r.crashed).toBeUndefined()
    const sum = (pick: (r: Result) => Record<string, number>) =>
      Object.fromEntries(NAMES.map((n) => [n, all.reduce((s, r) => s + pick(r)[n], 0)]))
    const codes: Record<string, number> = {}
    for (const r of all) for (const [c, k] of Object.entries(r.codes)) codes[c] = (codes[c] || 0) + k
    const admitted = sum((r) => r.admitted)
    return {
      admitted,
      failed: sum((r) => r.failed),
      answeredAt: Object.fromEntries(NAMES.map((n) => [n, Math.max(...all.map((r) => r.answeredAt[n]))])),
      codes,
      messages: Object.assign({}, ...all.map((r) => r.messages)),
      decisions: all.reduce((s, r) => s + r.decisions, 0),
      slowest: Math.max(...all.map((r) => r.slowest)),
      direct: all.map((r) => r.direct),
      over: NAMES.reduce((s, n) => s + Math.max(0, admitted[n] - LIMIT), 0),
    }
  }

  it('connects to the master the sentinels name (pool and direct lane), with both passwords', async () => {
    const store = await RedisStore.connect({ sentinel: sentinel(), keyPrefix: freshPrefix() })
    try {
      const l = new WindowLimiter(store, { name: 'hello', limit: 2, interval: 60_000 })
      expect((await l.check()).allowed).toBe(true)
      expect(store.batching.direct).toBeGreaterThan(0)
      const keys = await setup.cli(await setup.master(), 'KEYS', `${store.keyPrefix}:*`)
      expect(keys).toContain('hello')
    } finally {
      await store.close()
    }
  })

  it('the pool alone (directConnection: false) follows a SENTINEL FAILOVER', async () => {
    const prefix = freshPrefix()
    const store = await RedisStore.connect({ sentinel: sentinel(), keyPrefix: prefix, directConnection: false })
    try {
      const before = await setup.master()
      const l = new WindowLimiter(store, { name: 'pool', limit: 1000, interval: 60_000 })
      expect((await l.check()).allowed).toBe(true)
      expect(await setup.sentinelCli(sentinelPort(), 'SENTINEL', 'FAILOVER', setup.name)).toBe('OK')
      await eventually(async () => expect(await setup.master()).not.toBe(before), 20_000)
      await eventually(async () => expect((await l.check()).allowed).toBe(true), 5_000)
      // the call was counted on the new master
      expect(await setup.cli(await setup.master(), 'KEYS', `${prefix}:*`)).toContain('pool')
      expect(store.batching.direct).toBe(0)
      await setup.ready()
    } finally {
      await store.close()
    }
  }, 60_000)

  it('a wrong sentinel password: the store cannot connect (a store code, the password not shown)', async () => {
    const err = await RedisStore.connect({
      sentinel: { ...sentinel(), sentinelPassword: 'wrong-one' },
      connectTimeoutMs: 2000,
    }).catch((e) => e)
    expect(err.code).toBe('ERR_STORE_UNAVAILABLE')
    expect(err.message).not.toContain('wrong-one')
    expect(err.message).not.toContain(PASSWORD)
  })

  it('SENTINEL FAILOVER under load: every decision settles, the store follows at once, 0 over-admission', async () => {
    await setup.ready()
    const prefix = freshPrefix()
    const before = await setup.master()
    let failedOverAt = 0
    const r = await load(
      prefix,
      async () => {
        expect(await setup.sentinelCli(sentinelPort(), 'SENTINEL', 'FAILOVER', setup.name)).toBe('OK')
        failedOverAt = Date.now()
      },
      6000,
    )
    const after = await setup.master()
    const failed = NAMES.reduce((s, n) => s + r.failed[n], 0)
    console.log(
      `sentinel manual failover ${before} -> ${after}: ${r.decisions} decisions, ${failed} failed, codes ${JSON.stringify(r.codes)} ` +
        `${JSON.stringify(r.messages)}, slowest ${r.slowest.toFixed(0)} ms, over-admitted ${r.over} (limit ${LIMIT} x ${NAMES.length}), ` +
        `direct-lane calls per process ${r.direct.join(', ')}`,
    )
    expect(after).not.toBe(before)
    expect(r.slowest).toBeLessThan(TIMEOUT_MS + 500)
    for (const code of Object.keys(r.codes)) expect(['ERR_STORE_UNAVAILABLE', 'ERR_TIMEOUT']).toContain(code)
    for (const n of NAMES) expect(r.answeredAt[n], n).toBeGreaterThan(failedOverAt + 1000)
    expect(r.over).toBe(0)
    for (const d of r.direct) expect(d).toBeGreaterThan(0)
    await setup.ready()
  }, 90_000)

  it('SIGKILL of the master under load: every decision settles, the store follows the promotion, over-admission counted', async () => {
    await setup.ready()
    const prefix = freshPrefix()
    const victim = await setup.master()
    let killedAt = 0
    const r = await load(
      prefix,
      async () => {
        await setup.kill(victim)
        killedAt = Date.now()
      },
      8000,
    )
    const after = await setup.master()
    const failed = NAMES.reduce((s, n) => s + r.failed[n], 0)
    console.log(
      `sentinel SIGKILL of the master ${victim} -> ${after}: ${r.decisions} decisions, ${failed} failed, codes ${JSON.stringify(r.codes)}, ` +
        `slowest ${r.slowest.toFixed(0)} ms, over-admitted ${r.over} (limit ${LIMIT} x ${NAMES.length}; asynchronous replication), ` +
        `direct-lane calls per process ${r.direct.join(', ')}`,
    )
    expect(after).not.toBe(victim)
    expect(r.slowest).toBeLessThan(TIMEOUT_MS + 500)
    for (const code of Object.keys(r.codes)) expect(['ERR_STORE_UNAVAILABLE', 'ERR_TIMEOUT']).toContain(code)
    // every name answered by the new master
    for (const n of NAMES) expect(r.answeredAt[n], n).toBeGreaterThan(killedAt + 1000)
    // what the dead master had counted and not replicated is admitted again, at most once
    for (const n of NAMES) expect(r.admitted[n], n).toBeLessThanOrEqual(2 * LIMIT)
  }, 90_000)
})
