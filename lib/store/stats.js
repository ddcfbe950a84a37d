// @ts-check
'use strict'

// Statistics of every limiter, per kind and name, counted in the process (a few additions per
// decision, no round trip) and, on a RedisStore, written in the background: every
// `statsFlushMs` one pipeline of increments per hash slot, and on close(). A flush that fails
// is merged back and retried with the next one; what a closing store cannot write is counted
// in `dropped`. On a MemoryStore the process's counts are the store's counts.
//
// The book is a registry bounded by entries and bytes that admits by frequency (a segmented
// LRU, as 2Q and TinyLFU's main space): a name enters on probation; one seen in two flush
// periods or more is protected; a full book forgets the least recently used names on
// probation first. So a flood of names seen once (a door's client keys, per-user limiters,
// origins) churns the probation segment only and never pushes out a limiter used in two
// periods. Protected names are at most MAX_PROTECTED: beyond it the least recently used of
// them go back to probation (only names used more than the flood's can push them there).

const { STATS_KINDS, BY_STATS_KIND } = require('../kinds')
const { escapeKey } = require('./keys')

/** The counters every kind has, in their order in a flush. */
const FIELDS = [
  'admitted',
  'refused',
  'admittedWeight',
  'refusedWeight',
  'nearLimit',
  'waited',
  'waitTimeMs',
  'degraded',
  'rescheduled',
]
/**
 * Counters only some kinds report (a kind lists them in `statsFields`, lib/kinds/): the
 * outgoing door's answers 429/503 and the blocks it recorded (sluice/fetch); the refusals a
 * shadow mode admitted and the calls a rule denied (store.rules, the kinds that honour them);
 * the lease calls a leasing rate limiter made and the tokens it gave back (lib/classes/lease.js). Every entry
 * holds room for them after FIELDS; a kind without them never counts them nor shows them.
 */
const EXTRA_FIELDS = ['throttled', 'blocks', 'shadowRefused', 'denied', 'leaseCalls', 'returned']
const ALL_FIELDS = [...FIELDS, ...EXTRA_FIELDS]
const INDEX = Object.fromEntries(ALL_FIELDS.map((f, i) => [f, i]))
/** The fields `kind`'s statistics show: FIELDS and the extra ones it names. */
const fieldsOf = (kind) => {
  const extra = BY_STATS_KIND.get(kind)?.statsFields
  return extra === undefined ? FIELDS : [...FIELDS, ...extra]
}
/** Every kind statistics are counted under (see lib/kinds/: a kind may count under several). */
const KINDS = STATS_KINDS
/** Minutes of admitted/refused counts kept per limiter for charts (a ring: `t`, `a`, `r` per slot). */
const SERIES = 30
const MINUTE_MS = 60_000
/**
 * Limiters a registry keeps at most (a process's book, a MemoryStore's, the registry on Redis):
 * the least recently used on probation go first.
 */
const MAX_LIMITERS = 10_000
/** Of them, protected (seen in two flush periods or more) at most; see the module notes. */
const MAX_PROTECTED = 8_000
/** What a book's entries may hold at most, bytes (estimated as entryBytes does). */
const MAX_BOOK_BYTES = 16 * 1024 * 1024
/**
 * What an entry costs beside its name and options, bytes: the object, its two count arrays
 * and a per-minute ring (a MemoryStore's), the Map's slot. An estimate above what V8 holds.
 */
const ENTRY_BYTES = 800
/** The period a MemoryStore's book counts uses in (its "flush period"), ms: RedisStore's default. */
const PERIOD_MS = 5_000
/** A registry record's options JSON, characters at most (see optionsJson). */
const MAX_OPTIONS_CHARS = 4_096

/**
 * How long the store may keep the state of a limiter of `kind` with `options` (its
 * `_statsOptions()`), ms: the longest interval or window its state covers. A statistics hash
 * lives no longer than this and two flush periods (see RedisStore's flush), so a per-user
 * limiter's statistics leave Redis soon after its limit does. 0 when unknown.
 */
function stateLifetimeMs(kind, o) {
  if (o === null || typeof o !== 'object') return 0
  const k = BY_STATS_KIND.get(kind)
  return k === undefined ? 0 : k.lifetimeMs(o)
}

function count(c, admitted, weight, near, degraded) {
  if (admitted) {
    c[0]++
    c[2] += weight
    if (near) c[4]++
  } else {
    c[1]++
    c[3] += weight
  }
  if (degraded) c[7]++
}

/** The events among counts (decisions, waits, reschedules): what `dropped` counts. */
const events = (c) => c[0] + c[1] + c[5] + c[8]

