'use strict'

// The page the dashboard serves and its assets, read from lib/doors/dashboard/browser/ once per
// dashboard: the HTML with its title, CSRF token and settings filled in, the browser's script
// modules, style and icon, and the Content-Security-Policy the page is served with.

const fs = require('node:fs')
const path = require('node:path')

const DIR = path.join(__dirname, 'browser')
const JS = 'text/javascript; charset=utf-8'
/** Every file served under `<mount>/assets/`: the page script (app.js) and the modules it imports. */
const ASSETS = {
  'app.js': JS,
  'dom.js': JS,
  'format.js': JS,
  'widgets.js': JS,
  'overview.js': JS,
  'details.js': JS,
  'app.css': 'text/css; charset=utf-8',
  'favicon.svg': 'image/svg+xml',
}
/**
 * The CommonJS modules the page imports as ES modules, by asset name: the words for values the
 * CLI uses too (lib/doors/words.js), so that a name is escaped one way in both.
 */
const SHARED = { 'words.js': require.resolve('../words') }
const CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ')

const escapeHtml = (s) =>
  String(s).replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c])

/**
 * A CommonJS module that requires nothing as an ES module: its text run in a function given a
 * `module` of its own, then its exports named.
 */
function esModule(file) {
  const names = Object.keys(require(file))
  const text = fs.readFileSync(file, 'utf8')
  const run = `((module) => {\n${text}\nreturn module.exports\n})({ exports: {} })`
  return Buffer.from(`export const { ${names.join(', ')} } = ${run}\n`)
}

/** The assets, by file name: `{ type, body }`. */
function readAssets() {
  const assets = new Map()
  for (const [file, type] of Object.entries(ASSETS)) {
    assets.set(file, { type, body: fs.readFileSync(path.join(DIR, file)) })
  }
  for (const [file, source] of Object.entries(SHARED)) assets.set(file, { type: JS, body: esModule(source) })
  return assets
}

/** The page's HTML for one dashboard. */
function renderPage({ title, token, allowReset, allowWrite, refreshMs }) {
  return fs
    .readFileSync(path.join(DIR, 'index.html'), 'utf8')
    .replaceAll('{{title}}', escapeHtml(title))
    .replace('{{csrf}}', token)
    .replace('{{allowReset}}', String(allowReset))
    .replace('{{allowWrite}}', String(allowWrite))
    .replace('{{refreshMs}}', String(refreshMs))
}

module.exports = { CSP, readAssets, renderPage }
