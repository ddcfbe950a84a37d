// @ts-check
'use strict'
// `store.rules` (../shared/DESIGN.md §9): the operators' rules of one store, kept in the store
// and cached in every process (lib/store/rules/table.js), so a decision looks its rule up with
// no round trip. A MemoryStore is one process: its rules are the table. A RedisStore's live in
// Redis (lua/rules.lua): a write is in force in the writing process at once and in every other
// within a second (a message on the rules' channel, and a read of the version every 500 ms
// whichever comes first; at most 2 background reads a second); connect() resolves with the table
// loaded.

const native = require('../../native')
const { orThrow, invalidArgument, SluiceError } = require('../../base/errors')
const { encodeParts } = require('../../base/codec')
const { taggedKey } = require('../keys')
const { statsWrongTypeError } = require('../errors')
const { RuleTable } = require('./table')
const { checkTarget, checkRule, checkTtl, targetId, MAX_RULES } = require('./check')

const DAY_MS = 86_400_000
/** How long the rules' keys live without a write or a renewal. */
const TTL_MS = 400 * DAY_MS
/** The history kept: the last operator changes. */
const HISTORY = 1000
/** Changes the log keeps for processes catching up (past it, a process reads the whole table). */
const LOG_CAP = 1024
/** The longest gap between two reads of the version. */
const POLL_MS = 500
/** How often the messages received meanwhile are handed over when no waiter's loop does, ms. */
const DRAIN_MS = 25
/** The pool lane of the rules' reads and writes (statistics use 5). */
const RULES_LANE = 6

/** A ban's identity in Redis: a JSON array whose first element is 'b' (a rule's is another). */
const banId = (door, key) => JSON.stringify(['b', door, key])

/** The door and client key of a ban's identity, or null when `id` is not one. */
function banOfId(id) {
  if (!id.startsWith('["b",')) return null
  try {
    const a = JSON.parse(id)
    if (Array.isArray(a) && a.length === 3 && typeof a[1] === 'string' && typeof a[2] === 'string') return a
  } catch {}
  return null
}

/** A ban's end from its stored JSON (`{"until":<epoch ms>}`), or null. */
function banUntil(json) {
  try {
    const v = JSON.parse(json)
    return Number.isSafeInteger(v?.until) ? v.until : null
  } catch {
    return null
  }
}

/** A target from its identity (lib/store/rules/check.js targetId), or null for a malformed one. */
function targetOfId(id) {
  let a
  try {
    a = JSON.parse(id)
  } catch {
    return null
  }
  if (!Array.isArray(a)) return null
  try {
    if (a[0] === 'n') return checkTarget({ kind: a[1], name: a[2] })
    if (a[0] === 'p') return checkTarget({ kind: a[1], prefix: a[2] })
    if (a[0] === 'dk') return checkTarget({ door: a[1], key: a[2] })
    if (a[0] === 'dp') return checkTarget(a[2] === '' ? { door: a[1] } : { door: a[1], keyPrefix: a[2] })
    if (a[0] === 't') return checkTarget({ budget: a[1], tenant: a[2] })
  } catch {}
  return null
}

/** A stored value (`{ rule, expiresAt? }` as JSON) checked again for `target`, or null. */
function entryOf(target, json) {
  try {
    const v = JSON.parse(json)
    const rule = checkRule(target, v.rule)
    if (v.expiresAt !== undefined && !Number.isFinite(v.expiresAt)) return null
    return { rule, expiresAt: v.expiresAt }
  } catch {
    return null
  }
}

class Rules {
  constructor(store) {
    /** @type {any} the store (not enumerable: a MemoryStore stays a tree for JSON.stringify) */
    this._store = store
    Object.defineProperty(this, '_store', { enumerable: false })
    this._table = new RuleTable()
  }

  /** @internal ms on the store's clock */
  _now() {
    const clock = this._store.clock
    return clock ? clock.now() : Date.now()
  }

