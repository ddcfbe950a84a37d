'use strict'

// sluice/dashboard: a page that shows what every limiter does, served by a plain Node request
// handler, mountable in Express (`app.use('/sluice', handler)`), Fastify and node:http.
//
//   GET  <mount>/                                   the page (assets under <mount>/assets/)
//   GET  <mount>/api/limiters                       every limiter group, busiest and fullest first
//   GET  <mount>/api/group?kind=<kind>&group=<g>    one group's limiters (its keys)
//   GET  <mount>/api/limiter?kind=<kind>&name=<n>   one limiter: options, statistics, history, state
//   POST <mount>/api/reset?kind=<kind>&name=<n>     only with allowReset and the page's CSRF token
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

const crypto = require('node:crypto')
const fs = require('node:fs')
const net = require('node:net')
const path = require('node:path')
const { invalidConfig, ownProps } = require('./errors')
const { KINDS, RESETTABLE, limiterOf, stateOf, limitText } = require('./inspect')
const { MINUTE_MS } = require('./stats')

const ASSETS = {
  'app.js': 'text/javascript; charset=utf-8',
  'app.css': 'text/css; charset=utf-8',
  'favicon.svg': 'image/svg+xml',
}
/** Limiters whose statistics a list reads at most (the most recently used). */
const MAX_READ = 2000
/** Live states a list reads at most, and per group. */
const MAX_STATES = 300
const STATES_PER_GROUP = 10
/** Keys a group page lists at most (the most recently used). */
const MAX_KEYS = 500
/** Minutes that make "recent" (rates in the tables). */
const RECENT_MINUTES = 5
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

/** The default group of a limiter name: what comes before its first `_` or `:` (per-user names). */
function defaultGroup(name) {
  const m = /^(.+?)[_:]./s.exec(name)
  return m === null ? name : m[1]
}

/** A Host name as compared: lower case, without one trailing dot. */
const hostKey = (h) => h.toLowerCase().replace(/\.$/, '')

/**
 * The host name of a `Host` header value (`name[:port]`, `[v6][:port]`, an IPv4 literal):
 * `{ name, ip }`, or null when it is none of these.
 */
function parseHost(value) {
  if (typeof value !== 'string' || value.length === 0 || value.length > 300) return null
  let name
  let rest
  if (value[0] === '[') {
    const close = value.indexOf(']')
    if (close < 0) return null
    name = value.slice(1, close)
    rest = value.slice(close + 1)
    if (!net.isIPv6(name)) return null
  } else {
    const colon = value.indexOf(':')
    name = colon < 0 ? value : value.slice(0, colon)
    rest = colon < 0 ? '' : value.slice(colon)
  }
  if (rest !== '' && !/^:\d{1,5}$/.test(rest)) return null
  if (net.isIP(name)) return { name: name.toLowerCase(), ip: true }
  if (!/^[a-z0-9_-]+(\.[a-z0-9_-]+)*\.?$/i.test(name)) return null
  return { name: hostKey(name), ip: false }
}

/** Host names allowed by default: `localhost` and `*.localhost` (they resolve to loopback only). */
const isLocalName = (name) => name === 'localhost' || name.endsWith('.localhost')

/** The `allowedHosts` check: `(hostHeader) => boolean`. */
function hostCheck(allowedHosts) {
  if (allowedHosts === 'all') return () => true
  const exact = new Set()
  const suffixes = []
  for (const h of allowedHosts) {
    if (h.startsWith('.')) {
      exact.add(hostKey(h.slice(1)))
      suffixes.push(hostKey(h))
    } else exact.add(hostKey(h))
  }
  return (value) => {
    const host = parseHost(value)
    if (host === null) return false
    if (host.ip || isLocalName(host.name) || exact.has(host.name)) return true
    return suffixes.some((s) => host.name.endsWith(s))
  }
}

/** Checks an `allowedHosts` value; returns it as given. */
function checkAllowedHosts(v, what) {
  if (v === 'all') return v
  const bad = () =>
    invalidConfig(
      `${what} must be 'all' or an array of host names ("admin.example.com", ".example.com" for it and its subdomains), without port`,
    )
  if (!Array.isArray(v)) throw bad()
  for (const h of v) {
    if (typeof h !== 'string' || !/^\.?[a-z0-9_-]+(\.[a-z0-9_-]+)*\.?$/i.test(h)) throw bad()
  }
  return v
}

const escapeHtml = (s) =>
  String(s).replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c])

class HttpError extends Error {
  constructor(status, code, message) {
    super(message)
    this.status = status
    this.code = code
  }
}

