// @ts-check
'use strict'
// The store's rules (../shared/DESIGN.md §9) as a process holds them, indexed for the decision's
// lookup: O(length of the name) whatever the table's size (a map of exact names, and a map of
// prefixes probed at each distinct prefix length), never a scan of the rules.
//
// Precedence: an exact target beats a prefix, a longer prefix a shorter one (a door's whole-door
// rule is its prefix ''); the most specific rule applies whole; a ban or a `deny` that matches at
// any level beats everything. A rule past its `expiresAt` (on the store's clock) is not applied.

const { targetId, MAX_RULES } = require('./check')

/** Most bans held (the doors' automatic denies): past it, the oldest goes. */
const MAX_BANS = 100_000

/**
 * @typedef {{ id: string, target: any, rule: any, expiresAt?: number }} Entry
 * a rule as held: its target (checked), its fields, when it ends (epoch ms, the store's clock)
 */

const live = (/** @type {Entry | undefined} */ e, now) =>
  e !== undefined && (e.expiresAt === undefined || e.expiresAt > now)

/** The rules of one scope (a kind's names, a door's keys): exact texts and prefixes. */
class Level {
  constructor() {
    /** @type {Map<string, Entry>} */
    this.exact = new Map()
    /** @type {Map<string, Entry>} */
    this.prefixes = new Map()
    /** how many prefixes of each length (UTF-16 code units) */
    this._lengthCounts = new Map()
    /** the distinct prefix lengths, longest first */
    this.lengths = /** @type {number[]} */ ([])
  }

  get size() {
    return this.exact.size + this.prefixes.size
  }

  set(prefix, text, entry) {
    if (!prefix) {
      this.exact.set(text, entry)
      return
    }
    if (!this.prefixes.has(text)) this._count(text.length, 1)
    this.prefixes.set(text, entry)
  }

  delete(prefix, text) {
    if (!prefix) return this.exact.delete(text)
    if (!this.prefixes.delete(text)) return false
    this._count(text.length, -1)
    return true
  }

  _count(length, by) {
    const n = (this._lengthCounts.get(length) ?? 0) + by
    if (n === 0) this._lengthCounts.delete(length)
    else this._lengthCounts.set(length, n)
    if (n === 0 || n === by) this.lengths = [...this._lengthCounts.keys()].sort((a, b) => b - a)
  }

  /**
   * The rule that applies to `text` at `now`: a matching deny at any level, else the most
   * specific live rule, else undefined.
   * @returns {Entry | undefined}
   */
  match(text, now) {
    let best
    const e = this.exact.get(text)
    if (live(e, now)) {
      if (e?.rule.access === 'deny') return e
      best = e
    }
    for (const length of this.lengths) {
      if (length > text.length) continue
      const p = this.prefixes.get(length === text.length ? text : text.slice(0, length))
      if (!live(p, now)) continue
      if (p?.rule.access === 'deny') return p
      if (best === undefined) best = p
    }
    return best
  }
}

/** A scope's level in `map`, made when missing. */
function levelOf(map, key) {
  let level = map.get(key)
  if (level === undefined) map.set(key, (level = new Level()))
  return level
}

/** Where a target lives: its scope map's key, whether a prefix, its text. */
function placeOf(target) {
  if ('kind' in target)
    return 'name' in target ? ['kinds', target.kind, false, target.name] : ['kinds', target.kind, true, target.prefix]
  if ('door' in target)
    return 'key' in target
      ? ['doors', target.door, false, target.key]
      : ['doors', target.door, true, target.keyPrefix ?? '']
  return ['tenants', target.budget, false, target.tenant]
}

/**
 * The operator rules of one store, and the doors' bans in a bounded table of their own (a flood
 * of banned clients never crowds out an operator's rules). `version` counts the changes applied.
 */
class RuleTable {
  constructor({ maxBans = MAX_BANS } = {}) {
    /** @type {Map<string, Entry>} */
    this._byId = new Map()
    this._scopes = { kinds: new Map(), doors: new Map(), tenants: new Map() }
    /** door -> Map(client key -> epoch ms the ban ends), oldest first */
    this._bans = new Map()
    this._banCount = 0
    this._maxBans = maxBans
    this.version = 0
  }

  /** Operator rules held (live or not yet swept). */
  get size() {
    return this._byId.size
  }

