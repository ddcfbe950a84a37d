#!/usr/bin/env node
'use strict'
// `npm run pack:host`: the tarballs that install this checkout's build into an app, with no
// cross toolchain: the main package as `npm pack` makes it, and this platform's package around
// the addon already built here (`npm run build`, or `npm run demo` / `npm test`, which build
// it). Prints the one command that installs both into an app:
//   npm install /path/to/sluice-<version>.tgz /path/to/sluice-<platform>-<version>.tgz
// Usage: node scripts/pack-host.js [out dir]   (default dist/host). As a module: pack(outDir).
const { execFileSync } = require('node:child_process')
const fs = require('node:fs')
const path = require('node:path')

const ROOT = path.join(__dirname, '..')

/** This machine's platform package name part (as lib/native.js names it), e.g. linux-x64-gnu. */
function hostPlatform() {
  const { platform, arch } = process
  if (platform === 'win32') return `win32-${arch}-msvc`
  if (platform !== 'linux') return `${platform}-${arch}`
  const glibc = Boolean(process.report.getReport().header.glibcVersionRuntime)
  return `linux-${arch}-${glibc ? 'gnu' : 'musl'}`
}

/** Packs both tarballs into `out`; answers their paths. */
function pack(out = path.join(ROOT, 'dist', 'host')) {
  const version = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8')).version
  const platform = hostPlatform()
  const addon = path.join(ROOT, `sluice.${platform}.node`)
  if (!fs.existsSync(addon)) {
    throw new Error(`no ${path.basename(addon)} here: build it first with \`npm run build\``)
  }
  if (!fs.existsSync(path.join(ROOT, 'npm', platform, 'package.json'))) {
    throw new Error(`sluice has no platform package for ${platform} (npm/${platform})`)
  }
  fs.mkdirSync(out, { recursive: true })
  const npmPack = (cwd) =>
    execFileSync('npm', ['pack', '--ignore-scripts', '--pack-destination', out], { cwd, stdio: 'ignore' })
  npmPack(ROOT)
  const stage = fs.mkdtempSync(path.join(out, 'stage-'))
  try {
    for (const f of ['package.json', 'README.md'])
      fs.copyFileSync(path.join(ROOT, 'npm', platform, f), path.join(stage, f))
    fs.copyFileSync(addon, path.join(stage, path.basename(addon)))
    npmPack(stage)
  } finally {
    fs.rmSync(stage, { recursive: true, force: true })
  }
  return {
    main: path.join(out, `sluice-${version}.tgz`),
    platform: path.join(out, `sluice-${platform}-${version}.tgz`),
  }
}

if (require.main === module) {
  const t = pack(process.argv[2] ? path.resolve(process.argv[2]) : undefined)
  console.log(
    `packed ${t.main}\n   and ${t.platform}\ninstall into an app with:\n  npm install ${t.main} ${t.platform}`,
  )
}

module.exports = { pack, hostPlatform }
