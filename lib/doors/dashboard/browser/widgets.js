// The dashboard page's building blocks: per-minute charts, fill bars and cells, cards, lists
// of statistics, and a limiter's live state in words (as the server words it).

import { h, s } from './dom.js'
import { fmt, pct, shown } from './format.js'

/** Stacked bars per minute: admitted below, refused above. */
export function chart(history, { small = false } = {}) {
  const W = small ? 120 : 600
  const H = small ? 26 : 140
  const top = 1
  const bottom = small ? 0 : 1
  const n = history.length
  const max = Math.max(1, ...history.map((m) => m.admitted + m.refused))
  const bw = W / n
  const y = (v) => ((H - top - bottom) * v) / max
  const bars = history.map((m, i) => {
    const ha = y(m.admitted)
    const hr = y(m.refused)
    const x = i * bw + (small ? 0.5 : 1)
    const w = Math.max(1, bw - (small ? 1 : 2))
    const when = new Date(m.t).toLocaleTimeString([], { hour: '2-digit', minute: '2-digit' })
    return s(
      'g',
      {},
      s('title', {}, `${when}: ${m.admitted} admitted, ${m.refused} refused`),
      s('rect', { x, y: H - bottom - ha, width: w, height: ha, class: 'a' }),
      s('rect', { x, y: H - bottom - ha - hr, width: w, height: hr, class: 'r' }),
      s('rect', { x: i * bw, y: 0, width: bw, height: H, class: 'hit' }),
    )
  })
  const svg = s(
    'svg',
    {
      class: small ? 'spark' : 'chart',
      viewBox: `0 0 ${W} ${H}`,
      preserveAspectRatio: 'none',
      role: 'img',
      'aria-label': 'admitted and refused per minute',
    },
    bars,
    small ? null : s('line', { x1: 0, x2: W, y1: H - bottom, y2: H - bottom, class: 'axisline' }),
  )
  if (small) return svg
  return h(
    'div',
    { class: 'chartbox' },
    h('div', { class: 'axis' }, `${fmt(max)} / min`),
    svg,
    h('div', { class: 'axis row' }, h('span', {}, `${n} min ago`), h('span', {}, 'now')),
  )
}

export function fillBar(fill) {
  const level = fill >= 1 ? 'full' : fill >= 0.8 ? 'warn' : 'ok'
  return s(
    'svg',
    { viewBox: '0 0 100 10', preserveAspectRatio: 'none' },
    s('rect', { x: 0, y: 0, width: 100, height: 10, rx: 2, class: 'bg' }),
    s('rect', { x: 0, y: 0, width: Math.max(0, Math.min(1, fill)) * 100, height: 10, rx: 2, class: level }),
  )
}

/** What a limiter holds now, in words (the server's, by the limiter's kind: `state.text`). */
export function stateText(st) {
  if (!st) return ''
  if (st.error) return `state unavailable (${st.error.code})`
  return typeof st.text === 'string' ? st.text : ''
}

export function fillCell(fill, text) {
  if (typeof fill !== 'number') return h('span', { class: 'muted' }, text || '–')
  return h('div', { class: 'fill' }, fillBar(fill), h('span', {}, pct(fill), h('div', { class: 'sub' }, text)))
}

export const card = (value, label, cls) =>
  h('div', { class: 'card' }, h('div', { class: `value ${cls || ''}` }, value), h('div', { class: 'label' }, label))
export const statsList = (st) =>
  h(
    'dl',
    {},
    Object.entries(st).map(([k, v]) => [
      h('dt', {}, k),
      h('dd', {}, typeof v === 'number' ? v.toLocaleString() : typeof v === 'string' ? shown(v) : JSON.stringify(v)),
    ]),
  )
