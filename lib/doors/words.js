// @ts-check
'use strict'

// Words for values, as the CLI (through lib/doors/inspect.js) and the dashboard's page show
// them: numbers, durations, intervals, and names with their control characters as escapes.
// One source for both: Node requires this file, and the dashboard serves it to the browser as
// an ES module (lib/doors/dashboard/page.js wraps it), so it requires nothing and touches no
// global.

/** A count: `950`, `12.5k`, `3.1M`, `2.0G`; `–` when not a finite number. */
function count(n) {
  if (typeof n !== 'number' || !Number.isFinite(n)) return '–'
  const a = Math.abs(n)
  if (a >= 1e9) return `${(n / 1e9).toFixed(1)}G`
  if (a >= 1e6) return `${(n / 1e6).toFixed(1)}M`
  if (a >= 1e4) return `${(n / 1e3).toFixed(1)}k`
  return Number.isInteger(n) ? String(n) : n.toFixed(1)
}

/** A duration in ms: `250 ms`, `1.5 s`, `2.0 min`; `–` when not a number. */
function ms(x) {
  if (typeof x !== 'number') return '–'
  if (x < 1000) return `${Math.round(x)} ms`
  if (x < 60_000) return `${(x / 1000).toFixed(1)} s`
  return `${(x / 60_000).toFixed(1)} min`
}

/** `90s`, `2h`, `1500ms`: an interval in a limit's text. */
const interval = (x) => (x % 3_600_000 === 0 ? `${x / 3_600_000}h` : x % 1000 === 0 ? `${x / 1000}s` : `${x}ms`)

/**
 * Characters a terminal (or a page) must not be handed raw in a name: C0 controls (ESC starts
 * screen clearing, cursor moves and OSC 52 clipboard writes; CR and LF make fake rows), DEL,
 * C1 controls (U+009B is a one-character CSI on terminals that read C1), the bidirectional
 * overrides, embeddings, isolates and marks (they reorder what follows on the line), the line
 * and paragraph separators, lone surrogates, and the backslash itself (so that an escaped name
 * reads back one way only).
 */
const UNSAFE =
  /[\\\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g
const SHORT = { '\\': '\\\\', '\n': '\\n', '\r': '\\r', '\t': '\\t' }

/** One unsafe character as an escape: `\n`, `\x1b`, `\x9b`, `\u202e`, `\\`. */
function escapeChar(c) {
  if (SHORT[c] !== undefined) return SHORT[c]
  const n = c.charCodeAt(0)
  return n < 0x100 ? `\\x${n.toString(16).padStart(2, '0')}` : `\\u${n.toString(16).padStart(4, '0')}`
}

/**
 * `s` safe to print on a terminal or a page: every control character (C0, DEL, C1), bidi
 * control, line separator and lone surrogate shown as an escape, and `\` as `\\`. Any other
 * text is kept.
 */
function termText(s) {
  return String(s).replace(UNSAFE, escapeChar)
}

module.exports = { count, ms, interval, termText }
