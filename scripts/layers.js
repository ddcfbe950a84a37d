#!/usr/bin/env node
'use strict'
// The layers of lib/, checked (run by scripts/test.sh with the lint): every require and import
// of a file under lib/ points at its own layer or one below it, never up.
//
//   lib/entries/   the package entries (package.json `exports`, `main`, `types` point here only)
//   lib/doors/     a folder per door (express, fastify, hono, koa, ws, fetch, bullmq, dashboard, metrics) beside
//                  the machinery they share (http/, inspect.js); a door imports its own folder and
//                  the shared machinery, not another door
//   lib/classes/   the public classes
//   lib/kinds/     the kinds of store calls (lib/kinds/kind.js): they receive the classes they
//                  build from the site that calls them, never require them
//   lib/store/     MemoryStore, RedisStore and their plumbing
//   lib/native.js  the addon (the only file that loads it; lib/native.d.ts: its types)
//   lib/base/      errors, clock, codec, timers, Retry-After: importable from every layer, imports
//                  nothing of lib/ but itself
//   lib/entries/types/  the public declarations (.d.ts) of the classes, stores, errors and
//                  clock: importable from any .d.ts
//
// Also: lib/'s root holds at most 8 files, and every file of lib/ is in one of these places.
// Usage: node scripts/layers.js (exit 1 and a line per arrow against the layers).

const fs = require('node:fs')
const path = require('node:path')

const root = path.join(__dirname, '..')
const lib = path.join(root, 'lib')

/** Top to bottom: a file may import its own layer and the layers after it. */
const LAYERS = ['entries', 'doors', 'classes', 'kinds', 'store', 'native']
/** Folders of lib/doors/ every door may import (the rest are doors, each its own). */
const SHARED_DOOR_PARTS = ['http', 'inspect.js', 'words.js']
const MAX_ROOT_FILES = 8
/**
 * Files served under another name than their path: the dashboard serves lib/doors/words.js to
 * the browser beside its own modules, as an ES module (lib/doors/dashboard/page.js).
 */
const SERVED = new Map([['lib/doors/dashboard/browser/words.js', 'lib/doors/words.js']])
/** The native layer: the addon's loader and its declaration (the addon's types, for lib/'s contracts). */
const NATIVE = ['lib/native.js', 'lib/native.d.ts']
/**
 * Arrows against the layers that are known and not fixed yet, each with its reason. One that
 * disappears must leave this list too (the check says so), so the list only shrinks.
 */
const KNOWN = new Map([
  [
    'lib/store/stats.js -> lib/kinds/index.js',
    "statistics read each kind's extra fields and state lifetime from the kind registry",
  ],
  ['lib/store/circuit.js -> lib/kinds/limit.js', "the circuit's probe is a peek of the limit kind"],
])

const SOURCE = /\.(js|mjs|cjs|d\.ts|d\.mts)$/

/** Every file under `dir`, relative to the repository, with / separators. */
function walk(dir) {
  const out = []
  for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, e.name)
    if (e.isDirectory()) out.push(...walk(p))
    else out.push(path.relative(root, p).split(path.sep).join('/'))
  }
  return out
}

/** Where a file of lib/ belongs: `{ layer, door? }`, or null when nowhere. */
function placeOf(file) {
  const parts = file.split('/')
  if (parts.length === 2) return NATIVE.includes(file) ? { layer: 'native' } : null
  const [, top, second] = parts
  if (top === 'base') return { layer: top }
  if (top === 'entries' && second === 'types') return { layer: 'types' }
  if (top === 'doors') return { layer: 'doors', door: SHARED_DOOR_PARTS.includes(second) ? null : second }
  return LAYERS.includes(top) ? { layer: top } : null
}

