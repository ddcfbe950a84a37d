'use strict'
// Reading what an upstream's response says about its limits (sluice/fetch): Retry-After, the
// IETF RateLimit / RateLimit-Policy fields (draft-10 and the draft-6/7/8 forms), the legacy
// X-RateLimit-Limit/-Remaining/-Reset (reset as epoch seconds, epoch ms or delta, detected)
// and the x-ratelimit-*-requests family (Go durations such as `6m0s`, `1.5s`). A header that is
// malformed or hostile (negative, NaN, huge, too long, too many items, non-ASCII) is ignored or
// clamped and counted in `hostile`; nothing here throws.

const { retryAfterMs } = require('../../base/retryafter')

/** Longest header value read; a longer one is ignored (and counted). */
const MAX_VALUE = 4096
/** Most list items read from one field; the rest are ignored (and counted). */
const MAX_ITEMS = 16
/** A limit above MAX_LIMIT is not believed (and counted). */
const { MAX_LIMIT } = require('../../store/bounds')
/** Printable ASCII and tab only (RFC 9110 field values; obs-text is not ours to read). */
const ASCII = /^[\t\x20-\x7e]*$/
const NUMBER = /^\d{1,15}(?:\.\d{1,9})?$/
/** A Go duration (`6m0s`, `1.5s`, `20ms`, `1h2m3.5s`), as OpenAI and others send it. */
const DURATION = /^(?:(\d{1,9}(?:\.\d{1,9})?)(h|ms|m|s|us|µs|ns))+$/
const DURATION_PART = /(\d{1,9}(?:\.\d{1,9})?)(h|ms|m|s|us|µs|ns)/g
const UNIT_MS = { h: 3_600_000, m: 60_000, s: 1000, ms: 1, us: 1e-3, µs: 1e-3, ns: 1e-6 }
/** A reset at or above this reads as epoch seconds (2001-09-09); at or above 1e12, epoch ms. */
const EPOCH_S = 1e9
const EPOCH_MS = 1e12
/** A learned rate is paced at this share of what the upstream states (jitter on the way there). */
const LEARNED_SHARE = 0.98
/** A learned limit is forgotten this long after the last response that stated it (at least one window). */
const LEARNED_TTL_MS = 60_000

/**
 * What one response said, and how many values were ignored or clamped (`hostile`).
 * `blockMs`: how long nobody should call (Retry-After, or an exhausted quota until its reset),
 * capped at `maxBlockMs`; 0 when nothing asks to wait; `retryAfterMs` and `quotaBlockMs`: each
 * of the two alone (a Retry-After blocks the fleet only on a throttled answer: on a 2xx it is a
 * polling hint). `policy`: the quota the upstream states
 * (`{ limit, windowMs }`, its shortest window), or null; `quota`: a limit and its reset when no
 * window is stated. `remaining`/`resetMs`: of the window
 * nearest to exhaustion, or null.
 */
class Learned {
  constructor() {
    this.blockMs = 0
    this.retryAfterMs = 0 // Retry-After alone (capped): it blocks only on a throttled answer
    this.quotaBlockMs = 0 // an exhausted quota until its reset (capped): it blocks on any answer
    this.policy = null
    this.remaining = null
    this.resetMs = null
    this.hostile = 0
    this.seen = false // any rate header at all (a Retry-After alone is not one)
    this.quota = null // { limit, resetMs }: a limit until a reset, with no window stated (X-RateLimit-*, draft-6)
  }
}

/** The value of header `name` from `get` (a function of a lower-case name), checked; null if absent or hostile. */
function field(get, name, out) {
  const v = get(name)
  if (v === null || v === undefined) return null
  const text = Array.isArray(v) ? v.join(', ') : String(v)
  if (text.length > MAX_VALUE || !ASCII.test(text)) {
    out.hostile++
    return null
  }
  return text.trim()
}

/** A non-negative decimal number, or null (counted when present but malformed). */
function number(text, out) {
  if (text === null || text === undefined) return null
  const t = String(text).trim()
  if (!NUMBER.test(t)) {
    out.hostile++
    return null
  }
  return Number(t)
}

/** A Go duration in ms (or plain seconds), or null (counted when malformed). */
function duration(text, out) {
  if (text === null) return null
  if (NUMBER.test(text)) return Number(text) * 1000
  if (!DURATION.test(text)) {
    out.hostile++
    return null
  }
  let ms = 0
  for (const m of text.matchAll(DURATION_PART)) ms += Number(m[1]) * UNIT_MS[m[2]]
  return ms
}

