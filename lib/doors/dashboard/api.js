'use strict'

// The data behind the dashboard's JSON API, read from a store: every limiter group (busiest
// and fullest first), one group's keys, one limiter's options, statistics, history and live
// state, and a reset. Nothing here knows HTTP beyond the HttpError it throws for a 404/400.

const { RESETTABLE, limiterOf, keyLimiterOf, stateOf, stateWords, limitText } = require('../inspect')
const { HttpError } = require('./respond')

/** Limiters whose statistics a list reads at most (the most recently used). */
const MAX_READ = 2000
/** Live states a list reads at most, and per group. */
const MAX_STATES = 300
const STATES_PER_GROUP = 10
/** Keys a group page lists at most (the most recently used). */
const MAX_KEYS = 500
/** Minutes that make "recent" (rates in the tables). */
const RECENT_MINUTES = 5

const sum = (rows, pick) => rows.reduce((s, r) => s + pick(r), 0)

/** One group's summary from its limiters' rows (most recent first). */
function summary(kind, name, rows) {
  const stats = {}
  for (const r of rows) for (const [k, v] of Object.entries(r.stats)) stats[k] = (stats[k] || 0) + v
  const history = rows[0].history.map((m, i) => ({
    t: m.t,
    admitted: sum(rows, (r) => r.history[i].admitted),
    refused: sum(rows, (r) => r.history[i].refused),
  }))
  let fullest = null
  for (const r of rows) {
    if (
      r.state !== null &&
      typeof r.state.fill === 'number' &&
      (fullest === null || r.state.fill > fullest.state.fill)
    ) {
      fullest = r
    }
  }
  return {
    kind,
    group: name,
    keys: rows.length,
    name: rows.length === 1 ? rows[0].name : null,
    limit: rows[0].limit,
    lastUse: rows[0].lastUse,
    resettable: rows.length === 1 && rows[0].resettable,
    stats,
    history,
    recent: {
      admitted: sum(rows, (r) => r.recent.admitted),
      refused: sum(rows, (r) => r.recent.refused),
      minutes: RECENT_MINUTES,
    },
    fill: fullest === null ? null : fullest.state.fill,
    fullest: fullest === null ? null : fullest.name,
    state: rows.length === 1 ? rows[0].state : null,
  }
}

/** Hot first (nearly full or refusing lately), then the busiest, then the latest used. */
function byHeat(a, b) {
  const hot = (g) => (g.recent.refused > 0 || (g.fill !== null && g.fill >= 0.8) ? 1 : 0)
  return (
    hot(b) - hot(a) ||
    b.recent.admitted + b.recent.refused - (a.recent.admitted + a.recent.refused) ||
    (b.fill || 0) - (a.fill || 0) ||
    b.lastUse - a.lastUse
  )
}