  /**
   * Sets the rule of `target` (replacing its rule), in force in this process at once. `ttlMs`:
   * the rule ends that long from now, on the store's clock.
   */
  async set(target, rule, options) {
    const t = checkTarget(target)
    const r = checkRule(t, rule)
    const ttlMs = checkTtl(options)
    if (this._table.full(t)) {
      throw invalidArgument(`the store holds ${MAX_RULES} rules, the most it takes: delete some first`)
    }
    const now = this._now()
    await this._write('set', t, r, ttlMs === undefined ? undefined : now + ttlMs, now)
  }

  /** Deletes the rule of `target`; whether there was one. */
  async delete(target) {
    const t = checkTarget(target)
    return this._write('delete', t, null, undefined, this._now())
  }

  /** The operator rules in force (each with its target first). */
  async list() {
    await this._fresh()
    return this._table.list(this._now())
  }

  /** The doors' automatic bans in force. */
  async bans() {
    await this._fresh()
    return this._table.bans(this._now())
  }

  /**
   * Lifts the ban of client `key` of door `door` (a door's `ban` wrote it), in every process;
   * whether there was one.
   */
  async unban(target) {
    const t = checkTarget(target)
    if (t.door === undefined || t.key === undefined) throw invalidArgument('unban takes { door, key }')
    const had = this._table.unban(t.door, t.key)
    return (await this._banWrite('unban', t.door, t.key, 0, this._now())) || had
  }

  /**
   * @internal bans client `key` of door `door` until `until` (epoch ms, the store's clock): in
   * force here at once and in every process within a second. The ban table holds at most
   * `maxBans` (the bans ending first go). A write that fails leaves the ban in this process.
   */
  async _ban(door, key, until) {
    this._table.ban(door, key, until)
    await this._banWrite('ban', door, key, until, this._now()).catch(() => false)
  }

  /**
   * @internal writes a ban or its lifting (each store its own way); whether it changed anything
   * @param {'ban' | 'unban'} op
   * @param {string} door
   * @param {string} key
   * @param {number} until
   * @param {number} now
   * @returns {Promise<boolean>}
   */
  // eslint-disable-next-line no-unused-vars
  async _banWrite(op, door, key, until, now) {
    return false
  }

  /** @internal the rule of `kind` `name` now (a decision's lookup: no round trip) */
  _forName(kind, name) {
    return this._table.forName(kind, name, this._now())
  }

  /** @internal the rule of client `key` of door `door` now */
  _forDoorKey(door, key) {
    return this._table.forDoorKey(door, key, this._now())
  }

  /** @internal the rule of `tenant` of budget `budget` now */
  _forTenant(budget, tenant) {
    return this._table.forTenant(budget, tenant, this._now())
  }

  /** The history entry of a change. */
  _entry(at, target, rule, expiresAt) {
    const e = { at, target, rule: rule === null ? null : { target, ...rule } }
    if (rule !== null && expiresAt !== undefined) e.rule.expiresAt = expiresAt
    if (rule !== null && rule.note !== undefined) e.note = rule.note
    return e
  }

  /**
   * @internal writes a change (each store its own way); whether the target had a rule (a
   * delete) or `true` (a set)
   * @param {'set' | 'delete'} op
   * @param {object} target
   * @param {object | null} rule
   * @param {number | undefined} expiresAt
   * @param {number} now
   * @returns {Promise<boolean>}
   */
  // eslint-disable-next-line no-unused-vars
  async _write(op, target, rule, expiresAt, now) {
    throw new Error('a store defines _write')
  }

  async _fresh() {}
  _close() {}
}

/** A MemoryStore's rules: the table itself, and its history in memory. */
class MemoryRules extends Rules {
  constructor(store) {
    super(store)
    this._history = []
  }

  async _write(op, target, rule, expiresAt, now) {
    if (this._store._closed) throw new SluiceError('ERR_CLOSED', 'the store is closed')
    this._table.sweep(now)
    const had = op === 'set' ? (this._table.put(target, rule, expiresAt), true) : this._table.remove(target)
    if (had) {
      this._history.unshift(this._entry(now, target, rule, expiresAt))
      if (this._history.length > HISTORY) this._history.length = HISTORY
    }
    return had
  }

