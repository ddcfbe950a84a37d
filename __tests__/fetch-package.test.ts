// sluice/fetch as a consumer sees it: it loads through require and import (one set of
// functions), and its types check under strict + nodenext in both forms.
import { execFileSync } from 'node:child_process'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'

const root = join(__dirname, '..')
const node = (args: string[]) => execFileSync(process.execPath, args, { cwd: root, encoding: 'utf8' }).trim()

describe('sluice/fetch package entry', () => {
  it('loads with require and with import, sharing one module', () => {
    expect(
      node(['-e', "const f = require('sluice/fetch'); console.log(typeof f.pacedFetch, typeof f.interceptor)"]),
    ).toBe('function function')
    const esm = `import { pacedFetch, interceptor } from 'sluice/fetch'; import { createRequire } from 'node:module';
      if (createRequire(import.meta.url)('sluice/fetch').pacedFetch !== pacedFetch) throw new Error('two copies');
      console.log(typeof pacedFetch, typeof interceptor)`
    expect(node(['--input-type=module', '-e', esm])).toBe('function function')
  })

  it('its require and import forms type-check (strict, nodenext)', () => {
    const project = join('__tests__', 'fixtures', 'nodenext-fetch', 'tsconfig.json')
    try {
      execFileSync('npx', ['--no-install', 'tsc', '-p', project], { cwd: root, encoding: 'utf8', stdio: 'pipe' })
    } catch (err: any) {
      throw new Error(`tsc failed:\n${err.stdout}${err.stderr}`)
    }
  }, 120_000)
})
