'use strict'
// Loads the native addon through napi's generated loader (index.js): the `.node` file next to
// it (a build from source), else the platform package (`sluice-<platform>`, an optional
// dependency npm installs only on its platform). When neither loads, the error names the
// platform and what was tried, instead of napi's generic "Cannot find native binding".

const PREBUILT = [
  'linux-x64-gnu',
  'linux-arm64-gnu',
  'linux-x64-musl',
  'linux-arm64-musl',
  'darwin-x64',
  'darwin-arm64',
  'win32-x64-msvc',
]

/** `linux-x64-gnu`, `linux-arm64-musl`, `darwin-arm64`, `win32-x64-msvc`, ... */
function platformName() {
  const { platform, arch } = process
  if (platform === 'win32') return `win32-${arch}-msvc`
  if (platform !== 'linux') return `${platform}-${arch}`
  let glibc = false
  try {
    glibc = Boolean(process.report.getReport().header.glibcVersionRuntime)
  } catch {
    // no report: assume glibc, the common case
    glibc = true
  }
  return `linux-${arch}-${glibc ? 'gnu' : 'musl'}`
}

function describe(err) {
  const parts = []
  for (let e = err, depth = 0; e && depth < 10; e = e.cause, depth++) {
    parts.push(String(e.message || e).split('\n')[0])
  }
  return parts
}

function load() {
  try {
    return require('../index.js')
  } catch (err) {
    const name = platformName()
    const tried = [`../sluice.${name}.node (a build from source)`, `the package sluice-${name}`]
    const supported = PREBUILT.includes(name)
    const message =
      `sluice could not load its native addon for ${name} (Node ${process.version}). ` +
      `Tried: ${tried.join(', then ')}. ` +
      (supported
        ? `Prebuilt binaries exist for ${name}: reinstall so that npm installs the optional dependency ` +
          `sluice-${name} (it is skipped with --no-optional / --omit=optional, or when the lock file ` +
          `was made on another platform).`
        : `No prebuilt binary exists for ${name} (prebuilt: ${PREBUILT.join(', ')}); build it from ` +
          `source with a Rust toolchain (see the README, "Install").`) +
      ` Causes: ${describe(err).join(' <- ')}`
    const error = new Error(message, { cause: err })
    error.name = 'SluiceLoadError'
    error.code = 'ERR_NATIVE_ADDON'
    error.platform = name
    error.tried = tried
    throw error
  }
}

module.exports = load()
