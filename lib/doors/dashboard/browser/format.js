// The dashboard page's words for values: numbers, durations, "ago" on the server's clock,
// names with their control characters shown as escapes (as the CLI shows them), and the
// hashes and API URLs that carry every value as its own query parameter.

// counts (`fmt`), durations, intervals and names (`shown`: what a terminal would show for a
// name, `\x1b`, `\n`, `\u202e`, `\\`) as the CLI words them: lib/doors/words.js, served as words.js
export { count as fmt, ms, interval, termText as shown } from './words.js'

/** The server's clock at the last answer: "ago" is measured on it. */
let serverNow = null
export const setServerNow = (t) => {
  serverNow = t
}

export function ago(t) {
  const sec = Math.max(0, Math.round(((serverNow ?? Date.now()) - t) / 1000))
  if (sec < 60) return `${sec}s ago`
  if (sec < 3600) return `${Math.round(sec / 60)}m ago`
  if (sec < 86400) return `${Math.round(sec / 3600)}h ago`
  return `${Math.round(sec / 86400)}d ago`
}
export const pct = (f) => `${Math.round(f * 100)}%`

/** A hash for a view, each value its own parameter: `#/limiter?kind=bucket&name=a%2Fb`. */
const view = (what, values) => `#/${what}?${new URLSearchParams(values)}`
export const limiterHash = (kind, name) => view('limiter', { kind, name })
export const groupHash = (kind, group) => view('group', { kind, group })
/** An API path with its query parameters. */
export const apiUrl = (what, values) => `api/${what}?${new URLSearchParams(values)}`

/** How fresh a last use is (lib/store/stats-writer.js: written at every flush that finds it used). */
export const LAST_USE_NOTE =
  'Last use is written by each process at every statistics flush that finds the limiter used ' +
  '(every statsFlushMs, 5 s by default): it is up to one flush period late.'
