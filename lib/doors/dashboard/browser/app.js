// The sluice dashboard page: reads <mount>/api/ and draws it. No framework, no CDN, no inline
// script or style (the page's Content-Security-Policy forbids them); every name from the store
// goes into the DOM as text, never as HTML, with its control characters shown as escapes (as
// the CLI shows them). Every value sent to the API is its own query parameter, and every view
// its own hash parameter: a name is never a path segment nor joined with another value.
//
// This module routes, loads and refreshes; the views are overview.js and details.js, built
// from widgets.js, format.js and dom.js (ES modules, served from the same assets/ path).

import { $, meta } from './dom.js'
import { shown, apiUrl, setServerNow } from './format.js'
import { overview } from './overview.js'
import { groupView, limiterView } from './details.js'

const REFRESH_MS = Number(meta('sluice-refresh-ms'))

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

/** What a view may ask of the page: draw again, load again, show a banner. */
const ctx = {
  rerender: () => render(last),
  reload: () => load(),
  banner: (text, ok) => banner(text, ok),
}

function render(state) {
  if (!state) return
  $('main').replaceChildren(...[state.route.view(state.data, ctx)].flat().filter(Boolean))
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
    setServerNow(typeof data.now === 'number' ? data.now : null)
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
