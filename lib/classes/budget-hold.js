'use strict'
// Holding a tenant's callers in the process. A tenant view commits a
// reservation to the store only when its start is within the tenant's *horizon*: `borrowAheadMs`,
// or one reservation at the tenant's share when that is longer. A deep queue then stays in the
// process, where it can still borrow when the other tenants go idle, instead of in the tenant's
// lane at its share's pace: past the borrow horizon a reservation can only take the lane, and
// every later one queues behind it (FIFO within a tenant), so a queue committed past it would
// never borrow again.
//
// Each process learns when the tenant's next reservation would start from the store's answers:
// an admitted one's start plus its cost at the tenant's share (an overestimate while it
// borrows), or, when the store refused one for starting past the horizon (nothing charged), the
// start it would have had. It sends the next held caller when that is within the caller's
// horizon; up to 4 in flight at once. Other processes' reservations are not known here: a
// caller sent on what this process knew may be refused past the horizon, and waits here again,
// first in line, for the start the store told (one more store call, for a caller whose turn is
// more than a horizon away). Used by lib/classes/budget.js.

const { sleep, nowMs, aborted } = require('./base')

/** Reservations of one tenant in flight to the store at once, at most (their starts are not known yet). */
const IN_FLIGHT = 4
/** How fast a learned clock offset is forgotten between answers, µs per ms (so a stepped store clock is followed). */
const FORGET_US_PER_MS = 1

/** One tenant's callers in this process: kept while it has any. */
class Held {
  constructor() {
    /** Callers waiting to be sent, in arrival order: `{ go, need, seq }`. */
    this.queue = []
    /** When the tenant's next reservation would start, as last learned, µs (store time). */
    this.nextUs = 0
    /** What the callers in flight add to the tenant's queue, at its share, µs. */
    this.flightUs = 0
    /** The latest start the store answered for this tenant, µs (store time). */
    this.tailUs = 0
    /** Whether the store answered for this tenant since the hold was made. */
    this.known = false
    /**
     * The store's time minus this process's clock, µs: the largest of the answers' samples (each
     * is at most the true offset: an answer is read after the store decided, and an event loop
     * that was late makes it smaller), less what was forgotten since the one before.
     */
    this.skewUs = -Infinity
    this.skewAtMs = 0
    this.inflight = 0
    /** Callers answered and waiting for their turn (or refused past the horizon and coming back). */
    this.waiting = 0
    /** When the timers armed to send the next caller are due, ms (this process's clock). */
    this.dues = []
  }
}

/** The holds of one budget object, by tenant id. */
class Holds {
  constructor(store) {
    this._store = store
    /** @type {Map<string, Held>} */
    this._byTenant = new Map()
    this._seq = 0
  }

  /** The number of tenants with held callers or a committed queue ahead (for tests). */
  get size() {
    return this._byTenant.size
  }

  /**
   * Waits until a caller of tenant `id` may be sent: `need` is `{ horizonUs, costUs, lowUs }`,
   * its horizon and what it adds to the tenant's queue at its share and (the least) at its
   * maxShare; `seq` its place in line when it comes back after a refusal past the horizon (else
   * undefined). It is sent when the tenant's next start, with what is in flight, is within half
   * its horizon. Resolves with `{ heldMs, seq, known }`. Rejects with ERR_ABORTED when `signal` aborts
   * first (nothing was charged), or with `refuse(waitMs)`'s error when even its earliest start
   * (the tenant's latest start plus what the callers held ahead of it add at least) is past
   * `maxWaitMs`. `known`: whether the store answered for this tenant since its hold was made.
   */
  turn(id, need, maxWaitMs, signal, refuse, seq) {
    let h = this._byTenant.get(id)
    if (h === undefined) {
      h = new Held()
      this._byTenant.set(id, h)
    }
    const first = seq === undefined
    if (first) seq = this._seq++
    // one refused past its horizon was counted as waiting since (so the hold kept what it learned)
    else h.waiting--
    if (first) {
      let low = h.tailUs
      for (const c of h.queue) low += c.need.lowUs
      const early = Math.ceil((Math.max(low, h.nextUs - need.horizonUs) - this._nowUs(h)) / 1000)
      if (early > maxWaitMs) {
        this._drop(id, h)
        return Promise.reject(refuse(early))
      }
    }
    if (h.queue.length === 0 && h.inflight < IN_FLIGHT && this._waitUs(h, need) <= 0) {
      this._send(h, need)
      return Promise.resolve({ heldMs: 0, seq, known: h.known })
    }
    const start = nowMs(this._store)
    return new Promise((resolve, reject) => {
      const caller = {
        need,
        seq,
        go: () => {
          if (signal) signal.removeEventListener('abort', onAbort)
          resolve({ heldMs: nowMs(this._store) - start, seq, known: h.known })
        },
      }
      const onAbort = () => {
        const at = h.queue.indexOf(caller)
        if (at < 0) return
        h.queue.splice(at, 1)
        this._drop(id, h)
        reject(aborted(signal))
      }
      if (signal) signal.addEventListener('abort', onAbort, { once: true })
      // in line by arrival: one refused past the horizon goes back before those who came after it
      let at = h.queue.length
      while (at > 0 && h.queue[at - 1].seq > seq) at--
      h.queue.splice(at, 0, caller)
      this._pump(id, h)
    })
  }

