#!/usr/bin/env node
'use strict'
// `npm version <new>` runs this (package.json "version" script) after bumping package.json:
// every platform package (npm/*/package.json) and the main package's optionalDependencies on
// them take the same version, and the changed files are staged for npm's version commit.
// Usage: node scripts/version.js [root]   (root defaults to this checkout; tests pass a copy)
const fs = require('node:fs')
const path = require('node:path')
const { spawnSync } = require('node:child_process')

const root = path.resolve(process.argv[2] || path.join(__dirname, '..'))
const mainFile = path.join(root, 'package.json')
const main = JSON.parse(fs.readFileSync(mainFile, 'utf8'))
const { version } = main
const changed = []
for (const dir of fs.readdirSync(path.join(root, 'npm')).sort()) {
  const file = path.join(root, 'npm', dir, 'package.json')
  if (!fs.existsSync(file)) continue
  const pkg = JSON.parse(fs.readFileSync(file, 'utf8'))
  pkg.version = version
  fs.writeFileSync(file, `${JSON.stringify(pkg, null, 2)}\n`)
  changed.push(file)
  if (!main.optionalDependencies || !(pkg.name in main.optionalDependencies)) {
    throw new Error(`${pkg.name} is not among the optionalDependencies of ${main.name}`)
  }
  main.optionalDependencies[pkg.name] = version
}
fs.writeFileSync(mainFile, `${JSON.stringify(main, null, 2)}\n`)
changed.push(mainFile)
// the lock records the optional platform packages too (scripts/fix-lock.js): keep `npm ci` happy
const lockFile = path.join(root, 'package-lock.json')
if (fs.existsSync(lockFile)) {
  const lock = JSON.parse(fs.readFileSync(lockFile, 'utf8'))
  const top = lock.packages && lock.packages['']
  if (top) top.optionalDependencies = { ...main.optionalDependencies }
  for (const name of Object.keys(main.optionalDependencies)) {
    const entry = lock.packages && lock.packages[`node_modules/${name}`]
    if (entry) entry.version = version
  }
  fs.writeFileSync(lockFile, `${JSON.stringify(lock, null, 2)}\n`)
  changed.push(lockFile)
}
if (fs.existsSync(path.join(root, '.git'))) {
  spawnSync('git', ['add', ...changed], { cwd: root, stdio: 'inherit' })
}
console.log(`${main.name}, its lock and its platform packages at ${version}`)
