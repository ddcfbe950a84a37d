// issue-38-docs-sizes: the sizes docs/install.md gives of the main package come from
// scripts/sizes.js (`npm pack --dry-run` of this checkout), within 5 %.
import { readFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { join } from 'node:path'
import { expect, it } from 'vitest'

const { measure } = createRequire(__filename)('../scripts/sizes.js') as {
  measure(): { tarball: number; unpacked: number; files: number; parts: Record<string, number> }
}

it('issue-38-docs-sizes: docs/install.md quotes the package as scripts/sizes.js measures it (within 5 %)', () => {
  const m = measure()
  const text = readFileSync(join(__dirname, '..', 'docs', 'install.md'), 'utf8').replace(/\s+/g, ' ')
  const quoted = /The main tarball is ([\d.]+) kB \((\d+) files, ([\d.]+) MB unpacked, of which (.*?)\)/.exec(text)
  expect(quoted, 'the sizes sentence of docs/install.md').not.toBeNull()
  const near = (what: string, said: number, real: number) =>
    expect(Math.abs(said - real) / real, `${what}: the docs say ${said}, measured ${real}`).toBeLessThanOrEqual(0.05)
  near('tarball', Number(quoted![1]) * 1000, m.tarball)
  near('files', Number(quoted![2]), m.files)
  near('unpacked', Number(quoted![3]) * 1e6, m.unpacked)
  const parts = [...quoted![4].matchAll(/`([^`]+)` ([\d.]+) kB/g)]
  expect(parts.length).toBeGreaterThanOrEqual(3)
  for (const [, part, kB] of parts) near(part, Number(kB) * 1000, m.parts[part] ?? 0)
}, 60_000)
