// The dashboard page's detail views: one group's keys, and one limiter (its live state,
// statistics, options, history, and a reset button when the server allows resets).

import { h, meta } from './dom.js'
import { fmt, ms, ago, interval, pct, shown, limiterHash, groupHash, apiUrl, LAST_USE_NOTE } from './format.js'
import { chart, stateText, fillCell, card, statsList } from './widgets.js'

const CSRF = meta('sluice-csrf')
const ALLOW_RESET = meta('sluice-allow-reset') === 'true'
const ALLOW_WRITE = meta('sluice-allow-write') === 'true'

/** One group: its keys, busiest first. */
export function groupView(d) {
  const g = d.group
  const rows = d.keys.map((k) => {
    const target = limiterHash(g.kind, k.name)
    return h(
      'tr',
      { 'data-name': k.name, onclick: () => (location.hash = target) },
      h('td', {}, h('a', { class: 'name', href: target }, shown(k.name))),
      h('td', {}, fillCell(k.fill, stateText(k.state))),
      h('td', { class: 'num' }, fmt(k.recent.admitted), h('div', { class: 'sub' }, `${fmt(k.stats.admitted)} in all`)),
      h(
        'td',
        { class: `num ${k.recent.refused ? 'refused' : ''}` },
        fmt(k.recent.refused),
        h('div', { class: 'sub' }, `${fmt(k.stats.refused)} in all`),
      ),
      h('td', { class: 'sub' }, ago(k.lastUse)),
    )
  })
  return [
    h('div', { class: 'crumbs' }, h('a', { href: '#/' }, '← all limiters')),
    h(
      'h2',
      {},
      h('span', { class: 'kind' }, g.kind),
      ' ',
      h('span', { class: 'name' }, shown(g.group)),
      h('span', { class: 'muted' }, ` · ${fmt(d.total)} keys · ${g.limit}`),
    ),
    h(
      'div',
      { class: 'cards' },
      card(fmt(g.recent.admitted), `admitted, last ${g.recent.minutes} min`),
      card(fmt(g.recent.refused), `refused, last ${g.recent.minutes} min`, g.recent.refused ? 'refused' : ''),
      card(fmt(g.stats.admitted), 'admitted in all'),
      card(fmt(g.stats.refused), 'refused in all'),
      // sluice/fetch keys (kind adaptive): the upstream's throttled answers and the blocks they set
      g.stats.throttled === undefined
        ? null
        : card(fmt(g.stats.throttled), 'answered 429/503', g.stats.throttled ? 'refused' : ''),
      g.stats.blocks === undefined ? null : card(fmt(g.stats.blocks), 'blocks recorded'),
    ),
    h('div', { class: 'panel' }, h('div', { class: 'legend' }, 'per minute, every key'), chart(g.history)),
    d.total > d.keys.length
      ? h('p', { class: 'muted' }, `The ${d.keys.length} most recently used keys of ${d.total}.`)
      : null,
    h(
      'table',
      { id: 'keys' },
      h(
        'thead',
        {},
        h(
          'tr',
          {},
          h('th', {}, 'key'),
          h('th', {}, 'fill now'),
          h('th', { class: 'num' }, 'admitted 5 min'),
          h('th', { class: 'num' }, 'refused 5 min'),
          h('th', {}, 'last use'),
        ),
      ),
      h('tbody', {}, rows),
    ),
  ]
}

/** A limiter's live state for a person: fill in %, windows and times in words. */
function shownState(st) {
  if (st.error) return { error: st.error.code }
  const out = {}
  for (const [k, v] of Object.entries(st)) {
    if (k === 'text') continue // the state in words: shown on its card
    if (k === 'fill') out.fill = pct(v)
    else if (k === 'windows')
      v.forEach((w) => (out[`per ${interval(w.intervalMs)}`] = `${fmt(w.remaining)} of ${fmt(w.limit)} left`))
    else if (k.endsWith('Ms')) out[k.slice(0, -2)] = ms(v)
    else out[k] = v
  }
  return out
}

/** One limiter; the reset button reports through `ctx.banner` and reloads with `ctx.reload`. */
/** A budget's fill beside its refusals (a Budget paces from its first call: docs/budgets.md). */
const BUDGET_NOTE =
  'Used vs refused: the fill is the share of its fullest limit in use now; refused counts the calls turned ' +
  'away over the last minutes. A Budget paces from its first call (its limit spread over its ' +
  'interval, plus maxBurst), so calls that come faster than that pace are refused (or wait) even ' +
  'while most of the limit is unused: a low fill beside many refusals means bursts, not an ' +
  'exhausted budget. maxBurst lets a burst through.'

