#!/usr/bin/env node
'use strict'
// Makes package-lock.json acceptable to `npm ci` again after an `npm install` rewrote it.
//
// The registry mirror this project installs from lacks some packages' builds for other
// platforms (rollup, esbuild-style `optionalDependencies`: @rollup/rollup-darwin-arm64@4.68.7,
// @napi-rs/lzma-android-*, ...). `npm install` skips an optional package it cannot fetch and
// leaves it out of the lock; `npm ci` then refuses the lock ("Missing: ... from lock file").
// This adds each missing optional package back as an optional entry with its exact version:
// `npm ci` checks it, and installs it only on the platform it is for (where a fetch failure of
// an optional package is not an error either).
//
// Usage: node scripts/fix-lock.js [path/to/package-lock.json]
const fs = require('node:fs')

const file = process.argv[2] || 'package-lock.json'
const lock = JSON.parse(fs.readFileSync(file, 'utf8'))
const packages = lock.packages
let added = 0

/** `a/node_modules/b/node_modules/c` -> c's node_modules, then b's, then a's, then the top one. */
function lookups(where, name) {
  const paths = []
  for (let dir = where; ;) {
    paths.push(`${dir ? `${dir}/` : ''}node_modules/${name}`)
    if (!dir) return paths
    const up = dir.lastIndexOf('/node_modules/')
    dir = up < 0 ? '' : dir.slice(0, up)
  }
}
for (const [where, entry] of Object.entries(packages)) {
  for (const [name, spec] of Object.entries(entry.optionalDependencies || {})) {
    // where npm's resolution looks: this package's node_modules, then each enclosing one up to the top
    if (lookups(where, name).some((path) => packages[path])) continue
    const top = `node_modules/${name}`
    // platform packages are pinned to their parent's exact version; anything else is left alone
    if (!/^\d+\.\d+\.\d+(-[\w.]+)?$/.test(spec)) continue
    packages[top] = { version: spec, ...(entry.dev ? { dev: true } : {}), optional: true }
    added++
  }
}
if (added > 0) {
  // keep npm's own order: entries sorted by path
  lock.packages = Object.fromEntries(
    Object.entries(packages).sort(([a], [b]) => (a === '' ? -1 : b === '' ? 1 : a.localeCompare(b, 'en'))),
  )
  fs.writeFileSync(file, `${JSON.stringify(lock, null, 2)}\n`)
}
console.log(`${file}: ${added} missing optional ${added === 1 ? 'entry' : 'entries'} added`)