function checkOptions(o) {
  if (o === null || typeof o !== 'object') throw invalidConfig('dashboard() needs options: { store }')
  const known = ['store', 'allowReset', 'title', 'basePath', 'groupOf', 'refreshMs', 'allowedHosts']
  for (const key of Object.keys(o)) {
    if (!known.includes(key)) throw invalidConfig(`unknown dashboard option ${JSON.stringify(key)}`)
  }
  const store = o.store
  if (store === null || typeof store !== 'object' || typeof store.limiters !== 'function') {
    throw invalidConfig('dashboard: store must be a MemoryStore or RedisStore')
  }
  if (o.allowReset !== undefined && typeof o.allowReset !== 'boolean') {
    throw invalidConfig('dashboard: allowReset must be a boolean')
  }
  if (o.title !== undefined && (typeof o.title !== 'string' || o.title.length > 200)) {
    throw invalidConfig('dashboard: title must be a string of at most 200 characters')
  }
  if (o.basePath !== undefined && (typeof o.basePath !== 'string' || !/^(\/[^/?#]+)+$/.test(o.basePath))) {
    throw invalidConfig('dashboard: basePath must look like "/sluice" (no trailing slash)')
  }
  if (o.groupOf !== undefined && typeof o.groupOf !== 'function') {
    throw invalidConfig('dashboard: groupOf must be a function (name, kind) => string')
  }
  if (
    o.refreshMs !== undefined &&
    (!Number.isInteger(o.refreshMs) || o.refreshMs < 0 || (o.refreshMs > 0 && o.refreshMs < 500))
  ) {
    throw invalidConfig('dashboard: refreshMs must be 0 (off) or whole ms >= 500')
  }
  if (o.allowedHosts !== undefined) checkAllowedHosts(o.allowedHosts, 'dashboard: allowedHosts')
}

/** What the errors tell the user to change: the library's options (the CLI names its flags). */
const LIBRARY_HINTS = {
  reset: 'dashboard({ allowReset: true })',
  host: (name) => `dashboard({ allowedHosts: [${JSON.stringify(name)}] })`,
  warnAllHosts: true,
}
const ALL_HOSTS_WARNING = 'SLUICE_DASHBOARD_ALL_HOSTS'
let warnedAllHosts = false

/**
 * The dashboard's request handler: `(req, res, next?)`. A request it does not serve goes to
 * `next()` when given, else gets a 404.
 */
function dashboard(options) {
  return createDashboard(options, LIBRARY_HINTS)
}

/** `dashboard(options)` whose errors name `hints` (the CLI's flags) instead of the options. */
function createDashboard(options, hints) {
  checkOptions(options)
  const o = ownProps(options)
  const hostAllowed = hostCheck(o.allowedHosts === undefined ? [] : o.allowedHosts.slice())
  if (o.allowedHosts === 'all' && hints.warnAllHosts && !warnedAllHosts) {
    warnedAllHosts = true
    process.emitWarning(
      "dashboard({ allowedHosts: 'all' }) answers requests for any Host name: a web page on any site " +
        'can rebind its name to this server (DNS rebinding) and read every limiter' +
        `${o.allowReset === true ? ', and reset them' : ''}. Use it only when a proxy in front checks Host.`,
      { type: 'SluiceWarning', code: ALL_HOSTS_WARNING },
    )
  }
  const store = o.store
  const allowReset = o.allowReset === true
  const title = o.title === undefined ? 'sluice' : o.title
  const basePath = o.basePath === undefined ? null : o.basePath
  const groupOf = o.groupOf === undefined ? (name) => defaultGroup(name) : o.groupOf
  const refreshMs = o.refreshMs === undefined ? 5000 : o.refreshMs
  const token = crypto.randomBytes(24).toString('base64url')
  const assets = new Map()
  for (const [file, type] of Object.entries(ASSETS)) {
    assets.set(file, { type, body: fs.readFileSync(path.join(__dirname, 'dashboard', file)) })
  }
  const page = fs
    .readFileSync(path.join(__dirname, 'dashboard', 'index.html'), 'utf8')
    .replaceAll('{{title}}', escapeHtml(title))
    .replace('{{csrf}}', token)
    .replace('{{allowReset}}', String(allowReset))
    .replace('{{refreshMs}}', String(refreshMs))

  /** ms on the store's clock (an injected clock in tests), for "last use ... ago" */
  const nowMs = () => (store.clock ? store.clock.now() : Date.now())

  /** The group of a registry entry (a user's groupOf that throws: the name alone). */
  const group = (l) => {
    try {
      const g = groupOf(l.name, l.kind)
      return typeof g === 'string' && g.length > 0 ? g : l.name
    } catch {
      return l.name
    }
  }

  async function storeInfo() {
    const redis = typeof store.status === 'string'
    return {
      type: redis ? 'redis' : 'memory',
      status: redis ? store.status : 'up',
      keyPrefix: store.keyPrefix,
      statsDropped: store.statsDropped,
    }
  }

  /** Reads the statistics of `infos` and the live state of those chosen by `wantState`. */
  async function detail(infos, wantState) {
    const details = await store._statsDetail(infos)
    const states = await Promise.all(
      infos.map((info, i) =>
        wantState(info, i)
          ? stateOf(store, info).catch((err) => ({ fill: null, error: { code: err.code || 'ERR_INTERNAL' } }))
          : null,
      ),
    )
    return infos.map((info, i) => {
      const history = details[i].history
      const recent = history.slice(-RECENT_MINUTES)
      return {
        kind: info.kind,
        name: info.name,
        options: info.options,
        limit: limitText(info),
        lastUse: info.lastUse,
        resettable: RESETTABLE.includes(info.kind),
        stats: details[i].stats,
        history,
        recent: {
          admitted: recent.reduce((s, m) => s + m.admitted, 0),
          refused: recent.reduce((s, m) => s + m.refused, 0),
          minutes: RECENT_MINUTES,
        },
        state: states[i],
      }
    })
  }

  const sum = (rows, pick) => rows.reduce((s, r) => s + pick(r), 0)

  /** One group's summary from its limiters' rows (most recent first). */
  function summary(kind, name, rows) {
    const stats = {}
    for (const r of rows) for (const [k, v] of Object.entries(r.stats)) stats[k] = (stats[k] || 0) + v
    const history = rows[0].history.map((m, i) => ({
      t: m.t,
      admitted: sum(rows, (r) => r.history[i].admitted),
      refused: sum(rows, (r) => r.history[i].refused),
    }))
    let fullest = null
    for (const r of rows) {
      if (
        r.state !== null &&
        typeof r.state.fill === 'number' &&
        (fullest === null || r.state.fill > fullest.state.fill)
      ) {
        fullest = r
      }
    }
    return {
      kind,
      group: name,
      keys: rows.length,
      name: rows.length === 1 ? rows[0].name : null,
      limit: rows[0].limit,
      lastUse: rows[0].lastUse,
      resettable: rows.length === 1 && rows[0].resettable,
      stats,
      history,
      recent: {
        admitted: sum(rows, (r) => r.recent.admitted),
        refused: sum(rows, (r) => r.recent.refused),
        minutes: RECENT_MINUTES,
      },
      fill: fullest === null ? null : fullest.state.fill,
      fullest: fullest === null ? null : fullest.name,
      state: rows.length === 1 ? rows[0].state : null,
    }
  }

  /** Hot first (nearly full or refusing lately), then the busiest, then the latest used. */
  function byHeat(a, b) {
    const hot = (g) => (g.recent.refused > 0 || (g.fill !== null && g.fill >= 0.8) ? 1 : 0)
    return (
      hot(b) - hot(a) ||
      b.recent.admitted + b.recent.refused - (a.recent.admitted + a.recent.refused) ||
      (b.fill || 0) - (a.fill || 0) ||
      b.lastUse - a.lastUse
    )
  }

  async function list() {
    const all = await store.limiters()
    const infos = all.slice(0, MAX_READ)
    // kind, then group: two keys, never one string joined from both
    const groups = []
    const byKind = new Map()
    infos.forEach((info, i) => {
      const name = group(info)
      if (!byKind.has(info.kind)) byKind.set(info.kind, new Map())
      const ofKind = byKind.get(info.kind)
      if (!ofKind.has(name)) {
        const g = { kind: info.kind, name, members: [] }
        ofKind.set(name, g)
        groups.push(g)
      }
      ofKind.get(name).members.push(i)
    })
    // live state: each group's most recent few, up to MAX_STATES in all
    const want = new Set()
    for (const { members } of groups) {
      for (const i of members.slice(0, STATES_PER_GROUP)) if (want.size < MAX_STATES) want.add(i)
    }
    const rows = await detail(infos, (_, i) => want.has(i))
    const out = groups.map(({ kind, name, members }) =>
      summary(
        kind,
        name,
        members.map((i) => rows[i]),
      ),
    )
    out.sort(byHeat)
    return { limiters: all.length, read: infos.length, groups: out }
  }

  async function groupPage(kind, name) {
    const all = (await store.limiters()).filter((l) => l.kind === kind && group(l) === name)
    if (all.length === 0) throw new HttpError(404, 'ERR_NOT_FOUND', `no ${kind} limiters in group ${name}`)
    const infos = all.slice(0, MAX_KEYS)
    const rows = await detail(infos, (_, i) => i < 50)
    const keys = rows.map((r) => ({
      name: r.name,
      lastUse: r.lastUse,
      stats: r.stats,
      recent: r.recent,
      fill: r.state === null ? null : r.state.fill,
      state: r.state,
    }))
    keys.sort(
      (a, b) =>
        b.recent.admitted + b.recent.refused - (a.recent.admitted + a.recent.refused) ||
        (b.fill || 0) - (a.fill || 0) ||
        b.lastUse - a.lastUse,
    )
    return { group: summary(kind, name, rows), keys, total: all.length }
  }

  async function find(kind, name) {
    const info = (await store.limiters()).find((l) => l.kind === kind && l.name === name)
    if (info === undefined) throw new HttpError(404, 'ERR_NOT_FOUND', `no ${kind} limiter named ${name}`)
    return info
  }

  async function limiterPage(kind, name) {
    const info = await find(kind, name)
    const [row] = await detail([info], () => true)
    return { ...row, group: group(info) }
  }

  async function reset(req, kind, name) {
    if (!allowReset) throw new HttpError(403, 'ERR_RESET_DISABLED', `reset is off: ${hints.reset}`)
    const given = req.headers['x-sluice-csrf']
    const a = Buffer.from(typeof given === 'string' ? given : '')
    const b = Buffer.from(token)
    if (a.length !== b.length || !crypto.timingSafeEqual(a, b)) {
      throw new HttpError(403, 'ERR_CSRF', 'missing or wrong CSRF token: reset from the page')
    }
    if (req.headers['sec-fetch-site'] !== undefined && req.headers['sec-fetch-site'] !== 'same-origin') {
      throw new HttpError(403, 'ERR_CSRF', 'reset is accepted from the page only (same origin)')
    }
    if (!RESETTABLE.includes(kind)) {
      throw new HttpError(400, 'ERR_INVALID_ARGUMENT', `a ${kind} limiter cannot be reset`)
    }
    const info = await find(kind, name)
    await limiterOf(store, info).reset()
    return { reset: true, kind, name }
  }

  function send(res, status, type, body, extra = {}) {
    res.statusCode = status
    res.setHeader('Content-Type', type)
    res.setHeader('X-Content-Type-Options', 'nosniff')
    res.setHeader('Referrer-Policy', 'no-referrer')
    for (const [k, v] of Object.entries(extra)) res.setHeader(k, v)
    res.end(body)
  }

  function sendJson(res, status, value) {
    send(res, status, 'application/json; charset=utf-8', JSON.stringify(value), { 'Cache-Control': 'no-store' })
  }

  /** The request's path below the mount, or null when it is not the dashboard's. */
  function below(req) {
    const url = typeof req.url === 'string' ? req.url : '/'
    const q = url.indexOf('?')
    let p = q < 0 ? url : url.slice(0, q)
    if (basePath !== null && !(typeof req.baseUrl === 'string' && req.baseUrl.length > 0)) {
      if (p !== basePath && !p.startsWith(`${basePath}/`)) return null
      p = p.slice(basePath.length)
    }
    return p
  }

  /** The request's query parameters. */
  function queryOf(req) {
    const url = typeof req.url === 'string' ? req.url : ''
    const q = url.indexOf('?')
    return new URLSearchParams(q < 0 ? '' : url.slice(q + 1))
  }

  /** The query parameters `names`, each given exactly once (else 400). */
  function params(req, ...names) {
    const query = queryOf(req)
    return names.map((n) => {
      const all = query.getAll(n)
      if (all.length !== 1) {
        throw new HttpError(400, 'ERR_INVALID_ARGUMENT', `the query parameter ${n} is needed, once`)
      }
      return all[0]
    })
  }

  /** A kind from the API: one of KINDS (else 404). */
  function kindOf(kind) {
    if (!KINDS.includes(kind)) throw new HttpError(404, 'ERR_NOT_FOUND', `no limiter kind ${kind}`)
    return kind
  }

  /** The Host header (HTTP/2: :authority) when it is allowed, else a 403. */
  function checkHost(req) {
    const value = req.headers.host ?? req.headers[':authority']
    if (hostAllowed(value)) return
    const host = parseHost(value)
    const hint = host === null ? '' : `; to allow it: ${hints.host(host.name)}`
    throw new HttpError(
      403,
      'ERR_HOST_NOT_ALLOWED',
      `Host ${value === undefined ? '(none)' : JSON.stringify(String(value))} is not allowed${hint}`,
    )
  }

  async function serve(req, res, p) {
    checkHost(req)
    const method = req.method
    if (p === '' || p === '/') {
      // the page's links are relative: it must be served at `<mount>/`
      const full = (typeof req.originalUrl === 'string' ? req.originalUrl : req.url).split('?')[0]
      if (p === '' || !full.endsWith('/')) {
        res.statusCode = 302
        res.setHeader('Location', `${full}/`)
        return res.end()
      }
      if (method !== 'GET' && method !== 'HEAD') throw new HttpError(405, 'ERR_METHOD', 'GET only')
      return send(res, 200, 'text/html; charset=utf-8', page, {
        'Content-Security-Policy': CSP,
        'Cache-Control': 'no-store',
        'X-Frame-Options': 'DENY',
      })
    }
    const parts = p.slice(1).split('/')
    if (parts[0] === 'assets' && parts.length === 2 && assets.has(parts[1])) {
      if (method !== 'GET' && method !== 'HEAD') throw new HttpError(405, 'ERR_METHOD', 'GET only')
      const a = assets.get(parts[1])
      return send(res, 200, a.type, a.body, { 'Cache-Control': 'public, max-age=300' })
    }
    if (parts[0] !== 'api') return false
    let seg
    try {
      seg = parts.slice(1).map(decodeURIComponent)
    } catch {
      throw new HttpError(400, 'ERR_INVALID_ARGUMENT', 'malformed path')
    }
    if (seg.length >= 3 && !KINDS.includes(seg[1])) {
      throw new HttpError(404, 'ERR_NOT_FOUND', `no limiter kind ${seg[1]}`)
    }
    const get = method === 'GET' || method === 'HEAD'
    if (seg.length === 1 && seg[0] === 'limiters' && get) {
      const [info, body] = await Promise.all([storeInfo(), list()])
      return sendJson(res, 200, { title, now: nowMs(), minuteMs: MINUTE_MS, allowReset, store: info, ...body })
    }
    if (seg.length === 1 && seg[0] === 'group' && get) {
      const [kind, name] = params(req, 'kind', 'group')
      return sendJson(res, 200, { now: nowMs(), ...(await groupPage(kindOf(kind), name)) })
    }
    if (seg.length === 1 && seg[0] === 'limiter' && get) {
      const [kind, name] = params(req, 'kind', 'name')
      return sendJson(res, 200, { now: nowMs(), ...(await limiterPage(kindOf(kind), name)) })
    }
    if (seg.length === 1 && seg[0] === 'reset') {
      if (method !== 'POST') throw new HttpError(405, 'ERR_METHOD', 'reset is a POST')
      const [kind, name] = params(req, 'kind', 'name')
      return sendJson(res, 200, await reset(req, kindOf(kind), name))
    }
    // the older path forms: one percent-encoded segment per value
    if (seg.length === 3 && seg[0] === 'groups' && get) {
      return sendJson(res, 200, { now: nowMs(), ...(await groupPage(seg[1], seg[2])) })
    }
    if (seg.length === 3 && seg[0] === 'limiters' && get) {
      return sendJson(res, 200, { now: nowMs(), ...(await limiterPage(seg[1], seg[2])) })
    }
    if (seg.length === 4 && seg[0] === 'limiters' && seg[3] === 'reset') {
      if (method !== 'POST') throw new HttpError(405, 'ERR_METHOD', 'reset is a POST')
      return sendJson(res, 200, await reset(req, seg[1], seg[2]))
    }
    throw new HttpError(404, 'ERR_NOT_FOUND', 'no such API')
  }

  return function sluiceDashboard(req, res, next) {
    const p = below(req)
    const pass = () => {
      if (typeof next === 'function') return next()
      sendJson(res, 404, { error: { code: 'ERR_NOT_FOUND', message: 'not found' } })
    }
    if (p === null) return pass()
    serve(req, res, p).then(
      (served) => {
        if (served === false) pass()
      },
      (err) => {
        if (res.headersSent) return res.destroy()
        if (err instanceof HttpError)
          return sendJson(res, err.status, { error: { code: err.code, message: err.message } })
        // a store failure: its code, 503 (the page shows the store as down)
        const code = typeof err.code === 'string' ? err.code : 'ERR_INTERNAL'
        sendJson(res, 503, { error: { code, message: String(err.message) } })
      },
    )
  }
}

// createDashboard and checkAllowedHosts are for bin/sluice.js (not part of the typed API)
module.exports = { dashboard, defaultGroup, createDashboard, checkAllowedHosts }
