// @ts-check
'use strict'
// Slots given back in this process: a paced slot that its caller gave up (an abort, a
// timeout, a deadline, outcome.cancel()) and that the store could not take back exactly (it
// was not the last one queued: moving the queue's tail back would let the next caller start
// together with the last one queued). Its capacity stays charged in the store, so handing it
// to this process's next caller of the same key, at the slot's own time, is exact: the
// upstream sees the call the first caller would have made. Every store holds one `Spares`;
// sluice/fetch's gates and DistributedPacer take from it before they ask the store.

/** Spare slots kept per key, the earliest first; a slot given back past this stays spent. */
const MAX_PER_KEY = 1024
/** Keys with spare slots; a new key past this keeps none. */
const MAX_KEYS = 4096
/** Bytes of key names held (UTF-16), at most. */
const MAX_KEY_BYTES = 1 << 20
/** Spare slots held in all, at most (about 64 bytes each). */
const MAX_SLOTS = 65_536

class Spares {
  constructor() {
    this._keys = new Map() // key -> [{ atMs, weight }], by time
    this._bytes = 0
    this.size = 0 // slots held
  }

  /**
   * Keeps a slot of `weight` that starts at `atMs` (the store's clock, ms) on `key`; false when
   * the bounds leave no room (the slot stays spent: admits less, never more).
   */
  put(key, atMs, weight) {
    if (this.size >= MAX_SLOTS) return false
    let list = this._keys.get(key)
    if (list === undefined) {
      if (this._keys.size >= MAX_KEYS || this._bytes + 2 * key.length > MAX_KEY_BYTES) return false
      list = []
      this._keys.set(key, list)
      this._bytes += 2 * key.length
    }
    if (list.length >= MAX_PER_KEY || this.size >= MAX_SLOTS) return false
    let i = list.length
    while (i > 0 && list[i - 1].atMs > atMs) i--
    list.splice(i, 0, { atMs, weight })
    this.size++
    return true
  }

  /**
   * Takes `weight` from the earliest spare slot of `key` that starts at or after `nowMs` and
   * no later than `nowMs + maxWaitMs` (a slot whose time has passed is spent: it is dropped);
   * answers its start, or -1 when there is none.
   */
  take(key, weight, nowMs, maxWaitMs = Infinity) {
    const list = this._keys.get(key)
    if (list === undefined) return -1
    let dropped = 0
    while (dropped < list.length && list[dropped].atMs < nowMs) dropped++
    if (dropped > 0) {
      list.splice(0, dropped)
      this.size -= dropped
    }
    let at = -1
    for (let i = 0; i < list.length && list[i].atMs - nowMs <= maxWaitMs; i++) {
      const s = list[i]
      if (s.weight < weight) continue
      at = s.atMs
      s.weight -= weight
      if (s.weight <= 0) {
        list.splice(i, 1)
        this.size--
      }
      break
    }
    if (list.length === 0) {
      this._keys.delete(key)
      this._bytes -= 2 * key.length
    }
    return at
  }
}

module.exports = { Spares, MAX_PER_KEY, MAX_KEYS, MAX_KEY_BYTES, MAX_SLOTS }
