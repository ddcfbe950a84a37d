// issue-37-result-fields: each kind's result fields are named once, in Rust (the `RESULTS` of its
// file under src/store/kinds/, exported by `kinds()`), and the JS layer reads results by those
// names, resolved to offsets once at load: no kind or class file reads a result at a number.
import { readFileSync, readdirSync } from 'node:fs'
import { createRequire } from 'node:module'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'

const req = createRequire(__filename)
const ROOT = join(__dirname, '..')
const native = req('../index.js') as { kinds(): { name: string; results: Record<string, string[]> }[] }
const { resultFields } = req('../lib/kinds/kind.js') as {
  resultFields(kind: string, group: string): Record<string, number>
}

describe('issue-37-result-fields: result fields named once, in Rust, read by name in JS', () => {
  it('every native kind names its result groups, snake_case fields, none twice', () => {
    const kinds = native.kinds()
    expect(kinds.length).toBeGreaterThanOrEqual(9)
    for (const k of kinds) {
      const groups = Object.entries(k.results)
      expect(groups.length, k.name).toBeGreaterThan(0)
      for (const [group, fields] of groups) {
        expect(fields.length, `${k.name}.${group}`).toBeGreaterThan(0)
        expect(new Set(fields).size, `${k.name}.${group}`).toBe(fields.length)
        for (const f of fields) expect(f, `${k.name}.${group}`).toMatch(/^[a-z_]+$/)
      }
    }
  })

  it('resolves a name to its offset and its group to its width, and refuses a name Rust does not give', () => {
    const entry = resultFields('limit', 'entry')
    const fields = native.kinds().find((k) => k.name === 'limit')!.results.entry
    fields.forEach((f, i) => expect(entry[f]).toBe(i))
    expect(entry.size).toBe(fields.length)
    expect(() => entry.allowd).toThrow(/has no field allowd/)
    expect(() => resultFields('limit', 'entries')).toThrow(/no result group entries/)
    expect(() => resultFields('nope', 'entry')).toThrow(/no result group/)
  })

  it('no kind or class file reads or fabricates a result at a literal offset', () => {
    // `out[o + 1]`, `values[0]`, `out[2 + 3 * i]`: a layout restated; the io buffer's inputs
    // (`io[k] = ...`, the call's numbers) are the call layout, not a result
    const literal = /\b(out|values|v|c|hit\.values)\[\s*(\w+\s*\+\s*)?\d/
    const found: string[] = []
    for (const dir of ['lib/kinds', 'lib/classes']) {
      for (const file of readdirSync(join(ROOT, dir)).filter((f) => f.endsWith('.js'))) {
        readFileSync(join(ROOT, dir, file), 'utf8')
          .split('\n')
          .forEach((line, i) => {
            if (literal.test(line)) found.push(`${dir}/${file}:${i + 1}: ${line.trim()}`)
          })
      }
    }
    expect(found).toEqual([])
  })
})
