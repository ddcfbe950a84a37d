// The CLI (`npx sluice`) against a real Redis: each command's output and exit code.
import { spawnSync } from 'node:child_process'
import { join } from 'node:path'
import { beforeAll, describe, expect, it } from 'vitest'
import { BucketLimiter, ConcurrentLimiter, DistributedPacer, RedisStore, SlidingWindowLimiter } from '../lib/index.js'
import { clusterNodes, freshPrefix, redisUrl } from './helpers/stores.js'
import { freePort } from './helpers/servers.js'

const BIN = join(__dirname, '..', 'bin', 'sluice.js')

function sluice(args: string[], input?: string) {
  const r = spawnSync(process.execPath, [BIN, ...args], {
    encoding: 'utf8',
    input,
    env: { ...process.env, SLUICE_REDIS_URL: '' },
    timeout: 20_000,
  })
  return { code: r.status, out: r.stdout, err: r.stderr }
}

describe('npx sluice', () => {
  const prefix = freshPrefix()
  const at = ['--redis', redisUrl(), '--prefix', prefix]

  beforeAll(async () => {
    const store = await RedisStore.connect({ url: redisUrl(), keyPrefix: prefix })
    const api = new BucketLimiter(store, { name: 'api', limit: 3, interval: 'hour' })
    for (let i = 0; i < 5; i++) await api.check()
    await new DistributedPacer(store, { key: 'partner', qps: 5, maxBurst: 2 }).rateLimit()
    await new SlidingWindowLimiter(store, { name: 'api', windows: [{ limit: 10, intervalMs: 60_000 }] }).check()
    const mutex = new ConcurrentLimiter(store, { name: 'mutex', limit: 2 })
    await mutex.acquire() // held on purpose: inspect shows it
    await store.close() // writes the statistics
  })

  it('list: every limiter, most recent first; --json for scripts', () => {
    const r = sluice(['list', ...at, '--json'])
    expect(r.code).toBe(0)
    const all = JSON.parse(r.out)
    expect(all.map((l: { kind: string; name: string }) => `${l.kind}:${l.name}`).sort()).toEqual([
      'bucket:api',
      'concurrent:mutex',
      'pacer:partner',
      'sliding:api',
    ])
    const text = sluice(['list', ...at])
    expect(text.code).toBe(0)
    expect(text.out).toMatch(/^KIND +NAME +LAST USE +OPTIONS/)
    expect(text.out).toMatch(/bucket +api +\d+s ago +\{"limit":3,"intervalMs":3600000\}/)
  })

  it('stats and inspect: the numbers the store holds, and the live state', () => {
    const ambiguous = sluice(['stats', 'api', ...at])
    expect(ambiguous.code).toBe(2)
    expect(ambiguous.err).toMatch(/used by .*bucket.*sliding|used by .*sliding.*bucket/)
    const stats = sluice(['stats', 'api', '--kind', 'bucket', ...at, '--json'])
    expect(stats.code).toBe(0)
    expect(JSON.parse(stats.out).stats).toMatchObject({ admitted: 3, refused: 2, nearLimit: 1 })
    const inspect = sluice(['inspect', 'api', '--kind', 'bucket', ...at, '--json'])
    expect(inspect.code).toBe(0)
    const i = JSON.parse(inspect.out)
    expect(i.state).toMatchObject({ remaining: 0, limit: 3 })
    expect(i.options).toEqual({ limit: 3, intervalMs: 3_600_000 })
    const mutex = JSON.parse(sluice(['inspect', 'mutex', ...at, '--json']).out)
    expect(mutex.state).toEqual({ held: 1, waiting: 0, limit: 2, fill: 0.5 })
    const pacer = sluice(['inspect', 'partner', ...at])
    expect(pacer.code).toBe(0)
    expect(pacer.out).toMatch(/^pacer partner/)
    expect(pacer.out).toMatch(/admitted +1/)
  })

  it('reset: refuses without --yes when not asked on a terminal; with --yes it resets', () => {
    const refused = sluice(['reset', 'api', '--kind', 'bucket', ...at], '')
    expect(refused.code).toBe(2)
    expect(refused.err).toMatch(/--yes/)
    const done = sluice(['reset', 'api', '--kind', 'bucket', ...at, '--yes'])
    expect(done.code).toBe(0)
    expect(done.out).toMatch(/reset bucket api/)
    const after = JSON.parse(sluice(['inspect', 'api', '--kind', 'bucket', ...at, '--json']).out)
    expect(after.state.remaining).toBe(3)
    const notResettable = sluice(['reset', 'mutex', ...at, '--yes'])
    expect(notResettable.code).toBe(2)
    expect(notResettable.err).toMatch(/cannot be reset/)
  })

  it('works on a cluster too', async () => {
    const cprefix = freshPrefix()
    const store = await RedisStore.connect({ cluster: clusterNodes(), keyPrefix: cprefix })
    await new BucketLimiter(store, { name: 'c', limit: 1, interval: 'hour' }).check()
    await store.close()
    const args = clusterNodes().flatMap((u) => ['--cluster', u])
    const r = sluice(['stats', 'c', ...args, '--prefix', cprefix, '--json'])
    expect(r.code).toBe(0)
    expect(JSON.parse(r.out).stats.admitted).toBe(1)
  })

  it('a clear error and exit 1 when Redis is unreachable (no password shown); exit 2 for bad usage', async () => {
    const port = await freePort()
    const down = sluice(['list', '--redis', `redis://user:hunter2@127.0.0.1:${port}`])
    expect(down.code).toBe(1)
    expect(down.err).toMatch(/cannot reach Redis at redis:\/\/user:\*\*\*@127\.0\.0\.1/)
    expect(down.err).not.toContain('hunter2')
    for (const args of [
      [],
      ['frobnicate'],
      ['stats'],
      ['list', '--bogus'],
      ['list'],
      ['stats', 'x', '--kind', 'nope', ...at],
    ]) {
      const r = sluice(args)
      expect(r.code, args.join(' ')).toBe(2)
      expect(r.err).toMatch(/^sluice: /)
    }
    const missing = sluice(['stats', 'nothing', ...at])
    expect(missing.code).toBe(2)
    expect(missing.err).toMatch(/no limiter named "nothing"/)
    const help = sluice(['--help'])
    expect(help.code).toBe(0)
    expect(help.out).toMatch(/^usage: sluice/)
  })
})
