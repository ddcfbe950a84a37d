#!/usr/bin/env node
'use strict'
// The sizes the docs give of the main package, measured: `npm pack --dry-run --json` of this
// checkout (the tarball, its files, unpacked, and its largest parts). docs/install.md quotes
// them; __tests__/docs-sizes.test.ts fails when a quoted figure is more than 5 % off.
// Usage: node scripts/sizes.js [--json]
const { execFileSync } = require('node:child_process')
const path = require('node:path')

function measure() {
  const out = execFileSync('npm', ['pack', '--dry-run', '--json', '--ignore-scripts'], {
    cwd: path.join(__dirname, '..'),
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'ignore'],
  })
  const p = JSON.parse(out)[0]
  const parts = {}
  for (const f of p.files) {
    const top = f.path.includes('/') ? `${f.path.split('/')[0]}/` : f.path
    parts[top] = (parts[top] || 0) + f.size
  }
  return { tarball: p.size, unpacked: p.unpackedSize, files: p.entryCount, parts }
}

const kB = (n) => `${Math.round(n / 1000)} kB`
const MB = (n) => `${(n / 1e6).toFixed(2)} MB`

/** The sentence docs/install.md quotes. */
function sentence(m) {
  const part = (p) => `\`${p}\` ${kB(m.parts[p] || 0)}`
  return (
    `The main tarball is ${kB(m.tarball)} (${m.files} files, ${MB(m.unpacked)} unpacked, of which ` +
    `${['lib/', 'docs/', 'lua/', 'CHANGELOG.md'].map(part).join(', ')})`
  )
}

if (require.main === module) {
  const m = measure()
  console.log(process.argv.includes('--json') ? JSON.stringify(m, null, 2) : sentence(m))
}

module.exports = { measure, sentence }