export function limiterView(d, ctx) {
  const st = d.state
  const resetButton =
    ALLOW_RESET && d.resettable
      ? h(
          'button',
          {
            id: 'reset',
            onclick: async () => {
              if (!confirm(`Reset ${d.kind} "${shown(d.name)}"? Its counts are forgotten in every process.`)) return
              const r = await fetch(apiUrl('reset', { kind: d.kind, name: d.name }), {
                method: 'POST',
                headers: { 'x-sluice-csrf': CSRF },
              })
              const body = await r.json()
              ctx.banner(
                r.ok ? `Reset ${d.kind} ${shown(d.name)}.` : `Reset failed: ${body.error.code}: ${body.error.message}`,
                r.ok,
              )
              ctx.reload()
            },
          },
          'Reset',
        )
      : null
  const groupLink = d.group !== d.name ? h('a', { href: groupHash(d.kind, d.group) }, `← ${shown(d.group)}`) : null
  return [
    h('div', { class: 'crumbs' }, h('a', { href: '#/' }, '← all limiters'), groupLink ? ' ' : null, groupLink),
    h(
      'h2',
      {},
      h('span', { class: 'kind' }, d.kind),
      ' ',
      h('span', { class: 'name' }, shown(d.name)),
      h('span', { class: 'muted' }, ` · ${d.limit}`),
    ),
    h(
      'div',
      { class: 'cards' },
      card(
        st && typeof st.fill === 'number' ? pct(st.fill) : '–',
        st && !st.error ? stateText(st) || 'fill now' : 'fill now',
      ),
      card(fmt(d.recent.admitted), `admitted, last ${d.recent.minutes} min`),
      card(fmt(d.recent.refused), `refused, last ${d.recent.minutes} min`, d.recent.refused ? 'refused' : ''),
      card(ago(d.lastUse), 'last use (≤ 1 flush late)'),
      d.stats.throttled === undefined
        ? null
        : card(fmt(d.stats.throttled), 'answered 429/503', d.stats.throttled ? 'refused' : ''),
      d.stats.blocks === undefined ? null : card(fmt(d.stats.blocks), 'blocks recorded'),
    ),
    d.kind === 'budget' ? h('p', { class: 'muted', id: 'budget-note' }, BUDGET_NOTE) : null,
    h('p', { class: 'muted', id: 'last-use-note' }, LAST_USE_NOTE),
    h(
      'div',
      { class: 'panel' },
      h(
        'div',
        { class: 'legend' },
        'per minute: ',
        h('span', { class: 'a' }, '■ admitted'),
        ' ',
        h('span', { class: 'r' }, '■ refused'),
      ),
      chart(d.history),
    ),
    h(
      'div',
      { class: 'grid2' },
      h(
        'div',
        { class: 'panel', id: 'state' },
        h('h3', {}, 'Now'),
        st && st.fill !== null
          ? statsList(shownState(st))
          : h('span', { class: 'muted' }, 'no live state for this kind'),
      ),
      h('div', { class: 'panel', id: 'stats' }, h('h3', {}, 'Statistics (every process)'), statsList(d.stats)),
      h(
        'div',
        { class: 'panel' },
        h('h3', {}, 'Options'),
        statsList(d.options),
        resetButton ? h('p', {}, resetButton) : null,
      ),
    ),
    rulesPanel(d, ctx),
  ]
}

/** The field a rule overrides for a limiter of `kind` from the page (null: none: mode and access only). */
const OVERRIDE = {
  bucket: 'limit',
  window: 'limit',
  leaky: 'limit',
  points: 'limit',
  'sliding-counter': 'limit',
  concurrent: 'limit',
  door: 'limit',
  pacer: 'qps',
  adaptive: 'qps',
}

/** Writes a rule through the API (allowWrite, the page's token); reports and reloads through `ctx`. */
async function writeRule(ctx, params, done) {
  const r = await fetch(apiUrl('rules', params), { method: 'POST', headers: { 'x-sluice-csrf': CSRF } })
  const body = await r.json()
  ctx.banner(r.ok ? done : `Rule not written: ${body.error.code}: ${body.error.message}`, r.ok)
  ctx.reload()
}

