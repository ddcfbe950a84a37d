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

/** The assets, by file name: `{ type, body }`. */
function readAssets() {
  const assets = new Map()
  for (const [file, type] of Object.entries(ASSETS)) {
    assets.set(file, { type, body: fs.readFileSync(path.join(DIR, file)) })
  }
  return assets
}

/** The page's HTML for one dashboard. */
function renderPage({ title, token, allowReset, refreshMs }) {
  return fs
    .readFileSync(path.join(DIR, 'index.html'), 'utf8')
    .replaceAll('{{title}}', escapeHtml(title))
    .replace('{{csrf}}', token)
    .replace('{{allowReset}}', String(allowReset))
    .replace('{{refreshMs}}', String(refreshMs))
}

module.exports = { CSP, readAssets, renderPage }