/** Splits a list field at commas outside quoted strings; at most MAX_ITEMS items (the rest counted). */
function items(text, out) {
  const list = []
  let start = 0
  let quoted = false
  for (let i = 0; i <= text.length; i++) {
    const ch = text[i]
    if (ch === '"' && text[i - 1] !== '\\') quoted = !quoted
    if (i === text.length || (ch === ',' && !quoted)) {
      const item = text.slice(start, i).trim()
      if (item) list.push(item)
      start = i + 1
    }
  }
  if (list.length > MAX_ITEMS) {
    out.hostile++
    list.length = MAX_ITEMS
  }
  return list
}

/** The parameters of one list item (`"name";q=100;w=60` or `100;w=60` or `limit=100`): a null-prototype map. */
function params(item) {
  const map = Object.create(null)
  const parts = item.split(';')
  for (let i = 0; i < parts.length; i++) {
    const p = parts[i].trim()
    const eq = p.indexOf('=')
    if (eq < 0) {
      if (i === 0) map[''] = p
      continue
    }
    map[p.slice(0, eq).trim().toLowerCase()] = p.slice(eq + 1).trim()
  }
  return map
}

/** Notes a quota of `limit` per `windowMs`: the shortest window is the one paced to. */
function policy(out, limit, windowMs) {
  if (limit === null || windowMs === null) return
  if (limit < 1 || limit > MAX_LIMIT || !(windowMs >= 1) || windowMs > 31_536_000_000) {
    out.hostile++
    return
  }
  out.seen = true
  if (out.policy === null || windowMs < out.policy.windowMs) out.policy = { limit, windowMs }
}

/** Notes `remaining` until a reset `resetMs` away; an exhausted quota blocks until its reset. */
function window(out, remaining, resetMs) {
  if (remaining === null) return
  out.seen = true
  if (out.remaining === null || remaining < out.remaining) {
    out.remaining = remaining
    out.resetMs = resetMs
  }
  if (remaining < 1 && resetMs !== null && resetMs > out.quotaBlockMs) out.quotaBlockMs = resetMs
}

/** A reset value as ms from now: epoch seconds, epoch ms or delta-seconds, detected by size. */
function resetOf(value, nowMs) {
  if (value === null) return null
  if (value >= EPOCH_MS) return Math.max(0, Math.ceil(value - nowMs))
  if (value >= EPOCH_S) return Math.max(0, Math.ceil(value * 1000 - nowMs))
  return Math.ceil(value * 1000)
}

/** IETF RateLimit-Policy: draft-8/10 (`"n";q=100;w=60`) and draft-6/7 (`100;w=60`). */
function readPolicy(text, out) {
  for (const item of items(text, out)) {
    const p = params(item)
    const limit = p.q !== undefined ? number(p.q, out) : /^\d/.test(p[''] || '') ? number(p[''], out) : null
    const w = p.w !== undefined ? number(p.w, out) : null
    policy(out, limit, w === null ? null : w * 1000)
  }
}

/** IETF RateLimit: draft-8/10 (`"n";r=0;t=30` per item) and draft-7 (`limit=100, remaining=0, reset=30`). */
function readRateLimit(text, out) {
  const list = items(text, out)
  if (list.length > 0 && /^(limit|remaining|reset)\s*=/i.test(list[0])) {
    const d = Object.create(null)
    for (const item of list) Object.assign(d, params(item))
    const reset = number(d.reset ?? null, out)
    window(out, number(d.remaining ?? null, out), reset === null ? null : reset * 1000)
    return
  }
  for (const item of list) {
    const p = params(item)
    const t = p.t !== undefined ? number(p.t, out) : null
    window(out, p.r !== undefined ? number(p.r, out) : null, t === null ? null : t * 1000)
  }
}

/**
 * Reads a response's headers: `get(name)` returns a header's value (string, string[] or
 * null/undefined) for a lower-case name; `nowMs` is the time to read dates and epoch resets
 * against; `maxBlockMs` caps any block (a longer one is clamped and counted).
 */