/**
 * The operators' rules that name this limiter (store.rules: docs/live-control.md), the one in
 * force first; with allowWrite, a form that sets this limiter's own rule and a delete per rule.
 */
function rulesPanel(d, ctx) {
  const rules = Array.isArray(d.rules) ? d.rules : []
  if (rules.length === 0 && !ALLOW_WRITE) return null
  const targetText = (t) =>
    t.name !== undefined
      ? `${t.kind} ${shown(t.name)}`
      : t.prefix !== undefined
        ? `${t.kind} names starting ${shown(t.prefix)}`
        : t.key !== undefined
          ? `door ${shown(t.door)} key ${shown(t.key)}`
          : `door ${shown(t.door)}${t.keyPrefix ? ` keys starting ${shown(t.keyPrefix)}` : ''}`
  const fields = (r) =>
    Object.entries(r)
      .filter(([k]) => k !== 'target' && k !== 'inForce' && k !== 'note' && k !== 'expiresAt')
      .map(([k, v]) => `${k} ${typeof v === 'string' ? shown(v) : JSON.stringify(v)}`)
      .join(', ')
  const sorted = [...rules].sort((a, b) => Number(b.inForce) - Number(a.inForce))
  const own = d.kind === 'door' ? { door: d.name } : { kind: d.kind, name: d.name }
  const override = OVERRIDE[d.kind] ?? null
  const form = ALLOW_WRITE
    ? h(
        'form',
        {
          id: 'rule-form',
          onsubmit: (e) => {
            e.preventDefault()
            const f = e.target
            const rule = {}
            if (override !== null && f.override.value !== '') rule[override] = Number(f.override.value)
            if (f.mode.value !== '') rule.mode = f.mode.value
            if (f.access.value !== '') rule.access = f.access.value
            if (f.note.value !== '') rule.note = f.note.value
            const params = { op: 'set', target: JSON.stringify(own), rule: JSON.stringify(rule) }
            if (f.ttl.value !== '') params.ttlMs = String(Math.round(Number(f.ttl.value) * 60_000))
            writeRule(ctx, params, `Rule set for ${d.kind} ${shown(d.name)}.`)
          },
        },
        override === null
          ? null
          : h('label', {}, `${override} `, h('input', { name: 'override', type: 'number', min: '0', step: 'any' })),
        h(
          'label',
          {},
          ' mode ',
          h(
            'select',
            { name: 'mode' },
            h('option', { value: '' }, '-'),
            h('option', { value: 'enforce' }, 'enforce'),
            h('option', { value: 'shadow' }, 'shadow'),
          ),
        ),
        h(
          'label',
          {},
          ' access ',
          h(
            'select',
            { name: 'access' },
            h('option', { value: '' }, '-'),
            h('option', { value: 'allow' }, 'allow'),
            h('option', { value: 'deny' }, 'deny'),
          ),
        ),
        h('label', {}, ' note ', h('input', { name: 'note', type: 'text', maxlength: '1024' })),
        h('label', {}, ' for (min) ', h('input', { name: 'ttl', type: 'number', min: '1', step: '1' })),
        ' ',
        h('button', { type: 'submit', id: 'rule-set' }, 'Set rule'),
      )
    : null
  return h(
    'div',
    { class: 'panel', id: 'rules' },
    h('h3', {}, 'Rules (store.rules)'),
    h(
      'ul',
      {},
      sorted.map((r) =>
        h(
          'li',
          { class: r.inForce ? 'in-force' : '' },
          h('span', { class: 'name' }, targetText(r.target)),
          `: ${fields(r)}`,
          r.expiresAt !== undefined
            ? h('span', { class: 'muted' }, ` · until ${new Date(r.expiresAt).toISOString()}`)
            : null,
          r.note !== undefined ? h('span', { class: 'muted' }, ` · ${shown(r.note)}`) : null,
          r.inForce ? h('strong', {}, ' · in force') : null,
          ALLOW_WRITE
            ? h(
                'button',
                {
                  class: 'rule-delete',
                  type: 'button',
                  onclick: () => {
                    if (!confirm(`Delete the rule of ${targetText(r.target)}? Every process stops applying it.`)) return
                    writeRule(
                      ctx,
                      { op: 'delete', target: JSON.stringify(r.target) },
                      `Rule of ${targetText(r.target)} deleted.`,
                    )
                  },
                },
                'Delete',
              )
            : null,
        ),
      ),
    ),
    form,
  )
}
