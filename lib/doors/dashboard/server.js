'use strict'

// The dashboard's request handler: which request is its own (below the mount), the Host check
// before anything is read, routing of the page, its assets and the JSON API (query-parameter
// forms and the older path forms), the reset's CSRF checks, and errors as JSON.

const crypto = require('node:crypto')
const { ownProps } = require('../../base/errors')
const { KINDS } = require('../inspect')
const { MINUTE_MS } = require('../../store/stats')
const { parseHost, hostCheck } = require('./hosts')
const { defaultGroup, checkOptions } = require('./options')
const { HttpError, send, sendJson } = require('./respond')
const { CSP, readAssets, renderPage } = require('./page')
const { createApi } = require('./api')

const ALL_HOSTS_WARNING = 'SLUICE_DASHBOARD_ALL_HOSTS'
let warnedAllHosts = false

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

/** `dashboard(options)` whose errors name `hints` (the library's options or the CLI's flags). */
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
  const allowWrite = o.allowWrite === true
  const title = o.title === undefined ? 'sluice' : o.title
  const basePath = o.basePath === undefined ? null : o.basePath
  const groupOf = o.groupOf === undefined ? (name) => defaultGroup(name) : o.groupOf
  const refreshMs = o.refreshMs === undefined ? 5000 : o.refreshMs
  const token = crypto.randomBytes(24).toString('base64url')
  const assets = readAssets()
  const page = renderPage({ title, token, allowReset, allowWrite, refreshMs })
  const api = createApi(store, groupOf)

  /** A reset only with allowReset, from the page: its CSRF token, same origin. */
  function checkReset(req) {
    if (!allowReset) throw new HttpError(403, 'ERR_RESET_DISABLED', `reset is off: ${hints.reset}`)
    checkPage(req, 'reset')
  }

  /** A rule written (store.rules) only with allowWrite, from the page: its CSRF token, same origin. */
  function checkWrite(req) {
    if (!allowWrite) throw new HttpError(403, 'ERR_WRITE_DISABLED', `editing rules is off: ${hints.write}`)
    checkPage(req, 'a rule')
  }

  /** A request from the page: its CSRF token, same origin. */
  function checkPage(req, what) {
    const given = req.headers['x-sluice-csrf']
    const a = Buffer.from(typeof given === 'string' ? given : '')
    const b = Buffer.from(token)
    if (a.length !== b.length || !crypto.timingSafeEqual(a, b)) {
      throw new HttpError(403, 'ERR_CSRF', `missing or wrong CSRF token: ${what} from the page`)
    }
    if (req.headers['sec-fetch-site'] !== undefined && req.headers['sec-fetch-site'] !== 'same-origin') {
      throw new HttpError(403, 'ERR_CSRF', `${what} is accepted from the page only (same origin)`)
    }
  }

  /**
   * `POST api/rules?op=set&target=<JSON>&rule=<JSON>[&ttlMs=<ms>]` or `?op=delete&target=<JSON>`:
   * the store's rules (each value its own parameter, never a body a framework in front may have
   * read), checked there (ERR_INVALID_ARGUMENT: 400).
   */
  async function writeRule(req) {
    checkWrite(req)
    const q = queryOf(req)
    const one = (name) => {
      const all = q.getAll(name)
      if (all.length > 1) throw new HttpError(400, 'ERR_INVALID_ARGUMENT', `the query parameter ${name} is given once`)
      return all.length === 1 ? all[0] : undefined
    }
    const json = (name) => {
      const v = one(name)
      if (v === undefined) throw new HttpError(400, 'ERR_INVALID_ARGUMENT', `the query parameter ${name} is needed`)
      try {
        return JSON.parse(v)
      } catch {
        throw new HttpError(400, 'ERR_INVALID_ARGUMENT', `the query parameter ${name} is not JSON`)
      }
    }
    const op = one('op')
    try {
      if (op === 'set') {
        const ttl = one('ttlMs')
        await store.rules.set(json('target'), json('rule'), ttl === undefined ? undefined : { ttlMs: Number(ttl) })
        return { set: true }
      }
      if (op === 'delete') return { deleted: await store.rules.delete(json('target')) }
    } catch (err) {
      if (err && err.code === 'ERR_INVALID_ARGUMENT') throw new HttpError(400, err.code, err.message)
      throw err
    }
    throw new HttpError(400, 'ERR_INVALID_ARGUMENT', "op must be 'set' or 'delete'")
  }

  async function reset(req, kind, name, key = null) {
    checkReset(req)
    return api.reset(kind, name, key)
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
    const now = api.nowMs
    if (seg.length === 1 && seg[0] === 'limiters' && get) {
      const [info, body] = await Promise.all([api.storeInfo(), api.list()])
      return sendJson(res, 200, {
        title,
        now: now(),
        minuteMs: MINUTE_MS,
        allowReset,
        allowWrite,
        store: info,
        ...body,
      })
    }
    if (seg.length === 1 && seg[0] === 'group' && get) {
      const [kind, name] = params(req, 'kind', 'group')
      return sendJson(res, 200, { now: now(), ...(await api.groupPage(kindOf(kind), name)) })
    }
    if (seg.length === 1 && seg[0] === 'limiter' && get) {
      const [kind, name] = params(req, 'kind', 'name')
      return sendJson(res, 200, { now: now(), ...(await api.limiterPage(kindOf(kind), name)) })
    }
    if (seg.length === 1 && seg[0] === 'rules') {
      if (method !== 'POST') throw new HttpError(405, 'ERR_METHOD', 'a rule is written with a POST')
      return sendJson(res, 200, await writeRule(req))
    }
    if (seg.length === 1 && seg[0] === 'reset') {
      if (method !== 'POST') throw new HttpError(405, 'ERR_METHOD', 'reset is a POST')
      const [kind, name] = params(req, 'kind', 'name')
      // one client of an HTTP door: `key`, at most once
      const keys = queryOf(req).getAll('key')
      if (keys.length > 1) throw new HttpError(400, 'ERR_INVALID_ARGUMENT', 'the query parameter key is given once')
      return sendJson(res, 200, await reset(req, kindOf(kind), name, keys.length === 1 ? keys[0] : null))
    }
    // the older path forms: one percent-encoded segment per value
    if (seg.length === 3 && seg[0] === 'groups' && get) {
      return sendJson(res, 200, { now: now(), ...(await api.groupPage(seg[1], seg[2])) })
    }
    if (seg.length === 3 && seg[0] === 'limiters' && get) {
      return sendJson(res, 200, { now: now(), ...(await api.limiterPage(seg[1], seg[2])) })
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

module.exports = { createDashboard }
