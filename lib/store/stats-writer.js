// @ts-check
'use strict'
// A RedisStore's statistics in Redis: the counts this process took (its StatsBook) written
// every `statsFlushMs` and at close, one script call per hash slot (lua/stats.lua); read back
// for `stats()`, the dashboard and `store.limiters()`.

const native = require('../native')
const { orThrow } = require('../base/errors')
const { encodeParts } = require('../base/codec')
const {
  byLastUse,
  statsFrom,
  historyFrom,
  escapeKey,
  stateLifetimeMs,
  INDEX,
  MAX_LIMITERS,
  MAX_PROTECTED,
  optionsJson,
  SERIES,
  MINUTE_MS,
} = require('./stats')
const { closedError, statsOffError, isWrongTypeReply, statsWrongTypeError } = require('./errors')
const { taggedKey } = require('./keys')

/** The pool lane of statistics (the kinds' queues use the lanes before it). */
const STATS_LANE = 5

class StatsWriter {
  /** `store`: the RedisStore, whose `_stats` (a StatsBook, or null: off) this writes. */
  constructor(store, ttlMs, flushMs) {
    this._store = store
    this._ttlMs = ttlMs
    this._flushMs = flushMs
    /** counts being written (taken from the book, not yet acknowledged) */
    this._inFlight = []
    this._flushing = null
    this._timer = null
    if (store._stats !== null) {
      this._timer = setInterval(() => {
        this.flush().catch(() => undefined)
      }, flushMs)
      this._timer.unref()
    }
  }

  statsKey(kind, name) {
    return taggedKey(this._store, 'stats', `${kind}:${escapeKey(name)}`)
  }

  /**
   * The registry's keys (lua/stats.lua): every member by last use, their options, those on
   * probation and those protected (by last use), and when each was seen (periods, since).
   */
  registryKeys() {
    const r = taggedKey(this._store, 'limiters', 'registry')
    return [r, `${r}:options`, `${r}:probation`, `${r}:protected`, `${r}:seen`]
  }

  _run(ops) {
    return native.redisStats(this._store._native, encodeParts(ops), STATS_LANE).then(orThrow)
  }

  /**
   * Writes the counts taken since the last flush: one HINCRBYFLOAT per counter of each limiter
   * and its registry entry, in one script call per hash slot. A failure gives the counts back
   * to the next flush; at close() they are counted as dropped.
   */
  flush() {
    const store = this._store
    const book = store._stats
    if (book === null) return Promise.resolve()
    if (this._flushing !== null) return this._flushing
    const taken = book.take()
    if (taken.length === 0 && store._leases.size === 0) return Promise.resolve()
    if (store.status === 'down') {
      book.giveBack(taken)
      return Promise.resolve()
    }
    const ttl = String(this._ttlMs)
    const ops = []
    // sightings at least half a flush period apart are two periods of use in the registry (a
    // timer's flush is never exactly one period after the last; other processes flush too)
    const registry = [ttl, String(MAX_LIMITERS), String(MAX_PROTECTED), String(Math.ceil(this._flushMs / 2))]
    // a hash lives as long as its limit's state, and at least two flush periods (so a
    // limiter in use never loses its hash between two flushes), at most statsTtlMs
    const minTtlMs = 2 * this._flushMs
    const incrs = [] // the entry of each incr operation, in order
    const now = store._nowMsLocal()
    const minute = Math.floor(now / MINUTE_MS)
    const refreshed = []
    for (const t of taken) {
      // the registry record (last use, the periods of use) at every flush that found the name
      // used, so a last use read anywhere is within one flush period (statsFlushMs) of the
      // truth; the options with the first two writes only (a name used in two flush periods is
      // protected in the registry: it must hear of both)
      const e = t.entry
      // one packed argument (see lua/stats.lua): TTL, the ring slot and minute of the
      // per-minute counts for charts (counted at the flush: within statsFlushMs of the
      // decisions), then the counts, empty for 0
      const c = t.counts
      if (e.ttlMs === 0) {
        // whole ms: PEXPIRE refuses a fraction, and the script's earlier writes would stay
        // without their TTL (a budget's lifetime is interval x (1 + maxBurst / limit))
        const lifetimeMs = Math.ceil(stateLifetimeMs(t.kind, t.options)) || Infinity
        e.ttlMs = Math.max(minTtlMs, Math.min(this._ttlMs, lifetimeMs))
      }
      let packed = `${e.ttlMs},${c[0] !== 0 || c[1] !== 0 ? minute % SERIES : ''},${minute}`
      let fields = 0
      for (let i = 0; i < c.length; i++) {
        if (c[i] === 0) packed += ','
        else {
          packed += `,${c[i]}`
          fields++
        }
      }
      if (fields > 0) {
        incrs.push(t)
        ops.push('incr', '1', this.statsKey(t.kind, t.name), '1', packed)
      }
      registry.push(
        `${t.kind}:${t.name}`,
        String(Math.round(t.lastUse)),
        e.registered < 2 ? optionsJson(t.options) : '',
      )
      refreshed.push(e)
    }
    this._leaseGauges(ops, now)
    const keys = this.registryKeys()
    const zset = keys[0]
    if (registry.length > 4) ops.push('registry', '5', ...keys, String(registry.length), ...registry)
    if (ops.length === 0) return Promise.resolve()
    this._inFlight = taken
    let sent
    try {
      sent = this._run(ops)
    } catch (err) {
      sent = Promise.reject(err)
    }
    this._flushing = sent
      .then(
        (reply) => {
          for (const e of refreshed) e.registered++
          // a hash of another type under our name (another writer): its counts cannot be
          // written, now or later; counted as dropped, never sent again
          for (let i = 0; i < incrs.length; i++) if (isWrongTypeReply(reply[i])) book.drop([incrs[i]])
          // the registry's cap dropped these limiters: their statistics go with them
          const gone = registry.length > 4 && Array.isArray(reply) ? reply[reply.length - 1] : null
          if (Array.isArray(gone) && gone.length > 0 && !isWrongTypeReply(gone))
            return this._dropStats(gone).catch(() => undefined) // they expire anyway
        },
        (err) => {
          const error = store._failure(err)
          if (store._circuit.opens(error)) store._circuit.trip(error, zset)
          book.giveBack(taken)
          throw error
        },
      )
      .finally(() => {
        this._inFlight = []
        this._flushing = null
      })
    return this._flushing
  }

