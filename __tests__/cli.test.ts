// The CLI (`npx sluice`) against a real Redis: each command's output and exit code.
import { spawnSync } from 'node:child_process'
import { join } from 'node:path'
import { beforeAll, describe, expect, it } from 'vitest'
import {
  BucketLimiter,
  ConcurrentLimiter,
  DistributedPacer,
  RedisStore,
  SlidingWindowLimiter,
} from '../lib/entries/index.js'
import { createRequire } from 'node:module'
import { HAS_CLUSTER, clusterNodes, freshPrefix, redisUrl } from './helpers/stores.js'
import { freePort } from './helpers/servers.js'

const BIN = join(__dirname, '..', 'bin', 'sluice.js')

// lib/doors/inspect.js is internal (no .d.ts): the helpers the CLI shows names and URLs with
const { jsonText, maskUrl, quoted, redactIn, termText } = createRequire(__filename)('../lib/doors/inspect.js') as {
  jsonText: (value: unknown, indent?: number) => string
  maskUrl: (url: string) => string
  redactIn: (text: string, url: string) => string
  quoted: (s: string) => string
  termText: (s: string) => string
}

function sluice(args: string[], input?: string, env: NodeJS.ProcessEnv = {}) {
  const r = spawnSync(process.execPath, [BIN, ...args], {
    encoding: 'utf8',
    input,
    env: { ...process.env, SLUICE_REDIS_URL: '', REDIS_URL: '', ...env },
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

  it('issue-38-last-use: list and inspect say how late a last use can be', () => {
    const list = sluice(['list', ...at])
    expect(list.code).toBe(0)
    // on stderr: stdout stays one line per limiter
    expect(list.err.trimEnd()).toMatch(
      /^LAST USE: as of the last statistics flush: up to statsFlushMs \(5 s by default\) late$/m,
    )
    expect(list.out).not.toMatch(/minute late/)
    const inspect = sluice(['inspect', 'partner', ...at])
    expect(inspect.code).toBe(0)
    expect(inspect.out.split('\n')[0]).toMatch(
      /^pacer partner {2}\(last use \d+s ago, as of the last statistics flush: up to statsFlushMs \(5 s by default\) late\)$/,
    )
    // --json keeps its fields (lastUse, lastUseAgo) and no prose
    expect(JSON.parse(sluice(['list', ...at, '--json']).out)[0]).toHaveProperty('lastUse')
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

  it.skipIf(!HAS_CLUSTER)('works on a cluster too', async () => {
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
    expect(down.err).toMatch(/cannot reach Redis at redis:\/\/\*\*\*@127\.0\.0\.1/)
    expect(down.err).not.toContain('hunter2')
    for (const args of [[], ['frobnicate'], ['stats'], ['list', '--bogus'], ['stats', 'x', '--kind', 'nope', ...at]]) {
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

  it('issue-38-cli-version-and-redis: --version; --redis defaults to $SLUICE_REDIS_URL, then $REDIS_URL, then localhost, and says which', async () => {
    const version = sluice(['--version'])
    expect(version.code).toBe(0)
    expect(version.out.trim()).toBe(`sluice ${createRequire(__filename)('../package.json').version}`)
    expect(sluice(['-V']).out).toBe(version.out)
    // the order, without connecting
    const { parseArgs } = createRequire(__filename)('../bin/sluice.js') as {
      parseArgs(argv: string[]): { redis: string | null; redisFrom: string | null }
    }
    const saved = { s: process.env.SLUICE_REDIS_URL, r: process.env.REDIS_URL }
    try {
      process.env.SLUICE_REDIS_URL = 'redis://a:1'
      process.env.REDIS_URL = 'redis://b:2'
      expect(parseArgs(['list'])).toMatchObject({ redis: 'redis://a:1', redisFrom: '$SLUICE_REDIS_URL' })
      expect(parseArgs(['list', '--redis', 'redis://c:3'])).toMatchObject({
        redis: 'redis://c:3',
        redisFrom: '--redis',
      })
      process.env.SLUICE_REDIS_URL = ''
      expect(parseArgs(['list'])).toMatchObject({ redis: 'redis://b:2', redisFrom: '$REDIS_URL' })
      process.env.REDIS_URL = ''
      expect(parseArgs(['list'])).toMatchObject({ redis: 'redis://127.0.0.1:6379', redisFrom: 'the default' })
      expect(parseArgs(['list', '--cluster', 'redis://d:4'])).toMatchObject({ redis: null, redisFrom: null })
    } finally {
      process.env.SLUICE_REDIS_URL = saved.s
      process.env.REDIS_URL = saved.r
    }
    // it says which one it used, on stderr (stdout stays the command's: --json parses)
    const used = sluice(['list', '--json'], undefined, { REDIS_URL: redisUrl() })
    expect(used.code).toBe(0)
    expect(used.err).toContain(`Redis at ${maskUrl(redisUrl())} (from $REDIS_URL)`)
    expect(() => JSON.parse(used.out)).not.toThrow()
    const port = await freePort()
    const down = sluice(['list'], undefined, { REDIS_URL: `redis://127.0.0.1:${port}` })
    expect(down.code).toBe(1)
    expect(down.err).toContain(`cannot reach Redis at redis://127.0.0.1:${port} (from $REDIS_URL)`)
  })
})

describe('issue-38-leaky-reads-as-its-name: the CLI and dashboard say what a leaky bucket admits', () => {
  const { limitText } = createRequire(__filename)('../lib/doors/inspect.js') as {
    limitText(info: { kind: string; options: Record<string, number> }): string
  }
  it('a burst of the limit, then one every interval / limit (not "4 / 1s", which reads as 4 in any second)', () => {
    expect(limitText({ kind: 'leaky', options: { limit: 4, intervalMs: 1000 } })).toBe(
      'a burst of 4, then one every 250ms',
    )
    expect(limitText({ kind: 'leaky', options: { limit: 20, intervalMs: 60_000 } })).toBe(
      'a burst of 20, then one every 3s',
    )
    expect(limitText({ kind: 'leaky', options: { limit: 3, intervalMs: 1000 } })).toBe(
      'a burst of 3, then one every 333.3ms',
    )
    expect(limitText({ kind: 'points', options: { points: 1000, intervalMs: 60_000 } })).toBe(
      'a burst of 1000 points, then one every 60ms',
    )
    // the counters keep their per-interval text: at most the limit in each interval
    expect(limitText({ kind: 'bucket', options: { limit: 4, intervalMs: 1000 } })).toBe('4 / 1s')
  })
})

/** A character a terminal acts on: C0 but LF, DEL, C1, bidi controls, line separators. */
const RAW = /[\x00-\x09\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]/

describe('issue 24: what the CLI prints is safe for a terminal', () => {
  it('issue-24-term-text: control characters, DEL, C1, bidi controls and backslashes are shown escaped', () => {
    expect(termText('a\x1b[2J\x1b]52;c;aGk=\x07\r\nb\u009b31m\x7f\u202e\u2066\u2069\u2028\\ 李')).toBe(
      'a\\x1b[2J\\x1b]52;c;aGk=\\x07\\r\\nb\\x9b31m\\x7f\\u202e\\u2066\\u2069\\u2028\\\\ 李',
    )
    expect(termText('\x00\t\u0085\ud800x\ud83d\ude00')).toBe('\\x00\\t\\x85\\ud800x\ud83d\ude00')
    expect(termText('plain user_42 ключ')).toBe('plain user_42 ключ')
    expect(quoted('say "hi"\n')).toBe('"say \\"hi\\"\\n"')
    // JSON keeps its value and loses the raw characters
    const value = { name: 'x\x1b\u009b\u202e\x7f\n\u2028' }
    const text = jsonText(value, 2)
    expect(text).not.toMatch(RAW)
    expect(JSON.parse(text)).toEqual(value)
  })

  it('issue-24-mask-url: the whole userinfo is masked, up to the last @', () => {
    expect(maskUrl('redis://:S3cr@tP4ss@host:6379/0')).toBe('redis://***@host:6379/0')
    expect(maskUrl('redis://user:pw@host')).toBe('redis://***@host')
    expect(maskUrl('rediss://onlyuser@host')).toBe('rediss://***@host')
    expect(maskUrl('redis://u:pa/ss?x#y@host:1')).toBe('redis://***@host:1')
    expect(maskUrl('redis://host:6379')).toBe('redis://host:6379')
    expect(maskUrl('u:pw@host')).toBe('***@host')
    // a message that quotes the URL as given (Rust's Debug quoting escapes " and \ as JSON does)
    const url = 'redis://us"er:pa/s\\s@host:1'
    expect(redactIn(`invalid Redis URL ${JSON.stringify(url)}: EmptyHost`, url)).toBe(
      'invalid Redis URL "redis://***@host:1": EmptyHost',
    )
  })

  it('issue-24-mask-url-cli: a password holding @ is masked whole when Redis cannot be reached', async () => {
    const port = await freePort()
    for (const args of [
      ['list', '--redis', `redis://default:S3cr@tP4ss@127.0.0.1:${port}`],
      ['list', '--cluster', `redis://default:S3cr@tP4ss@127.0.0.1:${port}`],
      ['dashboard', '--port', '0', '--redis', `redis://:S3cr@tP4ss@127.0.0.1:${port}`],
      // a password holding / ? # (the URL parser ends the host there: the store's message quotes it)
      ['list', '--redis', `redis://:S3cr/tP4ss@127.0.0.1:${port}`],
      ['list', '--redis', `redis://:S3cr#tP4ss@127.0.0.1:${port}`],
      ['list', '--redis', `redis://default:S3cr?t"P4ss@127.0.0.1:${port}`],
    ]) {
      const r = sluice(args)
      expect(r.code, args.join(' ')).toBe(1)
      expect(r.err).toContain(`cannot reach Redis at redis://***@127.0.0.1:${port}`)
      expect(r.out + r.err, args.join(' ')).not.toMatch(/S3cr|P4ss/)
    }
  })

  describe('names from the store', () => {
    const prefix = freshPrefix()
    const at = ['--redis', redisUrl(), '--prefix', prefix]
    // pacer keys are any string; each shown as the terminal must show it
    const KEYS: [string, string][] = [
      ['clear\x1b[2J\x1b[H', 'clear\\x1b[2J\\x1b[H'],
      ['clip\x1b]52;c;aGVsbG8=\x07', 'clip\\x1b]52;c;aGVsbG8=\\x07'],
      ['rows\r\nbucket  admin  1s ago  {}', 'rows\\r\\nbucket  admin  1s ago  {}'],
      ['csi\u009b31m', 'csi\\x9b31m'],
      ['bidi\u202etxt.exe\u2066x\u2069', 'bidi\\u202etxt.exe\\u2066x\\u2069'],
      ['del\x7f\tq', 'del\\x7f\\tq'],
    ]

    beforeAll(async () => {
      const store = await RedisStore.connect({ url: redisUrl(), keyPrefix: prefix })
      for (const [key] of KEYS) await new DistributedPacer(store, { key, qps: 5, maxBurst: 2 }).rateLimit()
      await store.close() // writes the registry and the statistics
    })

    it('issue-24-cli-escapes: list, stats, inspect, reset and their errors print every name escaped', () => {
      const list = sluice(['list', ...at])
      expect(list.code).toBe(0)
      expect(list.out).not.toMatch(RAW)
      expect(list.out.trimEnd().split('\n')).toHaveLength(1 + KEYS.length) // no fake row
      for (const [, shown] of KEYS)
        expect(list.out).toMatch(new RegExp(`^pacer +${escapeRegExp(shown)} +\\d+s ago`, 'm'))
      const json = sluice(['list', ...at, '--json'])
      expect(json.out).not.toMatch(RAW)
      expect(
        JSON.parse(json.out)
          .map((l: { name: string }) => l.name)
          .sort(),
      ).toEqual(KEYS.map(([k]) => k).sort())
      for (const [key, shown] of KEYS) {
        const stats = sluice(['stats', key, ...at])
        expect(stats.code, shown).toBe(0)
        expect(stats.out).not.toMatch(RAW)
        const statsJson = sluice(['stats', key, ...at, '--json'])
        expect(statsJson.out).not.toMatch(RAW)
        expect(JSON.parse(statsJson.out).name).toBe(key)
        const inspect = sluice(['inspect', key, ...at])
        expect(inspect.code, shown).toBe(0)
        expect(inspect.out).not.toMatch(RAW)
        expect(inspect.code).toBe(0)
        expect(inspect.out.split('\n')[0]).toMatch(new RegExp(`^pacer ${escapeRegExp(shown)}  \\(last use`))
        const inspectJson = sluice(['inspect', key, ...at, '--json'])
        expect(inspectJson.out).not.toMatch(RAW)
        expect(JSON.parse(inspectJson.out).name).toBe(key)
        // a pacer cannot be reset: the error names the kind only
        const reset = sluice(['reset', key, ...at, '--yes'])
        expect(reset.code).toBe(2)
        expect(reset.err).not.toMatch(RAW)
        // no such name (another kind): the error quotes it escaped
        const missing = sluice(['stats', key, '--kind', 'bucket', ...at])
        expect(missing.code).toBe(2)
        expect(missing.err).not.toMatch(RAW)
        expect(missing.err).toContain(`no limiter named "${shown}" of kind bucket`)
      }
      const usage = sluice(['stats', 'a', 'b\x1b[2J', ...at])
      expect(usage.code).toBe(2)
      expect(usage.err).toContain('unexpected argument "b\\x1b[2J"')
      expect(usage.err).not.toMatch(RAW)
    })
  })
})

function escapeRegExp(s: string) {
  return s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')
}
