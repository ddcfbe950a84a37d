#!/usr/bin/env node
'use strict'
// What `npm test` (scripts/test.sh) can run on this machine, decided before anything starts:
// which tools it installs with apt-get (only where apt-get is, as root or with sudo), what it
// cannot have, and which test files it leaves out for that.
//
//   node scripts/test-plan.js apt     -> the apt packages to install (one line, maybe empty);
//                                       exit 1, with the reason on stderr, when the suite cannot
//                                       run at all (no redis-server, no apt-get, no given server)
//   node scripts/test-plan.js skips   -> the test files to leave out (one per line) and, on
//                                       stderr, each with its reason
//
// Modes: by default the suite starts its own standalone Redis and 3-master Redis Cluster on
// loopback ports (a `redis-server` on PATH). With SLUICE_TEST_REDIS_URL set, it runs against
// that server instead (never an app's REDIS_URL: the suites write keys, under random
// prefixes), with no cluster: no file is left out for that. The tests on the suite's cluster
// are skipped inside their files (HAS_CLUSTER, REDIS_KINDS and STORE_KINDS in
// __tests__/helpers/stores.ts; __tests__/test-plan.test.ts checks every file that uses the
// cluster goes through them), so a file's standalone tests still run, the cluster case of its
// matrices is not made and its cluster-only tests show as skipped in vitest's count. Without a redis-server on PATH, the files that start
// servers of their own (TLS, ACL, Sentinel, failover, faults, the clusters some files start
// themselves) are left out.
const fs = require('node:fs')
const path = require('node:path')

/** Whether `cmd` is an executable file in one of PATH's directories. */
function onPath(cmd, env = process.env) {
  for (const dir of (env.PATH || '').split(path.delimiter)) {
    if (!dir) continue
    try {
      fs.accessSync(path.join(dir, cmd), fs.constants.X_OK)
      return true
    } catch {}
  }
  return false
}

/**
 * The machine as the plan sees it: `has(cmd)` (on PATH), `root`, the given server, and a
 * chromium named by SLUICE_CHROMIUM.
 */
function machine(env = process.env) {
  return {
    has: (cmd) => onPath(cmd, env),
    root: typeof process.getuid === 'function' && process.getuid() === 0,
    givenUrl: env.SLUICE_TEST_REDIS_URL || '',
    chromium: env.SLUICE_CHROMIUM || '',
  }
}

/**
 * What to install with apt-get, what is missing for good (each with what it costs), and
 * whether the suite can run at all (`fatal`: why not).
 */
function prerequisites(m) {
  const apt = m.has('apt-get') && (m.root || m.has('sudo'))
  const install = []
  const missing = []
  const redisServer = m.has('redis-server') && m.has('redis-cli')
  if (!redisServer) {
    // a given server needs no local one: only the files that start servers of their own do
    if (m.givenUrl) missing.push('redis-server')
    else if (apt) install.push('redis-server')
    else missing.push('redis-server')
  }
  if (!m.chromium && !m.has('chromium')) (apt ? install : missing).push('chromium')
  if (!m.has('openssl')) (apt ? install : missing).push('openssl')
  const fatal =
    !m.givenUrl && missing.includes('redis-server')
      ? 'no redis-server on PATH and no apt-get to install it: install Redis (redis-server and ' +
        'redis-cli on PATH: brew install redis, dnf install redis, pacman -S redis, ...), or ' +
        'set SLUICE_TEST_REDIS_URL=redis://host:port to run the standalone suites against a ' +
        'server of yours (never one whose data matters: the suites write keys, under random prefixes)'
      : null
  return { apt, install, missing, fatal }
}

// What a test file needs, read from its text: servers of its own (redis-server: standalone
// ones, Sentinels, and the clusters startCluster makes), openssl (the TLS suite's CA). Not the
// suite's cluster: without one, its tests are skipped inside the files (see above).
const NEEDS = [
  ['redis-server', /helpers\/servers|helpers\/sentinel|'redis-server'/],
  ['openssl', /execFileSync\('openssl'/],
]
const WHY = {
  'redis-server': 'starts redis-server itself (none on PATH)',
  openssl: 'makes its certificates with openssl (none on PATH)',
}

/**
 * The files to leave out, `[{ file, why }]`, given the test files' texts (`{ file: text }`)
 * and what is missing.
 */
function skips(files, { missing }) {
  const out = []
  for (const [file, text] of Object.entries(files)) {
    for (const [need, pattern] of NEEDS) {
      if (missing.includes(need) && pattern.test(text)) {
        out.push({ file, why: WHY[need] })
        break
      }
    }
  }
  return out
}

function testFiles(dir) {
  const files = {}
  for (const name of fs.readdirSync(dir).sort()) {
    if (name.endsWith('.test.ts')) files[`__tests__/${name}`] = fs.readFileSync(path.join(dir, name), 'utf8')
  }
  return files
}

function main(argv) {
  const m = machine()
  const p = prerequisites(m)
  if (argv[0] === 'apt') {
    if (p.fatal) {
      console.error(`npm test: ${p.fatal}`)
      return 1
    }
    for (const what of p.missing) {
      if (what === 'chromium') console.error('npm test: no chromium (nor SLUICE_CHROMIUM): the browser test is skipped')
      else
        console.error(
          `npm test: no ${what} on PATH${p.apt ? '' : ' and no apt-get'}: the files that need it are skipped`,
        )
    }
    console.log(p.install.join(' '))
    return 0
  }
  if (argv[0] === 'skips') {
    const root = path.join(__dirname, '..', '__tests__')
    for (const { file, why } of skips(testFiles(root), { missing: p.missing })) {
      console.log(file)
      console.error(`  skipped ${file}: ${why}`)
    }
    return 0
  }
  console.error('usage: test-plan.js apt|skips')
  return 2
}

if (require.main === module) process.exitCode = main(process.argv.slice(2))

module.exports = { prerequisites, skips, onPath }
