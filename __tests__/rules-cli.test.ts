// `sluice rules` (bin/rules.js): the store's rules from a shell, against a real Redis; what it
// prints is escaped (a note or a name is hostile input), bad input is a usage error (exit 2)
// and writes nothing.
import { createRequire } from 'node:module'
import { describe, expect, it } from 'vitest'
import { RedisStore } from '../lib/entries/index.js'
import { freshPrefix, redisUrl } from './helpers/stores.js'

const { main } = createRequire(__filename)('../bin/sluice.js') as {
  main: (argv: string[], out: (s: string) => void, err: (s: string) => void) => Promise<number>
}

async function sluice(argv: string[]) {
  const out: string[] = []
  const err: string[] = []
  const code = await main(
    argv,
    (s) => out.push(s),
    (s) => err.push(s),
  )
  return { code, out: out.join('\n'), err: err.join('\n') }
}

describe('issue-39-rules-cli', () => {
  it('set, list, history, delete; names and notes escaped; bad input exits 2 with nothing written', async () => {
    const prefix = freshPrefix()
    const at = ['--redis', redisUrl(), '--store-prefix', prefix]
    const set = await sluice([
      'rules',
      'set',
      '--kind',
      'bucket',
      '--name',
      'user@example.com',
      '--limit',
      '5',
      '--note',
      'ops\x1b[2J',
      ...at,
    ])
    expect(set).toMatchObject({ code: 0, out: 'set bucket "user@example.com": limit=5  note "ops\\x1b[2J"' })
    expect(
      (await sluice(['rules', 'set', '--door', 'api', '--key-prefix', '10.', '--deny', '--ttl', '1h', ...at])).code,
    ).toBe(0)
    // a process of the app sees both (the table loaded at connect)
    const app = await RedisStore.connect({ url: redisUrl(), keyPrefix: prefix })
    try {
      expect((app as any).rules._forName('bucket', 'user@example.com')?.rule).toEqual({ limit: 5, note: 'ops\x1b[2J' })
      expect((app as any).rules._forDoorKey('api', '10.0.0.7')?.rule.access).toBe('deny')
    } finally {
      await app.close()
    }
    const list = await sluice(['rules', 'list', ...at])
    expect(list.code).toBe(0)
    expect(list.out).toContain('bucket "user@example.com": limit=5')
    expect(list.out).toMatch(/door "api" keys starting "10\.": access=deny {2}until \d{4}-/)
    expect(list.out).not.toContain('\x1b')
    const json = JSON.parse((await sluice(['rules', 'list', '--json', ...at])).out)
    expect(json).toHaveLength(2)
    // bad input: a field the kind does not have, a target the CLI cannot read, a bad duration
    for (const bad of [
      ['rules', 'set', '--kind', 'bucket', '--name', 'x', '--qps', '5'],
      ['rules', 'set', '--kind', 'nope', '--name', 'x', '--limit', '5'],
      ['rules', 'set', '--limit', '5'],
      ['rules', 'set', '--kind', 'bucket', '--name', 'x', '--limit', '5', '--ttl', 'soon'],
      ['rules', 'list', '--kind', 'bucket'],
      ['rules', 'frobnicate'],
    ]) {
      const r = await sluice([...bad, ...at])
      expect(r.code, bad.join(' ')).toBe(2)
      expect(r.err).toMatch(/^sluice: /)
    }
    expect(JSON.parse((await sluice(['rules', 'list', '--json', ...at])).out)).toHaveLength(2)
    const history = await sluice(['rules', 'history', ...at])
    expect(history.out.split('\n')).toHaveLength(2)
    expect((await sluice(['rules', 'delete', '--kind', 'bucket', '--name', 'user@example.com', ...at])).out).toBe(
      'deleted the rule of bucket "user@example.com"',
    )
    expect((await sluice(['rules', 'delete', '--kind', 'bucket', '--name', 'user@example.com', ...at])).out).toBe(
      'no rule for bucket "user@example.com"',
    )
    expect((await sluice(['rules', '--help'])).code).toBe(0)
  })

  it('bans: listed escaped, apart from the rules; unban lifts one in every process', async () => {
    const prefix = freshPrefix()
    const at = ['--redis', redisUrl(), '--store-prefix', prefix]
    const app = await RedisStore.connect({ url: redisUrl(), keyPrefix: prefix })
    try {
      // what a door's `ban` writes (lib/doors/http/door.js _banAfter)
      await (app as any).rules._ban('login', 'evil\x1b[31m', Date.now() + 3_600_000)
      const bans = await sluice(['rules', 'bans', ...at])
      expect(bans.out).toMatch(/^door "login" key "evil\\x1b\[31m": access=deny {2}until \d{4}-/)
      expect((await sluice(['rules', 'list', ...at])).out).toBe('no rules')
      expect((await sluice(['rules', 'unban', '--door', 'login', ...at])).code).toBe(2)
      const lifted = await sluice(['rules', 'unban', '--door', 'login', '--key', 'evil\x1b[31m', ...at])
      expect(lifted.out).toBe('lifted the ban of door "login" key "evil\\x1b[31m"')
      expect((await sluice(['rules', 'bans', ...at])).out).toBe('no bans')
      const end = Date.now() + 3000
      while ((app as any).rules._forDoorKey('login', 'evil\x1b[31m') !== undefined && Date.now() < end) {
        await new Promise((r) => setTimeout(r, 10))
      }
      expect((app as any).rules._forDoorKey('login', 'evil\x1b[31m')).toBeUndefined()
    } finally {
      await app.close()
    }
  })
})
