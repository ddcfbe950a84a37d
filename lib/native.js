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

/** Whether this package is a source checkout (a clone), not an install from tarballs. */
function isCheckout() {
  try {
    return require('node:fs').existsSync(require('node:path').join(__dirname, '..', 'Cargo.toml'))
  } catch {
    return false
  }
}

/**
 * The error of a missing or unloadable addon: short (at most ~300 characters), naming the
 * platform, what was looked for and the one command that fixes it where this package is (a
 * source checkout builds; a registry install on a supported platform reinstalls with its
 * optional dependencies; another platform builds from source). The loader's own errors are
 * kept as `cause` and `causes`, not in the message.
 */
function loadError(err) {
  const name = platformName()
  const tried = [`sluice.${name}.node`, `sluice-${name}`]
  let fix
  if (isCheckout()) fix = 'a source checkout: build it with `npm run build` (needs Rust; see CONTRIBUTING.md).'
  else if (PREBUILT.includes(name)) {
    fix =
      `reinstall with its optional dependency sluice-${name}: \`npm install --include=optional\` ` +
      '(skipped by --omit=optional or a lock file made elsewhere).'
  } else fix = `no prebuilt addon exists for ${name}: build from source (README, "Install").`
  const message = `sluice has no native addon for ${name} (Node ${process.version}); looked for ${tried.join(' and ')}. Fix: ${fix}`
  const error = new Error(message, { cause: err })
  error.name = 'SluiceLoadError'
  error.code = 'ERR_NATIVE_ADDON'
  error.platform = name
  error.tried = tried
  error.causes = describe(err)
  return error
}

function load() {
  try {
    return require('../index.js')
  } catch (err) {
    throw loadError(err)
  }
}

module.exports = load()
