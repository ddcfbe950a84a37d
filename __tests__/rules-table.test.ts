// The store's rules as a process holds them (lib/store/rules): targets and rules checked before
// anything is written, the precedence of DESIGN §9, and the lookup a decision makes.
import { createRequire } from 'node:module'
import { describe, expect, it } from 'vitest'

const require_ = createRequire(__filename)
const { RuleTable } = require_('../lib/store/rules/table.js')
const { checkTarget, checkRule, checkTtl, targetId, MAX_RULES } = require_('../lib/store/rules/check.js')

const T0 = 1_800_000_000_000
const codeOf = (f: () => unknown) => {
  try {
    f()
  } catch (e) {
    return (e as { code: string }).code
  }
  return null
}

describe('issue-39-rules-check: targets and rules are checked before anything is written', () => {
  it('takes the four target shapes, names of any text, and nothing else', () => {
    expect(checkTarget({ kind: 'bucket', name: 'user@example.com' })).toEqual({
      kind: 'bucket',
      name: 'user@example.com',
    })
    expect(checkTarget({ kind: 'pacer', prefix: '' })).toEqual({ kind: 'pacer', prefix: '' })
    expect(checkTarget({ door: 'api', keyPrefix: 'ip-::' })).toEqual({ door: 'api', keyPrefix: 'ip-::' })
    expect(checkTarget({ door: 'api' })).toEqual({ door: 'api' })
    expect(checkTarget({ budget: 'llm', tenant: 'acme' })).toEqual({ budget: 'llm', tenant: 'acme' })
    for (const bad of [
      null,
      'bucket:x',
      ['bucket', 'x'],
      { kind: 'bucket' },
      { kind: 'nope', name: 'x' },
      { kind: 'bucket', name: '' },
      { kind: 'bucket', name: 'x'.repeat(257) },
      { kind: 'bucket', name: '\ud800' },
      { kind: 'bucket', name: 'x', prefix: 'y' },
      { door: 'api', key: 'a', keyPrefix: 'b' },
      { door: 'api', other: 1 },
      { budget: 'b' },
      { tenant: 't' },
    ]) {
      expect(
        codeOf(() => checkTarget(bad)),
        JSON.stringify(bad),
      ).toBe('ERR_INVALID_ARGUMENT')
    }
  })

  it('a rule carries only the fields its kind has, within bounds', () => {
    const bucket = checkTarget({ kind: 'bucket', name: 'x' })
    expect(checkRule(bucket, { limit: 5, intervalMs: 1000, note: 'ops: incident 42' })).toEqual({
      limit: 5,
      intervalMs: 1000,
      note: 'ops: incident 42',
    })
    expect(checkRule(bucket, { mode: 'shadow' })).toEqual({ mode: 'shadow' })
    expect(checkRule(bucket, { access: 'deny' })).toEqual({ access: 'deny' })
    const pacer = checkTarget({ kind: 'pacer', name: 'p' })
    expect(checkRule(pacer, { qps: 2.5, maxBurst: 0 })).toEqual({ qps: 2.5, maxBurst: 0 })
    const tenant = checkTarget({ budget: 'b', tenant: 't' })
    expect(checkRule(tenant, { dimensions: { tokens: { limit: 10 } } })).toEqual({
      dimensions: { tokens: { limit: 10 } },
    })
    for (const [target, rule] of [
      [bucket, {}],
      [bucket, { qps: 5 }], // a field a bucket does not have
      [bucket, { limit: 0 }],
      [bucket, { limit: 1.5 }],
      [bucket, { limit: '5' }],
      [bucket, { intervalMs: -1 }],
      [bucket, { mode: 'dry-run' }],
      [bucket, { access: 'block' }],
      [bucket, { access: 'deny', limit: 5 }], // a denied client has no limit
      [bucket, { note: 'x'.repeat(1025) }],
      [pacer, { qps: 0 }],
      [pacer, { qps: Infinity }],
      [pacer, { limit: 5 }],
      [tenant, { dimensions: {} }],
      [tenant, { dimensions: { tokens: 10 } }],
      [checkTarget({ kind: 'sliding', name: 's' }), { windows: [] }],
      [checkTarget({ kind: 'sliding', name: 's' }), { windows: [{ limit: 1 }] }],
    ] as const) {
      expect(
        codeOf(() => checkRule(target, rule)),
        JSON.stringify(rule),
      ).toBe('ERR_INVALID_ARGUMENT')
    }
    expect(checkTtl({ ttlMs: 60_000 })).toBe(60_000)
    expect(codeOf(() => checkTtl({ ttlMs: 0 }))).toBe('ERR_INVALID_ARGUMENT')
    expect(codeOf(() => checkTtl({ ttl: 5 }))).toBe('ERR_INVALID_ARGUMENT')
  })

  it('two targets share an identity only when equal, whatever their names hold', () => {
    const names = ['a', 'a:b', 'a"', '["n","bucket","a"]', 'a\\', 'a,b', '', 'ip-::1']
    const ids = new Set<string>()
    let n = 0
    for (const kind of ['bucket', 'window']) {
      for (const name of names) {
        if (name !== '') {
          ids.add(targetId(checkTarget({ kind, name })))
          n++
        }
        ids.add(targetId(checkTarget({ kind, prefix: name })))
        n++
      }
    }
    for (const key of names.filter((x) => x !== '')) {
      ids.add(targetId(checkTarget({ door: 'd', key })))
      ids.add(targetId(checkTarget({ door: 'd', keyPrefix: key })))
      ids.add(targetId(checkTarget({ budget: 'd', tenant: key })))
      n += 3
    }
    expect(ids.size).toBe(n)
    expect(targetId(checkTarget({ door: 'd' }))).toBe(targetId(checkTarget({ door: 'd', keyPrefix: '' })))
  })
})