  /** Whether one more rule (not replacing one) would pass MAX_RULES. */
  full(target) {
    return this._byId.size >= MAX_RULES && !this._byId.has(targetId(target))
  }

  /** Puts a rule (checked; replaces the target's rule). */
  put(target, rule, expiresAt) {
    const id = targetId(target)
    const entry = expiresAt === undefined ? { id, target, rule } : { id, target, rule, expiresAt }
    const [scope, key, prefix, text] = placeOf(target)
    levelOf(this._scopes[scope], key).set(prefix, text, entry)
    this._byId.set(id, entry)
    this.version++
    return entry
  }

  /** Removes the target's rule; whether there was one. */
  remove(target) {
    const id = targetId(target)
    if (!this._byId.delete(id)) return false
    const [scope, key, prefix, text] = placeOf(target)
    const map = this._scopes[scope]
    const level = map.get(key)
    level.delete(prefix, text)
    if (level.size === 0) map.delete(key)
    this.version++
    return true
  }

  /** The rule for a limiter, pacer key, budget or fetch key of `kind` named `name`, at `now`. */
  forName(kind, name, now) {
    return this._scopes.kinds.get(kind)?.match(name, now)
  }

  /**
   * The rule for client `key` of door `door` at `now`: a live ban first (as a deny), then the
   * door's rules (the key's own, its longest prefix, the whole door).
   */
  forDoorKey(door, key, now) {
    const until = this._bans.get(door)?.get(key)
    if (until !== undefined && until > now)
      return { id: '', target: { door, key }, rule: { access: 'deny', ban: true }, expiresAt: until }
    return this._scopes.doors.get(door)?.match(key, now)
  }

  /** The rule for tenant `tenant` of budget `budget` at `now`. */
  forTenant(budget, tenant, now) {
    const e = this._scopes.tenants.get(budget)?.exact.get(tenant)
    return live(e, now) ? e : undefined
  }

  /** The live operator rules at `now`, as `Rule`s (target first), in the order they were set. */
  list(now) {
    const out = []
    for (const e of this._byId.values()) {
      if (!live(e, now)) continue
      out.push(
        e.expiresAt === undefined
          ? { target: e.target, ...e.rule }
          : { target: e.target, ...e.rule, expiresAt: e.expiresAt },
      )
    }
    return out
  }

  /** Drops the rules and bans that ended by `now`; how many rules went. */
  sweep(now) {
    let gone = 0
    for (const e of [...this._byId.values()]) {
      if (!live(e, now) && this.remove(e.target)) gone++
    }
    for (const [door, keys] of this._bans) {
      for (const [key, until] of keys) {
        if (until <= now) {
          keys.delete(key)
          this._banCount--
        }
      }
      if (keys.size === 0) this._bans.delete(door)
    }
    return gone
  }

  /**
   * Bans client `key` of door `door` until `until` (epoch ms; a longer ban in place is kept);
   * past the bound the oldest ban goes.
   */
  ban(door, key, until) {
    let keys = this._bans.get(door)
    if (keys === undefined) this._bans.set(door, (keys = new Map()))
    const held = keys.get(key)
    if (held !== undefined) {
      keys.delete(key)
      until = Math.max(until, held)
    } else this._banCount++
    keys.set(key, until)
    while (this._banCount > this._maxBans) this._evictOldestBan()
    this.version++
  }

  /** Lifts the ban of client `key` of door `door`; whether there was one. */
  unban(door, key) {
    const keys = this._bans.get(door)
    if (keys === undefined || !keys.delete(key)) return false
    if (keys.size === 0) this._bans.delete(door)
    this._banCount--
    this.version++
    return true
  }

  _evictOldestBan() {
    let oldest = null
    for (const [door, keys] of this._bans) {
      const first = keys.entries().next().value
      if (first !== undefined && (oldest === null || first[1] < oldest[2])) oldest = [door, first[0], first[1]]
    }
    if (oldest === null) return
    const keys = this._bans.get(oldest[0])
    keys.delete(oldest[1])
    if (keys.size === 0) this._bans.delete(oldest[0])
    this._banCount--
  }

  /** The live bans at `now`, as deny rules with their end. */
  bans(now) {
    const out = []
    for (const [door, keys] of this._bans) {
      for (const [key, until] of keys)
        if (until > now) out.push({ target: { door, key }, access: 'deny', expiresAt: until })
    }
    return out
  }
}

module.exports = { RuleTable, MAX_BANS }
