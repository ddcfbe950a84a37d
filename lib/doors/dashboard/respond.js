'use strict'

// How the dashboard answers: an error with its HTTP status and stable code, and the headers
// every answer carries (nosniff, no referrer; JSON never cached).

class HttpError extends Error {
  constructor(status, code, message) {
    super(message)
    this.status = status
    this.code = code
  }
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

module.exports = { HttpError, send, sendJson }
