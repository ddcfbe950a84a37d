'use strict'
// A fake third-party API on loopback with a hidden limit shared by all its callers: a token
// bucket (`limit` per second, burst `burst`) or a fixed one-second window, answering 429 with
// Retry-After when over it, in one of three dialects: no rate headers ('none'), IETF draft-10
// RateLimit / RateLimit-Policy ('draft10'), or X-RateLimit-* ('xrl', reset as epoch seconds or
// as delta). It counts what it served and refused, per second. Used by the sluice/fetch tests
// and the benchmark (bench/fetch.js).

const http = require('node:http')

/**
 * Starts an upstream; resolves `{ url, counts, close(), reset() }`. `now()` is its clock (ms;
 * default the process's monotonic clock plus the epoch at start), `fixed` answers `{ status,
 * headers }` for every request instead (a scripted upstream).
 */
function startUpstream(o = {}) {
  const limit = o.limit ?? 100
  const burst = o.burst ?? Math.max(1, Math.round(limit / 20))
  const shape = o.shape ?? 'bucket'
  const dialect = o.dialect ?? 'none'
  const reset = o.reset ?? 'epoch'
  const epoch = Date.now() - performance.now()
  const now = o.now ?? (() => epoch + performance.now())
  // per second since `start`: [requests, served, refused]
  const counts = { served: 0, refused: 0, requests: 0, perSecond: new Map(), firstHeadersAt: null, start: now() }
  const tally = (t, i) => {
    const s = Math.floor((t - counts.start) / 1000)
    let row = counts.perSecond.get(s)
    if (row === undefined) counts.perSecond.set(s, (row = [0, 0, 0]))
    row[i]++
  }
  let tokens = burst
  let last = now()
  let windowStart = Math.floor(now() / 1000) * 1000
  let used = 0

  function decide(t) {
    if (shape === 'window') {
      const ws = Math.floor(t / 1000) * 1000
      if (ws !== windowStart) {
        windowStart = ws
        used = 0
      }
      const ok = used < limit
      if (ok) used++
      return { ok, remaining: limit - used, resetAt: windowStart + 1000, retryMs: windowStart + 1000 - t }
    }
    tokens = Math.min(burst, tokens + ((t - last) * limit) / 1000)
    last = t
    const ok = tokens >= 1
    if (ok) tokens -= 1
    const fullAt = t + ((burst - tokens) * 1000) / limit
    return { ok, remaining: Math.floor(tokens), resetAt: fullAt, retryMs: ((1 - tokens) * 1000) / limit }
  }

  function rateHeaders(res, d, t) {
    const resetS = Math.max(0, Math.ceil((d.resetAt - t) / 1000))
    if (dialect === 'draft10') {
      res.setHeader('RateLimit-Policy', `"api";q=${limit};w=1`)
      res.setHeader(
        'RateLimit',
        `"api";r=${d.remaining};t=${d.remaining > 0 ? resetS : Math.max(1, Math.ceil(d.retryMs / 1000))}`,
      )
    } else if (dialect === 'xrl') {
      res.setHeader('X-RateLimit-Limit', String(limit))
      res.setHeader('X-RateLimit-Remaining', String(d.remaining))
      // a bucket states its rate as `limit` per second: the reset is a second away while tokens remain
      const at = d.remaining > 0 ? (shape === 'window' ? d.resetAt : t + 1000) : t + Math.max(1, d.retryMs)
      res.setHeader(
        'X-RateLimit-Reset',
        reset === 'epoch' ? String(Math.ceil(at / 1000)) : String(Math.ceil((at - t) / 1000)),
      )
    }
  }

  const server = http.createServer((req, res) => {
    counts.requests++
    if (o.fixed) {
      const { status, headers = {} } = o.fixed(req, counts)
      for (const [k, v] of Object.entries(headers)) if (v !== undefined) res.setHeader(k, v)
      res.statusCode = status
      if (status === 200) counts.served++
      else counts.refused++
      res.end(status === 200 ? 'ok' : 'no')
      return
    }
    const t = now()
    tally(t, 0)
    const d = decide(t)
    if (dialect !== 'none') {
      rateHeaders(res, d, t)
      if (counts.firstHeadersAt === null) counts.firstHeadersAt = t
    }
    if (d.ok) {
      counts.served++
      tally(t, 1)
      res.end('ok')
    } else {
      counts.refused++
      tally(t, 2)
      res.statusCode = 429
      res.setHeader('Retry-After', String(Math.max(1, Math.ceil(d.retryMs / 1000))))
      res.end('slow down')
    }
  })
  server.keepAliveTimeout = 30_000
  return new Promise((resolve) => {
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address()
      resolve({
        url: `http://127.0.0.1:${port}`,
        counts,
        server,
        /** Forgets every count; seconds count from now. */
        reset() {
          Object.assign(counts, { served: 0, refused: 0, requests: 0, firstHeadersAt: null, start: now() })
          counts.perSecond.clear()
        },
        close: () =>
          new Promise((r) => {
            server.closeAllConnections()
            server.close(() => r())
          }),
      })
    })
  })
}

module.exports = { startUpstream }