  /** The key of the tokens `kind:name`'s processes hold on lease (a sorted set; see lua/stats.lua). */
  leaseKey(kind, name) {
    return taggedKey(this._store, 'stats', `${kind}:${escapeKey(name)}`, 0, ['leases'])
  }

  /**
   * Adds to `ops` the tokens each lease of this process holds (lib/classes/lease.js), as this
   * process's member of the limiter's gauge, ending `maxAgeMs` and two flush periods from `now`
   * (a killed process's leave by then); a lease that holds none is written once more (its
   * member removed), then forgotten.
   */
  _leaseGauges(ops, now) {
    const store = this._store
    for (const l of store._leases) {
      const member = l.held > 0 ? `${store._processId},${l.held}` : ''
      if (member === '') store._leases.delete(l)
      if (member === '' && l.member === '') continue
      const ttl = String(l.maxAgeMs + 2 * this._flushMs)
      const o = l.owner
      ops.push('lease', '1', this.leaseKey(o._statsKind, o._statsName), '4', String(now), ttl, l.member, member)
      l.member = member
    }
  }

  /** The tokens every process holds on lease for `kind:name` now (their last flush's). */
  async leased(kind, name) {
    const store = this._store
    if (store._closed) throw closedError()
    const reply = await this._run(['leases', '1', this.leaseKey(kind, name), '1', String(store._nowMsLocal())])
    let sum = 0
    for (const m of reply[0]) sum += Number(String(m).split(',')[1]) || 0
    return sum
  }

  /** Deletes the statistics hashes of registry members (`<kind>:<name>`) the registry dropped. */
  async _dropStats(members) {
    const ops = []
    for (const m of members) {
      const colon = m.indexOf(':')
      if (colon > 0) ops.push('del', '1', this.statsKey(m.slice(0, colon), m.slice(colon + 1)), '0')
    }
    if (ops.length > 0) await this._run(ops)
  }

  /** This process's counts of `kind:name` not yet in Redis (unwritten or being written). */
  _unwritten(kind, name) {
    const local = this._store._stats.local(kind, name)
    for (const t of this._inFlight) {
      if (t.kind === kind && t.name === name) for (const f of Object.keys(local)) local[f] += t.counts[INDEX[f]]
    }
    return local
  }

  /**
   * Statistics and per-minute history (last 30 minutes) of each `{ kind, name }`: the store's,
   * plus this process's unwritten counts, in one script call per hash slot:
   * `[{ stats, history: [{ t, admitted, refused }] }]`
   */
  async detail(list) {
    const store = this._store
    if (store._closed) throw closedError()
    if (store._stats === null) throw statsOffError()
    const locals = list.map((l) => this._unwritten(l.kind, l.name))
    if (store.status === 'down') throw store._circuit.policy.error
    const ops = []
    for (const l of list) ops.push('hgetall', '1', this.statsKey(l.kind, l.name), '0')
    let reply = []
    if (ops.length > 0) {
      try {
        reply = await this._run(ops)
      } catch (err) {
        throw store._failure(err)
      }
    }
    const now = store._nowMsLocal()
    if (reply.some(isWrongTypeReply)) throw statsWrongTypeError('statistics')
    return list.map((l, i) => ({
      stats: statsFrom(reply[i], locals[i]),
      history: historyFrom(reply[i], locals[i], now),
    }))
  }

  /** The limiters used through any store on this Redis (see RedisStore.limiters). */
  async limiters() {
    const store = this._store
    if (store._closed) throw closedError()
    if (store._stats === null) throw statsOffError()
    const seen = new Map()
    for (const l of store._stats.seen()) seen.set(`${l.kind}:${l.name}`, l)
    if (store.status === 'down') throw store._circuit.policy.error
    const [zset, options] = this.registryKeys()
    const since = String(Math.floor(store._nowMsLocal() - this._ttlMs))
    let reply
    try {
      reply = await this._run(['since', '2', zset, options, '1', since])
    } catch (err) {
      throw store._failure(err)
    }
    const flat = reply[0]
    if (isWrongTypeReply(flat)) throw statsWrongTypeError('limiter registry')
    for (let i = 0; i + 2 < flat.length; i += 3) {
      const member = flat[i]
      const colon = member.indexOf(':')
      const lastUse = Number(flat[i + 1])
      const known = seen.get(member)
      if (known !== undefined && known.lastUse >= lastUse) continue
      let parsed = {}
      try {
        parsed = JSON.parse(flat[i + 2])
      } catch {
        parsed = {}
      }
      seen.set(member, { kind: member.slice(0, colon), name: member.slice(colon + 1), options: parsed, lastUse })
    }
    return byLastUse([...seen.values()])
  }

  /** The store closes: the last counts are written now, or counted as dropped. */
  async close() {
    if (this._timer !== null) clearInterval(this._timer)
    this._timer = null
    const book = this._store._stats
    if (book === null) return
    await (this._flushing || Promise.resolve()).catch(() => undefined)
    await this.flush().catch(() => undefined)
    const left = book.take()
    if (left.length > 0) book.drop(left)
  }
}

module.exports = { StatsWriter }