class Entry {
  constructor(kind, name, options, cumulative) {
    this.kind = kind
    this.name = name
    this.options = options
    this.lastUse = 0
    /** counts not yet written to the store (RedisStore) or all counts (MemoryStore) */
    this.counts = new Float64Array(ALL_FIELDS.length)
    /** this process's counts since the book began, never reset (for metrics) */
    this.totals = cumulative ? this.counts : new Float64Array(ALL_FIELDS.length)
    this.dirty = false
    /** the TTL of the entry's statistics hash on a RedisStore, ms (0: not computed yet) */
    this.ttlMs = 0
    /** per-minute counts (a MemoryStore's book only): SERIES slots of [minute, admitted, refused] */
    this.series = null
    /** flush periods this entry was used in (saturating), the last of them, and its segment */
    this.periods = 0
    this.period = -1
    this.protected = false
    /** registry writes of this entry the store acknowledged (a RedisStore's writer) */
    this.registered = 0
    /** what the book counts the entry as holding, bytes */
    this.bytes = 0
  }
}

/**
 * `options` as registry JSON, at most MAX_OPTIONS_CHARS: a longer record loses its largest
 * fields (each named in `cut`) until it fits, so a map that grows with use (a budget's tenants)
 * never makes one record large. '{}' when nothing fits.
 */
function optionsJson(options) {
  let json = JSON.stringify(options ?? {})
  if (json.length <= MAX_OPTIONS_CHARS) return json
  const fields = Object.entries(options).map(([k, v]) => [k, JSON.stringify(v) ?? ''])
  fields.sort((a, b) => b[1].length - a[1].length)
  const kept = { ...options, cut: [] }
  for (const [k] of fields) {
    delete kept[k]
    kept.cut.push(k)
    json = JSON.stringify(kept)
    if (json.length <= MAX_OPTIONS_CHARS) return json
  }
  return '{}'
}

/** What an entry of `name` with `options` is counted as holding, bytes. */
const entryBytes = (name, options) => ENTRY_BYTES + 2 * (name.length + optionsJson(options).length)

/** Counts one decision at `ms` in `e`'s per-minute ring. */
function countMinute(e, ms, admitted) {
  const minute = Math.floor(ms / MINUTE_MS)
  const s = e.series === null ? (e.series = new Float64Array(SERIES * 3)) : e.series
  const j = (minute % SERIES) * 3
  if (s[j] !== minute) {
    s[j] = minute
    s[j + 1] = 0
    s[j + 2] = 0
  }
  s[admitted ? j + 1 : j + 2]++
}

/**
 * The last SERIES minutes up to `nowMs`, oldest first: `{ t, admitted, refused }` (t: the
 * minute's start, ms). `slot(i)` gives what a ring slot holds: [minute, admitted, refused] or null.
 */
function historyOf(nowMs, slot) {
  const last = Math.floor(nowMs / MINUTE_MS)
  const out = []
  for (let m = last - SERIES + 1; m <= last; m++) {
    const held = slot(((m % SERIES) + SERIES) % SERIES)
    const here = held !== null && held[0] === m
    out.push({ t: m * MINUTE_MS, admitted: here ? held[1] : 0, refused: here ? held[2] : 0 })
  }
  return out
}

class StatsBook {
  /**
   * `now()`: ms on the store's clock. `exactTime`: stamp each use (a MemoryStore, whose book is
   * the store; a use counts in the period of PERIOD_MS it falls in); otherwise a use is stamped
   * when its counts are taken by a flush, which keeps the clock read off the decision path, and
   * each flush that takes an entry's counts is one period of its use.
   */
  constructor(now, exactTime = true) {
    this._now = now
    this._exactTime = exactTime
    /** kind -> (name -> Entry): a fixed-shape object, one Map per kind */
    this._kinds = new Map()
    this._byKind = Object.seal(Object.fromEntries(KINDS.map((k) => [k, null])))
    this._size = 0
    /** entries protected (seen in two periods or more), and what all entries hold, bytes */
    this._protected = 0
    this._bytes = 0
    /** flushes that took counts (the period of a book without exact time) */
    this._takes = 0
    /** called with (kind, name, ms) for every wait (sluice/metrics' histograms), or null */
    this.onWait = null
    /** events (decisions, waits, reschedules) whose counts were lost: a store closed while
     * Redis was down, or a limiter forgotten by a full book before its counts were written */
    this.dropped = 0
  }

  /** @internal entries held, entries protected and their bytes (an estimate; for tests) */
  get sizes() {
    return { entries: this._size, protected: this._protected, bytes: this._bytes }
  }

