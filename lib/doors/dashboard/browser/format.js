// The dashboard page's words for values: numbers, durations, "ago" on the server's clock,
// names with their control characters shown as escapes (as the CLI shows them), and the
// hashes and API URLs that carry every value as its own query parameter.

/** The server's clock at the last answer: "ago" is measured on it. */
let serverNow = null
export const setServerNow = (t) => {
  serverNow = t
}

export function fmt(n) {
  if (typeof n !== 'number' || !Number.isFinite(n)) return '–'
  const a = Math.abs(n)
  if (a >= 1e9) return `${(n / 1e9).toFixed(1)}G`
  if (a >= 1e6) return `${(n / 1e6).toFixed(1)}M`
  if (a >= 1e4) return `${(n / 1e3).toFixed(1)}k`
  return Number.isInteger(n) ? String(n) : n.toFixed(1)
}
export function ms(x) {
  if (typeof x !== 'number') return '–'
  if (x < 1000) return `${Math.round(x)} ms`
  if (x < 60_000) return `${(x / 1000).toFixed(1)} s`
  return `${(x / 60_000).toFixed(1)} min`
}
export function ago(t) {
  const sec = Math.max(0, Math.round(((serverNow ?? Date.now()) - t) / 1000))
  if (sec < 60) return `${sec}s ago`
  if (sec < 3600) return `${Math.round(sec / 60)}m ago`
  if (sec < 86400) return `${Math.round(sec / 3600)}h ago`
  return `${Math.round(sec / 86400)}d ago`
}
export const interval = (x) => (x % 3_600_000 === 0 ? `${x / 3_600_000}h` : x % 1000 === 0 ? `${x / 1000}s` : `${x}ms`)
export const pct = (f) => `${Math.round(f * 100)}%`

// --- names -------------------------------------------------------------------------------
/** Control characters, bidi controls, line separators, lone surrogates and `\` (lib/doors/inspect.js). */
const UNSAFE =
  /[\\\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g
const SHORT = { '\\': '\\\\', '\n': '\\n', '\r': '\\r', '\t': '\\t' }
/** A name as shown: what a terminal would show for it (`\x1b`, `\n`, `\u202e`, `\\`). */
export const shown = (name) =>
  String(name).replace(UNSAFE, (c) => {
    if (SHORT[c] !== undefined) return SHORT[c]
    const n = c.charCodeAt(0)
    return n < 0x100 ? `\\x${n.toString(16).padStart(2, '0')}` : `\\u${n.toString(16).padStart(4, '0')}`
  })

/** A hash for a view, each value its own parameter: `#/limiter?kind=bucket&name=a%2Fb`. */
const view = (what, values) => `#/${what}?${new URLSearchParams(values)}`
export const limiterHash = (kind, name) => view('limiter', { kind, name })
export const groupHash = (kind, group) => view('group', { kind, group })
/** An API path with its query parameters. */
export const apiUrl = (what, values) => `api/${what}?${new URLSearchParams(values)}`
