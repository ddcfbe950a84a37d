'use strict'

// The response headers of an HTTP door's outcome: one function per header family (legacy
// X-RateLimit-*, draft-6, draft-7, draft-8, draft-10 RateLimit + RateLimit-Policy, and
// Retry-After), each returning [name, value, append] entries (append: a list field other
// doors may add to). An outcome is `{ allowed, key, weight, windows: [{ name, limit,
// windowMs, remaining, resetMs }], main, retryAfterMs, at }` (lib/doors/http/door.js).

const { createHash } = require('node:crypto')

/** Whole seconds until a window's reset (delta-seconds, never negative). */
const resetS = (w) => Math.max(0, Math.ceil(w.resetMs / 1000))

/** A window's length in whole seconds, rounded up (the drafts' `w`). */
const windowS = (w) => Math.ceil(w.windowMs / 1000)

/** express-rate-limit's draft-8 partition key: base64 of the first 12 hex digits of sha256(key) */
function partitionKey(key) {
  return Buffer.from(createHash('sha256').update(key).digest('hex').slice(0, 12)).toString('base64')
}

/** The inside of a Structured Field String (RFC 9651): `"` and `\` escaped. */
function sfString(s) {
  return s.replace(/[\\"]/g, (ch) => `\\${ch}`)
}

/**
 * `X-RateLimit-Limit`, `-Remaining` and `-Reset` (epoch seconds) of the main window, as
 * express-rate-limit sends them; or, with a `form` (@fastify/rate-limit's), the reset in
 * seconds from now and the names it shows: `form.allowed` / `form.refused`, `[name, i]` (i: 0
 * limit, 1 remaining, 2 reset), and `form.retryAfter`.
 */
function legacy(o, form) {
  const main = o.windows[o.main]
  if (form) {
    const out = []
    for (const [name, i] of o.allowed ? form.allowed : form.refused) {
      out.push([name, String(i === 0 ? main.limit : i === 1 ? main.remaining : resetS(main)), false])
    }
    return out
  }
  return [
    ['X-RateLimit-Limit', String(main.limit), false],
    ['X-RateLimit-Remaining', String(main.remaining), false],
    // from the time the request was decided: resetMs is rounded up to whole ms, so `- 1`
    // keeps a window that ends on a whole second on that second
    ['X-RateLimit-Reset', String(Math.ceil((o.at + main.resetMs - 1) / 1000)), false],
  ]
}

/** draft-6: `RateLimit-Policy` and the separate `RateLimit-Limit/-Remaining/-Reset` of the main window. */
function draft6(o) {
  const main = o.windows[o.main]
  return [
    ['RateLimit-Policy', `${main.limit};w=${windowS(main)}`, false],
    ['RateLimit-Limit', String(main.limit), false],
    ['RateLimit-Remaining', String(main.remaining), false],
    ['RateLimit-Reset', String(resetS(main)), false],
  ]
}

/** draft-7: `RateLimit-Policy` and one `RateLimit` dictionary of the main window. */
function draft7(o) {
  const main = o.windows[o.main]
  return [
    ['RateLimit-Policy', `${main.limit};w=${windowS(main)}`, false],
    ['RateLimit', `limit=${main.limit}, remaining=${main.remaining}, reset=${resetS(main)}`, false],
  ]
}

/** draft-8: a `RateLimit` and a `RateLimit-Policy` item per window (with the partition key), appended. */
function draft8(o) {
  const pk = partitionKey(o.key)
  return [
    ['RateLimit', o.windows.map((w) => `"${sfString(w.name)}"; r=${w.remaining}; t=${resetS(w)}`).join(', '), true],
    [
      'RateLimit-Policy',
      o.windows.map((w) => `"${sfString(w.name)}"; q=${w.limit}; w=${windowS(w)}; pk=:${pk}:`).join(', '),
      true,
    ],
  ]
}

/** draft-10: a `RateLimit` and a `RateLimit-Policy` item per window (RFC 9651 lists), appended. */
function draft10(o) {
  return [
    ['RateLimit', o.windows.map((w) => `"${sfString(w.name)}";r=${w.remaining};t=${resetS(w)}`).join(', '), true],
    ['RateLimit-Policy', o.windows.map((w) => `"${sfString(w.name)}";q=${w.limit};w=${windowS(w)}`).join(', '), true],
  ]
}

/**
 * `Retry-After` (delta-seconds) of a refusal: at least 1, and never before the reset a window
 * without room for the request reports (draft-10: not earlier than the reset parameter).
 */
function retryAfter(o) {
  return [['Retry-After', String(retryAfterS(o)), false]]
}

/** The whole seconds of a refusal's `Retry-After`: at least 1, never before a full window's reset. */
function retryAfterS(o) {
  let retryS = Math.max(1, Math.ceil(o.retryAfterMs / 1000))
  for (const w of o.windows) if (w.remaining < o.weight) retryS = Math.max(retryS, resetS(w))
  return retryS
}

const DRAFTS = { 'draft-6': draft6, 'draft-7': draft7, 'draft-8': draft8, 'draft-10': draft10 }

/**
 * The headers of outcome `o` under a door's `legacyHeaders` and `standardHeaders` (false or a
 * draft name), as [name, value, append]. `Retry-After` on every refusal, unless `form` (the
 * legacy headers' other form, @fastify/rate-limit's) turns it off, or (express-rate-limit's
 * form) every header is: with neither legacy nor standard headers, none at all, as there.
 */
function headers(o, legacyHeaders, standardHeaders, form = null) {
  const out = legacyHeaders ? legacy(o, form) : []
  if (standardHeaders) out.push(...DRAFTS[standardHeaders](o))
  const retry = form === null ? legacyHeaders || Boolean(standardHeaders) : form.retryAfter
  if (!o.allowed && retry) out.push(...retryAfter(o))
  return out
}

module.exports = { headers, retryAfterS }