  /**
   * The entry of `owner` (a limiter with `_statsKind`, `_statsName`, `_statsOptions()`), or null
   * when it counts nowhere. An owner with `_statsAs` counts as that owner (null: not counted,
   * e.g. the per-client limiters of an HTTP door, which counts each request as itself).
   */
  _entry(owner) {
    const as = owner._statsAs
    if (as !== undefined) {
      if (as === null) return null
      owner = as
    }
    let names = this._byKind[owner._statsKind]
    if (names === null) names = this._names(owner._statsKind)
    let e = names.get(owner._statsName)
    if (e === undefined) {
      e = this._insert(names, owner._statsKind, owner._statsName, owner._statsOptions())
      if (this._exactTime) this._use(e, this._now())
    } else if (this._exactTime) {
      this._use(e, this._now())
    }
    e.dirty = true
    return e
  }

  /** A new entry in `names`, room made for it first (see _evict). */
  _insert(names, kind, name, options) {
    const bytes = entryBytes(name, options)
    if (this._size >= MAX_LIMITERS || this._bytes + bytes > MAX_BOOK_BYTES) this._evict(bytes)
    const e = new Entry(kind, name, options, this._exactTime)
    e.bytes = bytes
    names.set(name, e)
    this._size++
    this._bytes += bytes
    return e
  }

  /** A use of `e` at `ms` (exact time): a new period of PERIOD_MS counts once. */
  _use(e, ms) {
    e.lastUse = ms
    const period = Math.floor(ms / PERIOD_MS)
    if (period !== e.period) this._seenIn(e, period)
  }

  /** `e` was used in a period it was not seen in yet: protected from its second. */
  _seenIn(e, period) {
    e.period = period
    if (e.periods < 255) e.periods++
    if (!e.protected && e.periods >= 2) {
      e.protected = true
      if (++this._protected > MAX_PROTECTED) this._demote()
    }
  }

  /** Too many protected: the least recently used tenth of them go back to probation. */
  _demote() {
    const byUse = [...this._all()].filter((e) => e.protected).sort((a, b) => a.lastUse - b.lastUse)
    for (const e of byUse.slice(0, Math.ceil(MAX_PROTECTED / 10))) {
      e.protected = false
      e.periods = 1 // back as a name seen once: its next period protects it again
      this._protected--
    }
  }

  _names(kind) {
    let names = this._kinds.get(kind)
    if (names === undefined) {
      this._kinds.set(kind, (names = new Map()))
      this._byKind[kind] = names
    }
    return names
  }

  *_all() {
    for (const names of this._kinds.values()) yield* names.values()
  }

  /**
   * Makes room for an entry of `bytes`: forgets a tenth of the book (and what the bytes bound
   * needs), the least recently used on probation first, protected ones only when probation
   * holds too few (their unwritten counts are counted as dropped). In a book without exact
   * time, an entry not flushed yet is the most recent (its use is not stamped yet): the
   * written ones go first, losing nothing.
   */
  _evict(bytes) {
    const all = [...this._all()]
    const use = this._exactTime ? (e) => e.lastUse : (e) => (e.dirty ? Infinity : e.lastUse)
    const byUse = (a, b) => use(a) - use(b) || 0
    const order = [...all.filter((e) => !e.protected).sort(byUse), ...all.filter((e) => e.protected).sort(byUse)]
    let n = Math.ceil(MAX_LIMITERS / 10)
    for (const e of order) {
      if (n <= 0 && this._bytes + bytes <= MAX_BOOK_BYTES * 0.9) break
      n--
      if (e.dirty) this.dropped += events(e.counts)
      this._kinds.get(e.kind).delete(e.name)
      this._size--
      this._bytes -= e.bytes
      if (e.protected) this._protected--
    }
  }

  /**
   * One decision of `owner`: admitted or refused, its weight, whether it left at most 20 %
   * of the limit (`near`), whether it was answered without Redis.
   */
  decision(owner, admitted, weight, near, degraded) {
    const e = this._entry(owner)
    if (e === null) return
    count(e.counts, admitted, weight, near, degraded)
    if (e.totals !== e.counts) count(e.totals, admitted, weight, near, degraded)
    else countMinute(e, e.lastUse, admitted)
  }

  /** A caller of `owner` waited `ms` for its turn. */
  waited(owner, ms) {
    const e = this._entry(owner)
    if (e === null) return
    e.counts[5]++
    e.counts[6] += ms
    if (e.totals !== e.counts) {
      e.totals[5]++
      e.totals[6] += ms
    }
    if (this.onWait !== null) this.onWait(e.kind, e.name, ms)
  }

  /** `n` (default 1) events of `owner` counted in `field`, one of EXTRA_FIELDS (its kind lists it in `statsFields`). */
  event(owner, field, n = 1) {
    const e = this._entry(owner)
    if (e === null) return
    const i = INDEX[field]
    e.counts[i] += n
    if (e.totals !== e.counts) e.totals[i] += n
  }

  /** A job of `owner` was moved back to delayed (sluice/bullmq). */
  rescheduled(owner) {
    const e = this._entry(owner)
    if (e === null) return
    e.counts[8]++
    if (e.totals !== e.counts) e.totals[8]++
  }

