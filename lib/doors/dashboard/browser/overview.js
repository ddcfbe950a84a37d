// The dashboard page's first view: totals, a chart of every limiter per minute, and a table of
// every limiter group (hot first, or sorted as the reader picks).

import { h } from './dom.js'
import { fmt, ms, ago, pct, shown, limiterHash, groupHash, LAST_USE_NOTE } from './format.js'
import { chart, stateText, fillCell, card } from './widgets.js'

let sortBy = 'heat'
const SORTS = {
  heat: null, // the server's order: hot first, then the busiest
  fill: (a, b) => (b.fill ?? -1) - (a.fill ?? -1),
  refused: (a, b) => b.recent.refused - a.recent.refused || b.stats.refused - a.stats.refused,
  name: (a, b) => (a.name ?? a.group).localeCompare(b.name ?? b.group),
  lastUse: (a, b) => b.lastUse - a.lastUse,
}

/** The list of every limiter group; `ctx.rerender()` draws it again (a new sort order). */
export function overview(d, ctx) {
  const groups = d.groups.slice()
  if (SORTS[sortBy]) groups.sort(SORTS[sortBy])
  const total = d.groups.reduce(
    (acc, g) => {
      acc.admitted += g.recent.admitted
      acc.refused += g.recent.refused
      acc.waited += g.stats.waited || 0
      return acc
    },
    { admitted: 0, refused: 0, waited: 0 },
  )
  const history = d.groups.length
    ? d.groups[0].history.map((m, i) => ({
        t: m.t,
        admitted: d.groups.reduce((x, g) => x + g.history[i].admitted, 0),
        refused: d.groups.reduce((x, g) => x + g.history[i].refused, 0),
      }))
    : []
  const decided = total.admitted + total.refused
  const rows = groups.map((g) => {
    const hot = g.recent.refused > 0 || (g.fill !== null && g.fill >= 0.8)
    const target = g.keys === 1 ? limiterHash(g.kind, g.name) : groupHash(g.kind, g.group)
    const state = g.keys === 1 ? stateText(g.state) : g.fullest !== null ? `fullest: ${shown(g.fullest)}` : ''
    return h(
      'tr',
      {
        class: hot ? 'hot' : null,
        'data-kind': g.kind,
        'data-name': g.name ?? g.group,
        onclick: () => (location.hash = target),
      },
      h('td', {}, h('span', { class: 'kind' }, g.kind)),
      h(
        'td',
        {},
        h('a', { class: 'name', href: target }, shown(g.keys === 1 ? g.name : g.group)),
        g.keys > 1 ? h('div', { class: 'sub' }, `${g.keys} keys`) : null,
      ),
      h('td', {}, g.limit),
      h('td', {}, fillCell(g.fill, state)),
      h(
        'td',
        { class: 'num admitted' },
        fmt(g.recent.admitted),
        h('div', { class: 'sub' }, `${fmt(g.stats.admitted)} in all`),
      ),
      h(
        'td',
        { class: `num ${g.recent.refused > 0 ? 'refused' : ''}` },
        fmt(g.recent.refused),
        h('div', { class: 'sub' }, `${fmt(g.stats.refused)} in all`),
      ),
      h(
        'td',
        { class: 'num' },
        fmt(g.stats.waited || 0),
        h('div', { class: 'sub' }, g.stats.waited ? `avg ${ms(g.stats.waitTimeMs / g.stats.waited)}` : ''),
      ),
      h('td', {}, chart(g.history, { small: true })),
      h('td', { class: 'sub' }, ago(g.lastUse)),
    )
  })
  return [
    h(
      'div',
      { class: 'cards' },
      card(fmt(d.limiters), 'limiters used recently'),
      card(fmt(total.admitted), `admitted, last ${d.groups[0]?.recent.minutes ?? 5} min`),
      card(fmt(total.refused), `refused, last ${d.groups[0]?.recent.minutes ?? 5} min`, total.refused ? 'refused' : ''),
      card(decided ? pct(total.refused / decided) : '–', 'refusal rate'),
      card(fmt(total.waited), 'waits (all time)'),
    ),
    history.length
      ? h(
          'div',
          { class: 'panel' },
          h(
            'div',
            { class: 'legend' },
            'All limiters, per minute: ',
            h('span', { class: 'a' }, '■ admitted'),
            ' ',
            h('span', { class: 'r' }, '■ refused'),
          ),
          chart(history),
        )
      : null,
    h(
      'div',
      { class: 'toolbar' },
      h('strong', {}, 'Limiters'),
      d.read < d.limiters
        ? h('span', { class: 'muted' }, `(the ${fmt(d.read)} most recently used of ${fmt(d.limiters)})`)
        : null,
      h('span', { class: 'spacer' }),
      h(
        'label',
        {},
        'sort: ',
        h(
          'select',
          {
            id: 'sort',
            onchange: (e) => {
              sortBy = e.target.value
              ctx.rerender()
            },
          },
          [
            ['heat', 'busiest and fullest'],
            ['fill', 'fullest'],
            ['refused', 'most refused'],
            ['lastUse', 'last used'],
            ['name', 'name'],
          ].map(([v, t]) => h('option', { value: v, selected: v === sortBy }, t)),
        ),
      ),
    ),
    d.groups.length === 0
      ? h('div', { class: 'panel muted' }, 'No limiter has been used recently under this key prefix.')
      : h(
          'table',
          { id: 'limiters' },
          h(
            'thead',
            {},
            h(
              'tr',
              {},
              h('th', {}, 'kind'),
              h('th', {}, 'limiter'),
              h('th', {}, 'limit'),
              h('th', {}, 'fill now'),
              h('th', { class: 'num' }, `admitted ${d.groups[0].recent.minutes} min`),
              h('th', { class: 'num' }, `refused ${d.groups[0].recent.minutes} min`),
              h('th', { class: 'num' }, 'waits'),
              h('th', {}, 'last 30 min'),
              h('th', {}, 'last use'),
            ),
          ),
          h('tbody', {}, rows),
        ),
    groups.length ? h('p', { class: 'muted', id: 'last-use-note' }, LAST_USE_NOTE) : null,
  ]
}