  /** The last 1,000 operator changes, newest first. */
  async history() {
    return this._history.map((e) => structuredClone(e))
  }
}

/** A RedisStore's rules: in Redis, cached here, kept fresh by messages and a poll. */
class RedisRules extends Rules {
  constructor(store) {
    super(store)
    const key = (part) => taggedKey(store, 'rules', 'rules', 0, part === undefined ? undefined : [part])
    this._keys = [key(), key('version'), key('log'), key('history'), key('ends'), key('bans'), key('ban-ends')]
    this._channel = `${store.keyPrefix}:rules`
    /** the version of the table held (-1: none read yet) */
    this._version = -1
    this._reading = null
    this._lastReadAt = -Infinity
    this._soon = null
    this._poll = null
    this._drain = null
    this._renew = null
    /** background reads made (messages and polls): at most 2 a second */
    this.reads = 0
  }

  _call(args) {
    const store = this._store
    if (store._closed) return Promise.reject(new SluiceError('ERR_CLOSED', 'the store is closed'))
    return native
      .redisRules(store._native, encodeParts([...this._keys, ...args]), RULES_LANE)
      .then(orThrow)
      .catch((err) => {
        throw store._failure(err)
      })
  }

  /** @internal at connect: the table loaded (when Redis is up), then the channel and the poll. */
  async _start() {
    const store = this._store
    if (store.status === 'up') {
      // subscribed first, then read: a change made in between arrives as a message
      await store._waiters.listen(this._channel, this).catch(() => undefined)
      await this._read().catch(() => undefined)
    }
    this._poll = setInterval(() => this._due(), POLL_MS)
    this._poll.unref()
    // messages: taken every DRAIN_MS (a timer that keeps no process alive)
    this._drain = setInterval(() => store._waiters.drain(), DRAIN_MS)
    this._drain.unref()
    this._renew = setInterval(() => {
      if (this._version > 0) this._call(['renew', String(TTL_MS)]).catch(() => undefined)
    }, DAY_MS)
    this._renew.unref()
  }

  _close() {
    clearInterval(this._drain ?? undefined)
    clearInterval(this._poll ?? undefined)
    clearInterval(this._renew ?? undefined)
    clearTimeout(this._soon ?? undefined)
  }

  /**
   * A message on the rules' channel (`rules <version>\n<target id>\n<rule json or ''>`, one
   * change: applied here when it is the next version, else the changes are read), or `*` (the
   * listener reconnected: changes may have been missed).
   */
  message(m) {
    if (m === '*') {
      this._due(true)
      return
    }
    const a = m.indexOf('\n')
    const b = m.indexOf('\n', a + 1)
    const v = Number(m.slice(6, a))
    if (!(v > this._version)) return
    if (v !== this._version + 1 || a < 0 || b < 0) {
      this._due(true)
      return
    }
    this._change(this._table, m.slice(a + 1, b), m.slice(b + 1))
    this._version = v
  }

  /** Applies one change to `table`: the rule or ban of `id` is now `json` ('' : none). */
  _change(table, id, json) {
    const ban = banOfId(id)
    if (ban !== null) {
      const until = json === '' ? null : banUntil(json)
      if (until === null) table.unban(ban[1], ban[2])
      else table.ban(ban[1], ban[2], until)
      return
    }
    const target = targetOfId(id)
    if (target === null) return // another writer's field: never applied
    const e = json === '' ? null : entryOf(target, json)
    if (e === null) table.remove(target)
    else table.put(target, e.rule, e.expiresAt)
  }