  /** Every entry's cumulative counts in this process: `{ kind, name, options, totals }`. */
  totals() {
    return [...this._all()].map((e) => ({ kind: e.kind, name: e.name, options: e.options, totals: e.totals }))
  }

  /** The counts of `kind:name` held here, as an object (zeros when none). */
  local(kind, name) {
    const names = this._kinds.get(kind)
    const e = names === undefined ? undefined : names.get(name)
    const out = {}
    for (const f of fieldsOf(kind)) out[f] = e ? e.counts[INDEX[f]] : 0
    return /** @type {import('./store').LimiterStats} */ (out)
  }

  /** The per-minute history of `kind:name` held here (a MemoryStore's book): see historyOf. */
  history(kind, name) {
    const names = this._kinds.get(kind)
    const e = names === undefined ? undefined : names.get(name)
    const s = e === undefined ? null : e.series
    return historyOf(this._now(), (j) => (s === null ? null : [s[j * 3], s[j * 3 + 1], s[j * 3 + 2]]))
  }

  /** The limiters seen here: `{ kind, name, options, lastUse }` (a use not yet flushed: now). */
  seen() {
    const now = this._now()
    return [...this._all()].map((e) => ({
      kind: e.kind,
      name: e.name,
      options: e.options,
      lastUse: this._exactTime || !e.dirty ? e.lastUse : now,
    }))
  }

  /** Takes the unwritten counts (a flush): the entries with their deltas; the book starts over. */
  take() {
    const out = []
    const now = this._exactTime ? 0 : this._now()
    const period = this._exactTime ? 0 : ++this._takes
    for (const e of this._all()) {
      if (!e.dirty) continue
      if (!this._exactTime) {
        e.lastUse = now
        this._seenIn(e, period)
      }
      out.push({
        kind: e.kind,
        name: e.name,
        options: e.options,
        lastUse: e.lastUse,
        counts: e.counts.slice(),
        entry: e,
      })
      e.counts.fill(0)
      e.dirty = false
    }
    return out
  }

  /** Gives back counts a flush could not write (they go with the next one). */
  giveBack(taken) {
    for (const t of taken) {
      const names = this._names(t.kind)
      let e = names.get(t.name)
      if (e === undefined) {
        e = this._insert(names, t.kind, t.name, t.options)
        e.lastUse = t.lastUse
      }
      for (let i = 0; i < ALL_FIELDS.length; i++) e.counts[i] += t.counts[i]
      e.dirty = true
    }
  }

  /** Counts `taken` as lost (a store closed while Redis was down). */
  drop(taken) {
    for (const t of taken) this.dropped += events(t.counts)
  }
}

/** Statistics of the limiters used recently (`{ kind, name, lastUse }`), newest first. */
function byLastUse(list) {
  return list.sort((a, b) => b.lastUse - a.lastUse || (a.kind + a.name < b.kind + b.name ? -1 : 1))
}

/** A stats object from a Redis hash's `[field, value, ...]` plus local counts. */
function statsFrom(flat, local) {
  const out = { ...local }
  for (let i = 0; i + 1 < flat.length; i += 2) {
    // the fields of the limiter's kind only (`local` has them all, zeros included)
    if (Object.prototype.hasOwnProperty.call(out, flat[i])) out[flat[i]] += Number(flat[i + 1])
  }
  return out
}

/**
 * The per-minute history in a Redis hash's `[field, value, ...]` (fields t<slot>, a<slot>,
 * r<slot>), with this process's unwritten admitted/refused counts (`local`) in the current minute.
 */
function historyFrom(flat, local, nowMs) {
  const ring = new Array(SERIES).fill(null)
  for (let i = 0; i + 1 < flat.length; i += 2) {
    const f = flat[i]
    const at = 'tar'.indexOf(f[0])
    if (at < 0 || f.length < 2) continue
    const j = Number(f.slice(1))
    if (!Number.isInteger(j) || j < 0 || j >= SERIES) continue
    if (ring[j] === null) ring[j] = [NaN, 0, 0]
    ring[j][at] = Number(flat[i + 1])
  }
  const out = historyOf(nowMs, (j) => ring[j])
  out[out.length - 1].admitted += local.admitted
  out[out.length - 1].refused += local.refused
  return out
}

module.exports = {
  byLastUse,
  StatsBook,
  statsFrom,
  historyFrom,
  escapeKey,
  stateLifetimeMs,
  FIELDS,
  ALL_FIELDS,
  INDEX,
  KINDS,
  MAX_LIMITERS,
  MAX_PROTECTED,
  MAX_BOOK_BYTES,
  PERIOD_MS,
  optionsJson,
  SERIES,
  MINUTE_MS,
}
