// The sluice dashboard page: reads <mount>/api/ and draws it. No framework, no CDN, no inline
// script or style (the page's Content-Security-Policy forbids them); every name from the store
// goes into the DOM as text, never as HTML, with its control characters shown as escapes (as
// the CLI shows them). Every value sent to the API is its own query parameter, and every view
// its own hash parameter: a name is never a path segment nor joined with another value.
'use strict'
;(() => {
  const meta = (name) => document.querySelector(`meta[name="${name}"]`).getAttribute('content')
  const CSRF = meta('sluice-csrf')
  const ALLOW_RESET = meta('sluice-allow-reset') === 'true'
  const REFRESH_MS = Number(meta('sluice-refresh-ms'))
  const SVG = 'http://www.w3.org/2000/svg'
  const $ = (id) => document.getElementById(id)

  // --- building the DOM ------------------------------------------------------------------
  function build(el, attrs, kids) {
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined || v === false) continue
      if (k.startsWith('on')) el.addEventListener(k.slice(2), v)
      else el.setAttribute(k, v === true ? '' : String(v))
    }
    for (const kid of kids.flat(Infinity)) {
      if (kid === null || kid === undefined || kid === false) continue
      el.append(kid instanceof Node ? kid : document.createTextNode(String(kid)))
    }
    return el
  }
  const h = (tag, attrs, ...kids) => build(document.createElement(tag), attrs, kids)
  const s = (tag, attrs, ...kids) => build(document.createElementNS(SVG, tag), attrs, kids)

  /** The server's clock at the last answer: "ago" is measured on it. */
  let serverNow = null

  // --- numbers and times -----------------------------------------------------------------
  function fmt(n) {
    if (typeof n !== 'number' || !Number.isFinite(n)) return '–'
    const a = Math.abs(n)
    if (a >= 1e9) return `${(n / 1e9).toFixed(1)}G`
    if (a >= 1e6) return `${(n / 1e6).toFixed(1)}M`
    if (a >= 1e4) return `${(n / 1e3).toFixed(1)}k`
    return Number.isInteger(n) ? String(n) : n.toFixed(1)
  }
  function ms(x) {
    if (typeof x !== 'number') return '–'
    if (x < 1000) return `${Math.round(x)} ms`
    if (x < 60_000) return `${(x / 1000).toFixed(1)} s`
    return `${(x / 60_000).toFixed(1)} min`
  }
  function ago(t) {
    const sec = Math.max(0, Math.round(((serverNow ?? Date.now()) - t) / 1000))
    if (sec < 60) return `${sec}s ago`
    if (sec < 3600) return `${Math.round(sec / 60)}m ago`
    if (sec < 86400) return `${Math.round(sec / 3600)}h ago`
    return `${Math.round(sec / 86400)}d ago`
  }
  const interval = (x) => (x % 3_600_000 === 0 ? `${x / 3_600_000}h` : x % 1000 === 0 ? `${x / 1000}s` : `${x}ms`)
  const pct = (f) => `${Math.round(f * 100)}%`

  // --- names -------------------------------------------------------------------------------
  /** Control characters, bidi controls, line separators, lone surrogates and `\` (lib/inspect.js). */
  const UNSAFE =
    /[\\\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g
  const SHORT = { '\\': '\\\\', '\n': '\\n', '\r': '\\r', '\t': '\\t' }
  /** A name as shown: what a terminal would show for it (`\x1b`, `\n`, `\u202e`, `\\`). */
  const shown = (name) =>
    String(name).replace(UNSAFE, (c) => {
      if (SHORT[c] !== undefined) return SHORT[c]
      const n = c.charCodeAt(0)
      return n < 0x100 ? `\\x${n.toString(16).padStart(2, '0')}` : `\\u${n.toString(16).padStart(4, '0')}`
    })

  /** A hash for a view, each value its own parameter: `#/limiter?kind=bucket&name=a%2Fb`. */
  const view = (what, values) => `#/${what}?${new URLSearchParams(values)}`
  const limiterHash = (kind, name) => view('limiter', { kind, name })
  const groupHash = (kind, group) => view('group', { kind, group })
  /** An API path with its query parameters. */
  const apiUrl = (what, values) => `api/${what}?${new URLSearchParams(values)}`

  // --- charts ------------------------------------------------------------------------------
  /** Stacked bars per minute: admitted below, refused above. */
  function chart(history, { small = false } = {}) {
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

  function fillBar(fill) {
    const level = fill >= 1 ? 'full' : fill >= 0.8 ? 'warn' : 'ok'
    return s(
      'svg',
      { viewBox: '0 0 100 10', preserveAspectRatio: 'none' },
      s('rect', { x: 0, y: 0, width: 100, height: 10, rx: 2, class: 'bg' }),
      s('rect', { x: 0, y: 0, width: Math.max(0, Math.min(1, fill)) * 100, height: 10, rx: 2, class: level }),
    )
  }

  /** What a limiter holds now, in words. */
  function stateText(kind, st) {
    if (!st) return ''
    if (st.error) return `state unavailable (${st.error.code})`
    switch (kind) {
      case 'bucket':
      case 'window':
      case 'leaky':
      case 'points':
        return `${fmt(st.remaining)} of ${fmt(st.limit)} left`
      case 'sliding':
        return st.windows.map((w) => `${fmt(w.remaining)}/${fmt(w.limit)} per ${interval(w.intervalMs)}`).join(', ')
      case 'pacer':
        return st.backlogMs > 0 ? `backlog ${ms(st.backlogMs)}` : `burst used ${fmt(st.watermark)}`
      case 'concurrent':
        return `${fmt(st.held)} of ${fmt(st.limit)} held, ${fmt(st.waiting)} waiting`
      default:
        return ''
    }
  }

  function fillCell(fill, text) {
    if (typeof fill !== 'number') return h('span', { class: 'muted' }, text || '–')
    return h('div', { class: 'fill' }, fillBar(fill), h('span', {}, pct(fill), h('div', { class: 'sub' }, text)))
  }

  const card = (value, label, cls) =>
    h('div', { class: 'card' }, h('div', { class: `value ${cls || ''}` }, value), h('div', { class: 'label' }, label))
  const statsList = (st) =>
    h(
      'dl',
      {},
      Object.entries(st).map(([k, v]) => [
        h('dt', {}, k),
        h('dd', {}, typeof v === 'number' ? v.toLocaleString() : typeof v === 'string' ? shown(v) : JSON.stringify(v)),
      ]),
    )

  // --- views -------------------------------------------------------------------------------
  let sortBy = 'heat'
  const SORTS = {
    heat: null, // the server's order: hot first, then the busiest
    fill: (a, b) => (b.fill ?? -1) - (a.fill ?? -1),
    refused: (a, b) => b.recent.refused - a.recent.refused || b.stats.refused - a.stats.refused,
    name: (a, b) => (a.name ?? a.group).localeCompare(b.name ?? b.group),
    lastUse: (a, b) => b.lastUse - a.lastUse,
  }

  function overview(d) {
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
      const state = g.keys === 1 ? stateText(g.kind, g.state) : g.fullest !== null ? `fullest: ${shown(g.fullest)}` : ''
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
        card(
          fmt(total.refused),
          `refused, last ${d.groups[0]?.recent.minutes ?? 5} min`,
          total.refused ? 'refused' : '',
        ),
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
                render(last)
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
    ]
  }

  function groupView(d) {
    const g = d.group
    const rows = d.keys.map((k) => {
      const target = limiterHash(g.kind, k.name)
      return h(
        'tr',
        { 'data-name': k.name, onclick: () => (location.hash = target) },
        h('td', {}, h('a', { class: 'name', href: target }, shown(k.name))),
        h('td', {}, fillCell(k.fill, stateText(g.kind, k.state))),
        h(
          'td',
          { class: 'num' },
          fmt(k.recent.admitted),
          h('div', { class: 'sub' }, `${fmt(k.stats.admitted)} in all`),
        ),
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
      if (k === 'fill') out.fill = pct(v)
      else if (k === 'windows')
        v.forEach((w) => (out[`per ${interval(w.intervalMs)}`] = `${fmt(w.remaining)} of ${fmt(w.limit)} left`))
      else if (k.endsWith('Ms')) out[k.slice(0, -2)] = ms(v)
      else out[k] = v
    }
    return out
  }

  function limiterView(d) {
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
                banner(
                  r.ok
                    ? `Reset ${d.kind} ${shown(d.name)}.`
                    : `Reset failed: ${body.error.code}: ${body.error.message}`,
                  r.ok,
                )
                load()
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
          st && !st.error ? stateText(d.kind, st) || 'fill now' : 'fill now',
        ),
        card(fmt(d.recent.admitted), `admitted, last ${d.recent.minutes} min`),
        card(fmt(d.recent.refused), `refused, last ${d.recent.minutes} min`, d.recent.refused ? 'refused' : ''),
        card(ago(d.lastUse), 'last use'),
      ),
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
    ]
  }

  // --- loading -----------------------------------------------------------------------------
  let last = null
  let timer = null
  let loading = 0

  /** The view the hash names: `#/limiter?kind=&name=`, `#/group?kind=&group=` (or the older `#/limiter/<kind>/<name>`), else the list. */
  function route() {
    const hash = location.hash.replace(/^#\/?/, '')
    const q = hash.indexOf('?')
    const what = q < 0 ? hash : hash.slice(0, q)
    const p = new URLSearchParams(q < 0 ? '' : hash.slice(q + 1))
    const one = (k) => (p.getAll(k).length === 1 ? p.get(k) : null)
    if (what === 'group' && one('kind') !== null && one('group') !== null)
      return { api: apiUrl('group', { kind: one('kind'), group: one('group') }), view: groupView }
    if (what === 'limiter' && one('kind') !== null && one('name') !== null)
      return { api: apiUrl('limiter', { kind: one('kind'), name: one('name') }), view: limiterView }
    let parts
    try {
      parts = hash.split('/').map(decodeURIComponent)
    } catch {
      parts = []
    }
    if (parts[0] === 'group' && parts.length === 3)
      return { api: apiUrl('group', { kind: parts[1], group: parts[2] }), view: groupView }
    if (parts[0] === 'limiter' && parts.length === 3)
      return { api: apiUrl('limiter', { kind: parts[1], name: parts[2] }), view: limiterView }
    return { api: 'api/limiters', view: overview }
  }

  function banner(text, ok) {
    const b = $('banner')
    b.hidden = !text
    b.className = ok ? 'banner ok' : 'banner'
    b.textContent = text || ''
  }

  function render(state) {
    if (!state) return
    $('main').replaceChildren(...[state.route.view(state.data)].flat().filter(Boolean))
  }

  async function load() {
    clearTimeout(timer)
    const seq = ++loading
    const r = route()
    try {
      const res = await fetch(r.api, { headers: { accept: 'application/json' } })
      const data = await res.json()
      if (seq !== loading) return
      if (!res.ok) throw Object.assign(new Error(data.error.message), { code: data.error.code })
      if (data.store) {
        const st = $('store')
        st.textContent = `${data.store.type} ${data.store.status} · prefix ${shown(data.store.keyPrefix)}${data.store.statsDropped ? ` · ${data.store.statsDropped} dropped` : ''}`
        st.className = `pill ${data.store.status}`
      }
      if ($('banner').className === 'banner') banner('')
      serverNow = typeof data.now === 'number' ? data.now : null
      last = { route: r, data }
      render(last)
      document.body.dataset.loaded = String(seq)
      $('updated').textContent = `updated ${new Date().toLocaleTimeString()}`
    } catch (err) {
      if (seq !== loading) return
      banner(`Cannot read the store: ${err.code || 'ERR_NETWORK'}: ${err.message}`)
      if (err.code === 'ERR_STORE_UNAVAILABLE' || err.code === 'ERR_TIMEOUT') {
        $('store').textContent = 'store down'
        $('store').className = 'pill down'
      }
      document.body.dataset.loaded = String(seq)
    }
    schedule()
  }

  function schedule() {
    clearTimeout(timer)
    if (REFRESH_MS > 0 && $('auto').checked && !document.hidden) timer = setTimeout(load, REFRESH_MS)
  }

  window.addEventListener('hashchange', () => {
    last = null
    banner('')
    load()
  })
  document.addEventListener('visibilitychange', () => (document.hidden ? clearTimeout(timer) : load()))
  $('auto').addEventListener('change', schedule)
  if (REFRESH_MS === 0) $('auto').checked = false
  load()
})()