  /**
   * A caller of tenant `id` (`need` as sent) was answered: admitted (`startUs`; the tenant's
   * next reservation then starts about its cost at the share later) or refused past its
   * horizon (`startUs` is the start it would have had: the tenant's next; it comes back
   * through `turn`); `storeNowUs` the store's time.
   */
  answered(id, need, admitted, startUs, storeNowUs) {
    const h = this._byTenant.get(id)
    if (h === undefined) return
    this._landed(h, need)
    this._learn(h, storeNowUs)
    h.known = true
    if (admitted) {
      h.tailUs = Math.max(h.tailUs, startUs)
      h.nextUs = Math.max(h.nextUs, startUs + need.lowUs)
    } else {
      h.nextUs = startUs
    }
    h.waiting++
    this._pump(id, h)
  }

  /** A caller of tenant `id` (`need` as sent) failed or was refused: it no longer counts as in flight. */
  failed(id, need) {
    const h = this._byTenant.get(id)
    if (h === undefined) return
    this._landed(h, need)
    this._pump(id, h)
  }

  /** A caller's turn came (or its wait was aborted): the hold leaves with its last caller. */
  done(id) {
    const h = this._byTenant.get(id)
    if (h === undefined) return
    h.waiting--
    this._drop(id, h)
  }

  _send(h, need) {
    h.inflight++
    h.flightUs += need.lowUs
  }

  _landed(h, need) {
    h.inflight--
    h.flightUs = h.inflight === 0 ? 0 : h.flightUs - need.lowUs
  }

  /** How long until a caller of `need` may be sent, µs (> 0: not yet). */
  _waitUs(h, need) {
    const nowUs = this._nowUs(h)
    return Math.max(h.nextUs, nowUs) + h.flightUs - need.horizonUs / 2 - nowUs
  }

  _learn(h, storeNowUs) {
    const ms = nowMs(this._store)
    const sample = storeNowUs - ms * 1000
    const kept = h.skewUs - (ms - h.skewAtMs) * FORGET_US_PER_MS
    h.skewUs = Math.max(sample, kept)
    h.skewAtMs = ms
  }

  _nowUs(h) {
    return nowMs(this._store) * 1000 + (h.skewUs === -Infinity ? 0 : h.skewUs)
  }

  /** A hold is kept while it has callers (held, in flight or waiting for their turn): its memory is theirs. */
  _drop(id, h) {
    if (h.queue.length === 0 && h.inflight === 0 && h.waiting <= 0 && h.dues.length === 0) {
      this._byTenant.delete(id)
    }
  }

  /** Sends the held callers whose turn to be sent came; arms a timer for the next. */
  _pump(id, h) {
    while (h.queue.length > 0 && h.inflight < IN_FLIGHT) {
      const waitUs = this._waitUs(h, h.queue[0].need)
      if (waitUs > 0) {
        // a timer already armed for this time or sooner will do
        const ms = Math.ceil(waitUs / 1000)
        const dueMs = nowMs(this._store) + ms
        if (!h.dues.some((at) => at <= dueMs)) {
          h.dues.push(dueMs)
          sleep(this._store, ms).then(() => {
            h.dues.splice(h.dues.indexOf(dueMs), 1)
            this._pump(id, h)
          })
        }
        return
      }
      const c = h.queue.shift()
      this._send(h, c.need)
      c.go()
    }
    this._drop(id, h)
  }
}

module.exports = { Holds, IN_FLIGHT }