function learn(get, nowMs, maxBlockMs) {
  const out = new Learned()
  const ra = field(get, 'retry-after', out)
  if (ra !== null && ra !== '') {
    try {
      out.retryAfterMs = retryAfterMs(ra, nowMs)
    } catch {
      out.hostile++
    }
  }
  const pol = field(get, 'ratelimit-policy', out)
  if (pol !== null) readPolicy(pol, out)
  const rl = field(get, 'ratelimit', out)
  if (rl !== null) readRateLimit(rl, out)
  // draft-6's separate fields, then the legacy X- ones (limit alone states no window)
  for (const prefix of ['ratelimit-', 'x-ratelimit-']) {
    const remaining = number(field(get, `${prefix}remaining`, out), out)
    if (remaining === null) continue
    const reset = number(field(get, `${prefix}reset`, out), out)
    const resetMs = prefix === 'ratelimit-' ? (reset === null ? null : reset * 1000) : resetOf(reset, nowMs)
    window(out, remaining, resetMs)
    const limit = number(field(get, `${prefix}limit`, out), out)
    // these fields state no window: the caller estimates it from the longest reset it sees;
    // a reset in whole epoch seconds is up to a second later than the true one (`slackMs`: the
    // window is at least the longest reset less that; else an upstream whose reset is a second
    // away reads as a 2 s window, half its rate)
    if (limit !== null && pol === null && resetMs !== null) {
      const slackMs = prefix === 'x-ratelimit-' && reset >= EPOCH_S && reset < EPOCH_MS ? 1000 : 0
      if (limit < 1 || limit > MAX_LIMIT) out.hostile++
      else out.quota = { limit, resetMs, slackMs }
    }
  }
  // OpenAI's family: x-ratelimit-limit-requests per the window the reset duration spans
  const limitR = number(field(get, 'x-ratelimit-limit-requests', out), out)
  const remainingR = number(field(get, 'x-ratelimit-remaining-requests', out), out)
  const resetR = duration(field(get, 'x-ratelimit-reset-requests', out), out)
  if (remainingR !== null) window(out, remainingR, resetR === null ? null : Math.ceil(resetR))
  if (limitR !== null && remainingR !== null && resetR !== null && resetR > 0 && limitR > remainingR) {
    // `limit - remaining` calls were spent and refill over `reset`: the refill rate is limit per
    // (reset * limit / (limit - remaining))
    policy(out, limitR, Math.ceil((resetR * limitR) / (limitR - remainingR)))
  }
  if (out.retryAfterMs > maxBlockMs) {
    out.retryAfterMs = maxBlockMs
    out.hostile++
  }
  if (out.quotaBlockMs > maxBlockMs) {
    out.quotaBlockMs = maxBlockMs
    out.hostile++
  }
  out.blockMs = Math.max(out.retryAfterMs, out.quotaBlockMs)
  return out
}

/** `get` over a WHATWG Headers object. */
const fromHeaders = (headers) => (name) => headers.get(name)

/** `get` over undici's response headers (an object of lower-case names to string or string[]). */
const fromObject = (headers) => (name) => (headers ? headers[name] : undefined)

/**
 * Keeps in `gate` (lib/doors/fetch/gate.js) what a response stated about its key's limits
 * (`l`, what learn() read); answers the rate to send to the store (`{ qps, ttlMs }`) when it
 * changed or half its time has passed, else null.
 */
function remember(gate, l, now) {
  let policy = l.policy
  if (policy === null && l.quota !== null) {
    // no window stated: the longest reset seen lately stands for it
    if (gate.windowUntilMs <= now) gate.windowMs = 0
    gate.windowMs = Math.max(gate.windowMs, l.quota.resetMs - l.quota.slackMs, 1000)
    gate.windowUntilMs = now + Math.max(LEARNED_TTL_MS, gate.windowMs)
    policy = { limit: l.quota.limit, windowMs: gate.windowMs }
  }
  if (policy === null) return null
  gate.learned = policy
  // a stated rate slower than the floor (adaptive.minQps when given, else one call per
  // maxBlockMs) is clamped to it and counted: an upstream cannot stall a key for longer than
  // any block it may ask for; nor is a rate remembered past maxBlockMs
  const { adaptive, maxBlockMs } = gate.door.config
  const floor = adaptive !== null && adaptive.minQpsGiven ? adaptive.minQps : 1000 / maxBlockMs
  let qps = ((policy.limit * 1000) / policy.windowMs) * LEARNED_SHARE
  if (qps < floor) {
    qps = floor
    gate.counts.hostile++
  }
  const ttlMs = Math.max(LEARNED_TTL_MS, Math.min(policy.windowMs, maxBlockMs))
  if (Math.abs(qps - gate.learnedQps) <= 0.001 * qps && now < gate.learnedAtMs + ttlMs / 2) return null
  gate.learnedQps = qps
  gate.learnedAtMs = now
  return { qps, ttlMs }
}

module.exports = { learn, remember, fromHeaders, fromObject, MAX_VALUE, MAX_ITEMS, LEARNED_TTL_MS }
