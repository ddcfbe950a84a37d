#!/usr/bin/env node
'use strict'
// The sizes the docs give of the main package, measured: `npm pack --dry-run --json` of this
// checkout (the tarball, its files, unpacked, and its largest parts). docs/install.md quotes
// them; __tests__/docs-sizes.test.ts fails when a quoted figure is more than 5 % off.
// Usage: node scripts/sizes.js [--json | --write] (--write: puts the sentence into docs/install.md)
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

/** Rewrites docs/install.md's sizes sentence with `m`'s figures. */
function write(m) {
  const fs = require('node:fs')
  const file = path.join(__dirname, '..', 'docs', 'install.md')
  const text = fs.readFileSync(file, 'utf8')
  // prettier may wrap the sentence: any run of white space between its words
  const old =
    /The\s+main\s+tarball\s+is\s+[\d.]+\s+kB\s+\(\d+\s+files,\s+[\d.]+\s+MB\s+unpacked,\s+of\s+which\s+[^)]*\)/
  if (!old.test(text)) throw new Error('docs/install.md has no sizes sentence to rewrite')
  fs.writeFileSync(file, text.replace(old, sentence(m)))
}

if (require.main === module) {
  const m = measure()
  if (process.argv.includes('--write')) write(m)
  console.log(process.argv.includes('--json') ? JSON.stringify(m, null, 2) : sentence(m))
}

module.exports = { measure, sentence }
