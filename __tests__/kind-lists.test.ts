// issue-37-kind-lists: every list that names the kinds by hand agrees with the registries
// (the native one, src/store/kinds/mod.rs's `kinds()`, and lib/kinds/index.js), so a new kind
// that misses one fails here instead of escaping a check (ARCHITECTURE.md, "add a kind").
import { readFileSync, readdirSync } from 'node:fs'
import { createRequire } from 'node:module'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'

const req = createRequire(__filename)
const ROOT = join(__dirname, '..')
const native = req('../index.js') as { kinds(): { name: string }[] }
const registry = req('../lib/kinds/index.js') as {
  KINDS: { name: string; statsKinds: string[] }[]
  STATS_KINDS: string[]
  BY_STATS_KIND: Map<string, { name: string }>
}
const keys = req('../lib/store/keys.js') as { SEGMENTS: readonly string[] }
const everyKind = req('./helpers/every-kind.js') as { KINDS: Record<string, unknown> }

/** The segments a store key has that are no statistics kind's: the store's own (statistics, registry, probes, rules), and fair's approximate mode. */
const OWN_SEGMENTS = ['stats', 'limiters', 'probe', 'rules', 'fair-approx']
/** Statistics kinds with no key of their own: an HTTP door counts under its algorithm's kind. */
const KEYLESS = ['door']

const sorted = (xs: Iterable<string>) => [...new Set(xs)].sort()
/** A bash array `NAME=(a b c ...)` of scripts/matrix.sh, possibly over several lines. */
function bashArray(text: string, name: string) {
  const m = new RegExp(`^${name}=\\(([^)]*)\\)`, 'm').exec(text)
  if (m === null) throw new Error(`no ${name} in scripts/matrix.sh`)
  return m[1].split(/\s+/).filter(Boolean)
}

describe('issue-37-kind-lists: the lists that name every kind', () => {
  it('the JS registry has the native kinds, in the native order', () => {
    expect(registry.KINDS.map((k) => k.name)).toEqual(native.kinds().map((k) => k.name.replace(/_/g, '-')))
  })

  it("lib/store/keys.js's segments are the statistics kinds' (a door's excepted) and the store's own", () => {
    const kinds = registry.STATS_KINDS.filter((k) => !KEYLESS.includes(k))
    expect(sorted(keys.SEGMENTS)).toEqual(sorted([...kinds, ...OWN_SEGMENTS]))
  })

  it("LimiterInfo's kind union (lib/entries/types/store.d.ts) is the statistics kinds", () => {
    const dts = readFileSync(join(ROOT, 'lib/entries/types/store.d.ts'), 'utf8')
    const body = /export interface LimiterInfo \{\s*kind:([\s\S]*?)\n {2}[a-zA-Z]+[?]?:/.exec(dts)
    expect(body).not.toBeNull()
    const union = [...body![1].replace(/\/\*[\s\S]*?\*\//g, '').matchAll(/'([a-z-]+)'/g)].map((m) => m[1])
    expect(sorted(union)).toEqual(sorted(registry.STATS_KINDS))
  })

  it('the per-kind failover helpers (__tests__/helpers/every-kind.js) cover every store kind', () => {
    const covered = Object.keys(everyKind.KINDS).map((k) => registry.BY_STATS_KIND.get(k)?.name)
    expect(covered).not.toContain(undefined)
    expect(sorted(covered as string[])).toEqual(sorted(registry.KINDS.map((k) => k.name)))
  })

  it("scripts/matrix.sh runs every conformance test and every kind's own suite on each server", () => {
    const sh = readFileSync(join(ROOT, 'scripts/matrix.sh'), 'utf8')
    const conformance = bashArray(sh, 'CONFORMANCE')
    const rust = readdirSync(join(ROOT, 'tests'))
      .filter((f) => f.endsWith('_conformance.rs') || f === 'conformance.rs' || f === 'registry.rs')
      .map((f) => f.replace(/\.rs$/, ''))
    expect(sorted(conformance)).toEqual(sorted(rust))
    const suites = bashArray(sh, 'SUITES')
    const files = new Set(readdirSync(join(ROOT, '__tests__')).map((f) => f.replace(/\.test\.ts$/, '')))
    for (const s of suites) expect(files.has(s), `${s}.test.ts`).toBe(true)
    // a kind's own suite, where it has one by its name (the limit kind's is limiters)
    const own = registry.KINDS.map((k) => (k.name === 'limit' ? 'limiters' : k.name)).filter((n) => files.has(n))
    for (const s of own) expect(suites, s).toContain(s)
  })
})