/** The relative specifiers `file` requires or imports (full-line comments skipped). */
function specifiers(text) {
  const code = text
    .split('\n')
    .filter((l) => !/^\s*(\/\/|\/?\*)/.test(l))
    .join('\n')
  const found = []
  const patterns = [
    /\brequire\(\s*(['"])(\.{1,2}\/[^'"]*)\1\s*\)/g,
    /\bimport\(\s*(['"])(\.{1,2}\/[^'"]*)\1\s*\)/g,
    /\b(?:import|export)\s[^'";]*?\bfrom\s*(['"])(\.{1,2}\/[^'"]*)\1/g,
    /\bimport\s*(['"])(\.{1,2}\/[^'"]*)\1/g,
  ]
  for (const re of patterns) for (const m of code.matchAll(re)) found.push(m[2])
  return found
}

/** The file `spec` names from `file` (as Node and TypeScript resolve it), or null. */
function resolve(file, spec) {
  const served = SERVED.get(path.posix.join(path.posix.dirname(file), spec))
  if (served !== undefined) return served
  const base = path.join(root, path.dirname(file), spec)
  const candidates = [base, `${base}.js`, `${base}.d.ts`, path.join(base, 'index.js')]
  if (spec.endsWith('.js')) candidates.push(`${base.slice(0, -3)}.d.ts`)
  if (spec.endsWith('.mjs')) candidates.push(`${base.slice(0, -4)}.d.mts`)
  for (const c of candidates) {
    if (fs.existsSync(c) && fs.statSync(c).isFile()) return path.relative(root, c).split(path.sep).join('/')
  }
  return null
}

/** Why `from` may not import `to` (null: it may). */
function against(from, to) {
  if (!to.startsWith('lib/')) return NATIVE.includes(from.file) ? null : 'only lib/native.js loads the addon'
  const a = from.place
  const b = placeOf(to)
  if (b === null) return 'its target is in no layer'
  if (a.layer === 'base') return b.layer === 'base' ? null : 'lib/base/ imports only lib/base/'
  if (a.layer === 'types') return b.layer === 'types' ? null : 'lib/entries/types/ imports only itself'
  if (b.layer === 'base') return null
  if (b.layer === 'types') return from.file.endsWith('.ts') ? null : 'only declarations import lib/entries/types/'
  const ia = LAYERS.indexOf(a.layer)
  const ib = LAYERS.indexOf(b.layer)
  if (ib < ia) return `${a.layer} -> ${b.layer}: up the layers`
  if (a.layer === 'doors' && b.layer === 'doors' && b.door != null && b.door !== a.door) {
    return `one door imports another (${a.door ?? 'the shared part'} -> ${b.door})`
  }
  return null
}

function check() {
  const errors = []
  const files = walk(lib)
  const rootFiles = files.filter((f) => f.split('/').length === 2)
  if (rootFiles.length > MAX_ROOT_FILES) {
    errors.push(`lib/ holds ${rootFiles.length} files at its root (at most ${MAX_ROOT_FILES}): ${rootFiles.join(', ')}`)
  }
  const seen = new Set()
  for (const file of files) {
    const place = placeOf(file)
    if (place === null) {
      errors.push(`${file}: in no layer (see scripts/layers.js)`)
      continue
    }
    if (!SOURCE.test(file)) continue
    for (const spec of specifiers(fs.readFileSync(path.join(root, file), 'utf8'))) {
      const to = resolve(file, spec)
      if (to === null) {
        errors.push(`${file}: ${spec} names no file`)
        continue
      }
      const why = against({ file, place }, to)
      if (why === null) continue
      const arrow = `${file} -> ${to}`
      if (KNOWN.has(arrow)) seen.add(arrow)
      else errors.push(`${arrow}: ${why}`)
    }
  }
  for (const arrow of KNOWN.keys()) {
    if (!seen.has(arrow)) errors.push(`${arrow}: fixed, remove it from KNOWN in scripts/layers.js`)
  }
  // the package's entries are lib/entries/ only
  const pkg = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8'))
  const targets = [pkg.main, pkg.types]
  const collect = (v) => {
    if (typeof v === 'string') targets.push(v)
    else if (v !== null && typeof v === 'object') Object.values(v).forEach(collect)
  }
  for (const [subpath, v] of Object.entries(pkg.exports)) if (subpath !== './package.json') collect(v)
  for (const t of targets) {
    if (!path.posix.normalize(t).startsWith('lib/entries/')) errors.push(`package.json: ${t} is not in lib/entries/`)
    else if (!fs.existsSync(path.join(root, t))) errors.push(`package.json: ${t} does not exist`)
  }
  return errors
}

const errors = check()
if (errors.length > 0) {
  for (const e of errors) console.error(`layers: ${e}`)
  process.exit(1)
}
console.log(`layers: lib/ keeps its layers (${KNOWN.size} known arrows against them, listed in scripts/layers.js)`)
