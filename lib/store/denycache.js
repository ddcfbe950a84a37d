// @ts-check
'use strict'
// The local deny cache of a RedisStore (`localDenyCache`): refusals Redis gave, answered again
// in this process until they run out, without a round trip.

/**
 * Hot-key relief (`RedisStore.connect({ localDenyCache: true })`): a key that Redis refused
 * with a retry hint is answered "refused" in this process until then, with no round trip.
 *
 * Why it never admits more than Redis would: it only ever refuses. And it refuses only what
 * Redis would refuse too, as long as nothing but time changes the key: every kind it serves
 * (bucket, window, leaky, points, the pacer's rateLimit, sliding windows) refuses a weight
 * `w` until a point in time that only moves later as `w` grows, so a call of the same
 * options with a weight of at least the refused one, made before that point, is refused by
 * Redis as well. What it may under-admit: a `reset()` (or a refund) made by another process
 * is not seen here until the cached refusal runs out; a `reset()` through this store drops
 * the entry at once.
 */
class DenyCache {
  constructor(maxKeys) {
    this._map = new Map() // store key -> entry
    this._maxKeys = maxKeys
    /** calls answered here */
    this.hits = 0
  }

  get size() {
    return this._map.size
  }

  /**
   * The refusal cached for `key`, if it still holds at `nowUs` for a call with these
   * options (`sig`) and this weight; null otherwise.
   */
  get(key, sig, weight, nowUs) {
    const entry = this._map.get(key)
    if (entry === undefined) return null
    if (nowUs >= entry.untilUs) {
      this._map.delete(key)
      return null
    }
    if (entry.sig !== sig || weight < entry.weight) return null
    this.hits++
    return entry
  }

  /**
   * Records that `key` refused `weight` at `atUs` (taken before the call was sent, so the
   * entry ends no later than Redis' own hint) for `retryUs`; `values` is what the local
   * answers are made from (kind-specific).
   */
  set(key, sig, weight, atUs, retryUs, values) {
    if (!(retryUs > 0)) return
    const untilUs = atUs + retryUs
    const old = this._map.get(key)
    if (old !== undefined && old.sig === sig && old.untilUs >= untilUs && old.weight <= weight) return
    if (old === undefined && this._map.size >= this._maxKeys) this._evict(atUs)
    this._map.set(key, { sig, weight, atUs, untilUs, values })
  }

  delete(key) {
    this._map.delete(key)
  }

  clear() {
    this._map.clear()
  }

  /** Drops the expired entries; when none was, the oldest one. */
  _evict(nowUs) {
    for (const [key, entry] of this._map) if (nowUs >= entry.untilUs) this._map.delete(key)
    if (this._map.size >= this._maxKeys) this._map.delete(this._map.keys().next().value)
  }
}

module.exports = { DenyCache }