  /** Reads the changes now, or as soon as 2 reads a second allow. */
  _due(urgent = false) {
    const store = this._store
    if (store._closed || store.status === 'down') return
    // the channel lost (subscribed while down, or the subscription failed): again; the loop
    // that hands messages over stops while Redis is down: again
    if (!store._waiters.subscribed(this._channel)) store._waiters.listen(this._channel, this).catch(() => undefined)
    if (this._reading !== null || this._soon !== null) return
    const wait = this._lastReadAt + POLL_MS - Date.now()
    if (!urgent && wait > 0) return
    if (wait > 0) {
      this._soon = setTimeout(() => {
        this._soon = null
        this._due(true)
      }, wait)
      this._soon.unref()
      return
    }
    this.reads++
    this._read().catch(() => undefined)
  }

  /** Reads the changes since the version held and applies them. */
  _read() {
    if (this._reading !== null) return this._reading
    this._lastReadAt = Date.now()
    this._reading = this._call(['since', String(this._version)])
      .then((reply) => this._apply(reply))
      .finally(() => {
        this._reading = null
      })
    return this._reading
  }

  _apply(reply) {
    if (reply.length === 1 && reply[0] === 'WRONGTYPE') throw statsWrongTypeError('rules')
    const v = Number(reply[0])
    // messages applied meanwhile took this process past what the read saw: keep theirs
    if (v < this._version && this._version >= 0) return
    if (reply.length === 1) {
      this._version = v
      return
    }
    const all = reply[1] === 'all'
    const table = all ? new RuleTable() : this._table
    if (all) {
      // the bans held stay (a ban of this process may not be in the read yet); the read's on top
      table._bans = this._table._bans
      table._banCount = this._table._banCount
    }
    for (let j = 2; j + 1 < reply.length; j += 2) this._change(table, reply[j], reply[j + 1])
    this._table = table
    this._version = v
  }

  async _write(op, target, rule, expiresAt, now) {
    const id = targetId(target)
    const head = [op, String(now), String(TTL_MS), String(LOG_CAP), this._channel, id]
    const entry = JSON.stringify(this._entry(now, target, rule, expiresAt))
    const reply =
      op === 'set'
        ? await this._call([
            ...head,
            JSON.stringify({ rule, expiresAt }),
            expiresAt === undefined ? '' : String(expiresAt),
            entry,
            String(MAX_RULES),
          ])
        : await this._call([...head, entry])
    if (reply[0] === 'WRONGTYPE') throw statsWrongTypeError('rules')
    if (reply[0] === 'FULL') {
      throw invalidArgument(`the store holds ${MAX_RULES} rules, the most it takes: delete some first`)
    }
    const v = Number(reply[0])
    const had = op === 'set' || reply[1] === '1'
    // in force here at once; a version past the next one means others wrote meanwhile: read them
    if (had && op === 'set') this._table.put(target, rule, expiresAt)
    else if (had) this._table.remove(target)
    // others' changes in between (v past the next version): read them; its own message may
    // have come first (v already held)
    if (v <= this._version + 1) this._version = Math.max(this._version, v)
    else await this._read().catch(() => undefined)
    return had
  }

  async _banWrite(op, door, key, until, now) {
    const head = [op, String(now), String(TTL_MS), String(LOG_CAP), this._channel, banId(door, key)]
    const reply = await this._call(op === 'ban' ? [...head, String(until), String(this._table._maxBans)] : head)
    if (reply[0] === 'WRONGTYPE') throw statsWrongTypeError('rules')
    const v = Number(reply[0])
    if (reply[1] === '1') {
      if (v <= this._version + 1) this._version = Math.max(this._version, v)
      else await this._read().catch(() => undefined)
    }
    return reply[1] === '1'
  }

  async _fresh() {
    await this._read()
  }

  /** The last 1,000 operator changes, newest first. */
  async history() {
    const reply = await this._call(['history', String(HISTORY)])
    if (reply.length === 1 && reply[0] === 'WRONGTYPE') throw statsWrongTypeError('rules')
    const out = []
    for (const json of reply) {
      try {
        out.push(JSON.parse(json))
      } catch {}
    }
    return out
  }
}

module.exports = { Rules, MemoryRules, RedisRules, POLL_MS, TTL_MS, HISTORY }