/** The API's reads and the reset over `store`, grouping names with `groupOf(name, kind)`. */
function createApi(store, groupOf) {
  /** ms on the store's clock (an injected clock in tests), for "last use ... ago" */
  const nowMs = () => (store.clock ? store.clock.now() : Date.now())

  /** The group of a registry entry (a user's groupOf that throws: the name alone). */
  const group = (l) => {
    try {
      const g = groupOf(l.name, l.kind)
      return typeof g === 'string' && g.length > 0 ? g : l.name
    } catch {
      return l.name
    }
  }

  async function storeInfo() {
    const redis = typeof store.status === 'string'
    return {
      type: redis ? 'redis' : 'memory',
      status: redis ? store.status : 'up',
      keyPrefix: store.keyPrefix,
      statsDropped: store.statsDropped,
    }
  }

  /** Reads the statistics of `infos` and the live state of those chosen by `wantState`. */
  async function detail(infos, wantState) {
    const details = await store._statsDetail(infos)
    const states = await Promise.all(
      infos.map((info, i) =>
        wantState(info, i)
          ? stateOf(store, info).then(
              (state) => ({ ...state, text: stateWords(info, state) }),
              (err) => ({ fill: null, error: { code: err.code || 'ERR_INTERNAL' } }),
            )
          : null,
      ),
    )
    return infos.map((info, i) => {
      const history = details[i].history
      const recent = history.slice(-RECENT_MINUTES)
      return {
        kind: info.kind,
        name: info.name,
        options: info.options,
        limit: limitText(info),
        lastUse: info.lastUse,
        resettable: RESETTABLE.includes(info.kind),
        stats: details[i].stats,
        history,
        recent: {
          admitted: recent.reduce((s, m) => s + m.admitted, 0),
          refused: recent.reduce((s, m) => s + m.refused, 0),
          minutes: RECENT_MINUTES,
        },
        state: states[i],
      }
    })
  }

  async function list() {
    const all = await store.limiters()
    const infos = all.slice(0, MAX_READ)
    // kind, then group: two keys, never one string joined from both
    const groups = []
    const byKind = new Map()
    infos.forEach((info, i) => {
      const name = group(info)
      if (!byKind.has(info.kind)) byKind.set(info.kind, new Map())
      const ofKind = byKind.get(info.kind)
      if (!ofKind.has(name)) {
        const g = { kind: info.kind, name, members: [] }
        ofKind.set(name, g)
        groups.push(g)
      }
      ofKind.get(name).members.push(i)
    })
    // live state: each group's most recent few, up to MAX_STATES in all
    const want = new Set()
    for (const { members } of groups) {
      for (const i of members.slice(0, STATES_PER_GROUP)) if (want.size < MAX_STATES) want.add(i)
    }
    const rows = await detail(infos, (_, i) => want.has(i))
    const out = groups.map(({ kind, name, members }) =>
      summary(
        kind,
        name,
        members.map((i) => rows[i]),
      ),
    )
    out.sort(byHeat)
    return { limiters: all.length, read: infos.length, groups: out }
  }

  async function groupPage(kind, name) {
    const all = (await store.limiters()).filter((l) => l.kind === kind && group(l) === name)
    if (all.length === 0) throw new HttpError(404, 'ERR_NOT_FOUND', `no ${kind} limiters in group ${name}`)
    const infos = all.slice(0, MAX_KEYS)
    const rows = await detail(infos, (_, i) => i < 50)
    const keys = rows.map((r) => ({
      name: r.name,
      lastUse: r.lastUse,
      stats: r.stats,
      recent: r.recent,
      fill: r.state === null ? null : r.state.fill,
      state: r.state,
    }))
    keys.sort(
      (a, b) =>
        b.recent.admitted + b.recent.refused - (a.recent.admitted + a.recent.refused) ||
        (b.fill || 0) - (a.fill || 0) ||
        b.lastUse - a.lastUse,
    )
    return { group: summary(kind, name, rows), keys, total: all.length }
  }

  async function find(kind, name) {
    const info = (await store.limiters()).find((l) => l.kind === kind && l.name === name)
    if (info === undefined) throw new HttpError(404, 'ERR_NOT_FOUND', `no ${kind} limiter named ${name}`)
    return info
  }

  /**
   * The operators' rules (store.rules) that name a limiter: its own, its kind's prefixes, a
   * door's (by identifier); `inForce` marks the one its calls are decided by now (the most
   * specific: docs/live-control.md). A client key's rules of a door are listed with the door.
   */
  async function rulesOf(kind, name) {
    const rules = store.rules
    if (rules === undefined) return []
    const all = await rules.list()
    const mine = all.filter((r) => {
      const t = r.target
      if (kind === 'door') return t.door === name
      return t.kind === kind && (t.name === name || (t.prefix !== undefined && name.startsWith(t.prefix)))
    })
    const applied = kind === 'door' ? rules._forDoorKey(name, '') : rules._forName(kind, name)
    return mine.map((r) => ({
      ...r,
      inForce: applied !== undefined && JSON.stringify(applied.target) === JSON.stringify(r.target),
    }))
  }

  async function limiterPage(kind, name) {
    const info = await find(kind, name)
    const [[row], rules] = await Promise.all([detail([info], () => true), rulesOf(kind, name)])
    return { ...row, group: group(info), rules }
  }

  /**
   * Forgets the counts of a limiter, or with `key` of one client of an HTTP door (the caller
   * has checked the request may reset).
   */
  async function reset(kind, name, key = null) {
    if (key !== null) {
      const info = await find(kind, name)
      const limiter = keyLimiterOf(store, info, key)
      if (limiter === null) {
        throw new HttpError(400, 'ERR_INVALID_ARGUMENT', `a ${kind} limiter has no client to reset by key`)
      }
      await limiter.reset()
      return { reset: true, kind, name, key }
    }
    if (!RESETTABLE.includes(kind)) {
      throw new HttpError(400, 'ERR_INVALID_ARGUMENT', `a ${kind} limiter cannot be reset`)
    }
    const info = await find(kind, name)
    await limiterOf(store, info).reset()
    return { reset: true, kind, name }
  }

  return { nowMs, storeInfo, list, groupPage, limiterPage, reset }
}

module.exports = { createApi }