describe('issue-39-rules-precedence: the most specific rule applies whole; a deny beats everything', () => {
  const put = (t: any, target: object, rule: object, expiresAt?: number) =>
    t.put(checkTarget(target), checkRule(checkTarget(target), rule), expiresAt)

  it('exact beats prefix, a longer prefix a shorter one, for every name of a sweep', () => {
    const t = new RuleTable()
    put(t, { kind: 'bucket', prefix: '' }, { limit: 1 })
    put(t, { kind: 'bucket', prefix: 'user-' }, { limit: 2 })
    put(t, { kind: 'bucket', prefix: 'user-1' }, { limit: 3 })
    put(t, { kind: 'bucket', name: 'user-12' }, { limit: 4 })
    const cases: [string, number][] = [
      ['other', 1],
      ['user', 1],
      ['user-', 2],
      ['user-2', 2],
      ['user-1', 3],
      ['user-13', 3],
      ['user-12', 4],
      ['user-123', 3],
    ]
    for (const [name, limit] of cases) expect(t.forName('bucket', name, T0)?.rule.limit, name).toBe(limit)
    // another kind has rules of its own
    expect(t.forName('window', 'user-12', T0)).toBeUndefined()
  })

  it('a deny at any level beats a more specific override; an allow does not beat a more specific rule', () => {
    const t = new RuleTable()
    put(t, { kind: 'bucket', name: 'user-12' }, { limit: 4 })
    put(t, { kind: 'bucket', prefix: 'user-' }, { access: 'deny' })
    expect(t.forName('bucket', 'user-12', T0)?.rule).toEqual({ access: 'deny' })
    t.remove(checkTarget({ kind: 'bucket', prefix: 'user-' }))
    put(t, { kind: 'bucket', prefix: 'user-' }, { access: 'allow' })
    expect(t.forName('bucket', 'user-12', T0)?.rule).toEqual({ limit: 4 })
    expect(t.forName('bucket', 'user-13', T0)?.rule).toEqual({ access: 'allow' })
  })

  it("a door's rules: the key, its longest prefix, the whole door; a ban first", () => {
    const t = new RuleTable()
    put(t, { door: 'api' }, { mode: 'shadow' })
    put(t, { door: 'api', keyPrefix: '10.' }, { limit: 5 })
    put(t, { door: 'api', key: '10.0.0.1' }, { access: 'allow' })
    expect(t.forDoorKey('api', '192.168.0.1', T0)?.rule).toEqual({ mode: 'shadow' })
    expect(t.forDoorKey('api', '10.1.1.1', T0)?.rule).toEqual({ limit: 5 })
    expect(t.forDoorKey('api', '10.0.0.1', T0)?.rule).toEqual({ access: 'allow' })
    expect(t.forDoorKey('web', '10.0.0.1', T0)).toBeUndefined()
    t.ban('api', '10.0.0.1', T0 + 60_000)
    expect(t.forDoorKey('api', '10.0.0.1', T0)?.rule.access).toBe('deny')
    expect(t.forDoorKey('api', '10.0.0.1', T0 + 60_000)?.rule).toEqual({ access: 'allow' })
  })

  it('a rule past its expiresAt is not applied, and the rule under it applies again', () => {
    const t = new RuleTable()
    put(t, { kind: 'pacer', prefix: '' }, { qps: 10 })
    put(t, { kind: 'pacer', name: 'github' }, { qps: 1 }, T0 + 1000)
    expect(t.forName('pacer', 'github', T0 + 999)?.rule.qps).toBe(1)
    expect(t.forName('pacer', 'github', T0 + 1000)?.rule.qps).toBe(10)
    expect(t.list(T0 + 1000).map((r: any) => r.qps)).toEqual([10])
    expect(t.sweep(T0 + 1000)).toBe(1)
    expect(t.size).toBe(1)
  })

  it(`holds ${MAX_RULES.toLocaleString('en')} rules; a lookup is the same answer whatever the table's size`, () => {
    const t = new RuleTable()
    for (let i = 0; i < MAX_RULES - 2; i++) put(t, { kind: 'bucket', name: `user-${i}` }, { limit: 1 + (i % 1000) })
    put(t, { kind: 'bucket', prefix: 'user-' }, { limit: 7 })
    put(t, { kind: 'bucket', prefix: 'user-99999' }, { limit: 8 })
    expect(t.size).toBe(MAX_RULES)
    expect(t.full(checkTarget({ kind: 'bucket', name: 'new' }))).toBe(true)
    expect(t.full(checkTarget({ kind: 'bucket', name: 'user-5' }))).toBe(false)
    expect(t.forName('bucket', 'user-12345', T0)?.rule.limit).toBe(1 + (12345 % 1000))
    expect(t.forName('bucket', 'user-x', T0)?.rule.limit).toBe(7)
    expect(t.forName('bucket', 'user-999990', T0)?.rule.limit).toBe(8)
    // two prefix lengths in the table: a lookup probes the exact name and two prefixes
    expect(t._scopes.kinds.get('bucket').lengths).toEqual([10, 5])
  })

  it('bans are bounded: past the bound the oldest goes, operator rules untouched', () => {
    const t = new RuleTable({ maxBans: 100 })
    put(t, { door: 'api', key: 'ops' }, { access: 'allow' })
    for (let i = 0; i < 1000; i++) t.ban('api', `client-${i}`, T0 + 60_000 + i)
    expect(t.bans(T0)).toHaveLength(100)
    expect(t.forDoorKey('api', 'client-0', T0)).toBeUndefined()
    expect(t.forDoorKey('api', 'client-999', T0)?.rule.access).toBe('deny')
    expect(t.list(T0)).toHaveLength(1)
  })
})
