'use strict'

// sluice/dashboard: a page that shows what every limiter does, served by a plain Node request
// handler, mountable in Express (`app.use('/sluice', handler)`), Fastify and node:http.
//
//   GET  <mount>/                                   the page (assets under <mount>/assets/)
//   GET  <mount>/api/limiters                       every limiter group, busiest and fullest first
//   GET  <mount>/api/group?kind=<kind>&group=<g>    one group's limiters (its keys)
//   GET  <mount>/api/limiter?kind=<kind>&name=<n>   one limiter: options, statistics, history, state
//   POST <mount>/api/reset?kind=<kind>&name=<n>     only with allowReset and the page's CSRF token
//   POST <mount>/api/rules?op=set&target=<JSON>&rule=<JSON>[&ttlMs=N] | ?op=delete&target=<JSON>
//                                                   store.rules, only with allowWrite and the token
//                                                   (`&key=<k>`: one client of an HTTP door)
//
// Every value is its own query parameter or JSON field: nothing is joined with a separator a
// name could hold, and no name is a path segment (a name `..` or `.` would be removed by URL
// normalisation, `%2F` is decoded by some proxies). The older path forms
// (`groups/<kind>/<group>`, `limiters/<kind>/<name>[/reset]`, each segment percent-encoded)
// are still answered, for scripts written against them.
//
// Every request is refused with 403 unless its Host is allowed (`allowedHosts`): loopback
// names and IP literals by default, so that a page on another site whose name is rebound to
// 127.0.0.1 (DNS rebinding) cannot read the page, its CSRF token or the API.
//
// Everything is read from the store: the registry (`store.limiters()`), the statistics of
// every process, and live state read without charging. No asset comes from elsewhere.

// The public entry only: lib/doors/dashboard/server.js handles requests (Host check, routing, CSRF),
// api.js reads the store, page.js serves the page and its assets (lib/doors/dashboard/browser/),
// hosts.js and options.js check what is given.

const { createDashboard } = require('./server')
const { defaultGroup } = require('./options')

/** What the errors tell the user to change: the library's options (the CLI names its flags). */
const LIBRARY_HINTS = {
  reset: 'dashboard({ allowReset: true })',
  write: 'dashboard({ allowWrite: true })',
  host: (name) => `dashboard({ allowedHosts: [${JSON.stringify(name)}] })`,
  warnAllHosts: true,
}

/**
 * The dashboard's request handler: `(req, res, next?)`. A request it does not serve goes to
 * `next()` when given, else gets a 404.
 */
function dashboard(options) {
  return createDashboard(options, LIBRARY_HINTS)
}

// what lib/entries/dashboard.d.ts declares, and nothing else: the ES module entry re-exports
// every name found here (bin/sluice.js takes createDashboard and checkAllowedHosts from
// server.js and hosts.js)
module.exports = { dashboard, defaultGroup }
