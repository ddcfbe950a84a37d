'use strict'
// Holding a tenant's callers in the process: a tenant view sends its next
// reservation to the store only when the tenant's committed queue (the latest start this
// process has seen for it) is at most half its borrow horizon (`borrowAheadMs`) ahead: the
// next one then starts within the horizon, where it may still borrow (a queue committed up to
// the horizon itself would leave every next reservation just past it, in the lane). So no
// reservation is committed much further ahead than the horizon, however many callers wait: a
// deep queue stays in the process, where it can still borrow when the other tenants go idle,
// instead of in the tenant's lane at its share's pace. Used by lib/classes/budget.js.

const { sleep, nowMs, aborted } = require('./base')

/** Reservations of one tenant in flight to the store at once, at most (their starts are not known yet). */
const IN_FLIGHT = 4

/** One tenant's callers in this process: kept while it has any. */
class Held {
  constructor() {
    /** Callers waiting to be sent, FIFO: `{ go, aheadUs }`. */
    this.queue = []
    /** The latest start the store answered for this tenant, µs (store time). */
    this.tailUs = 0
    /** The store's time minus this process's clock, µs (from the latest answer). */
    this.skewUs = 0
    this.inflight = 0
    /** Callers answered and waiting for their turn (their starts make up the committed queue). */
    this.waiting = 0
    this.timer = false
  }
}

/** The holds of one budget object, by tenant id. */
class Holds {
  constructor(store) {
    this._store = store
    /** @type {Map<string, Held>} */
    this._byTenant = new Map()
  }

  /** The number of tenants with held callers or a committed queue ahead (for tests). */
  get size() {
    return this._byTenant.size
  }

  /**
   * Waits until a caller of tenant `id` (horizon `aheadUs`) may be sent; resolves with the
   * time it waited here, ms. Rejects with ERR_ABORTED when `signal` aborts first (nothing
   * was charged), or with `refuse(waitMs)`'s error when even the earliest it could be sent is
   * past `maxWaitMs`.
   */
  turn(id, aheadUs, maxWaitMs, signal, refuse) {
    let h = this._byTenant.get(id)
    if (h === undefined) {
      h = new Held()
      this._byTenant.set(id, h)
    }
    // the earliest this caller could go: when the known queue is within half its horizon
    const early = Math.ceil((h.tailUs - aheadUs / 2 - this._nowUs(h)) / 1000)
    if (early > maxWaitMs) {
      this._drop(id, h)
      return Promise.reject(refuse(early))
    }
    if (h.queue.length === 0 && h.inflight < IN_FLIGHT && early <= 0) {
      h.inflight++
      return Promise.resolve(0)
    }
    const start = nowMs(this._store)
    return new Promise((resolve, reject) => {
      const caller = {
        aheadUs,
        go: () => {
          if (signal) signal.removeEventListener('abort', onAbort)
          resolve(nowMs(this._store) - start)
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
      h.queue.push(caller)
      this._pump(id, h)
    })
  }

  /** A caller of tenant `id` was answered: the start the store gave it (µs), its time (µs). */
  answered(id, startUs, storeNowUs) {
    const h = this._byTenant.get(id)
    if (h === undefined) return
    h.inflight--
    h.skewUs = storeNowUs - nowMs(this._store) * 1000
    if (startUs > h.tailUs) h.tailUs = startUs
    if (startUs > -Infinity) h.waiting++
    this._pump(id, h)
  }

  /** A caller of tenant `id` was not answered (an error): it no longer counts as in flight. */
  failed(id) {
    const h = this._byTenant.get(id)
    if (h === undefined) return
    h.inflight--
    this._pump(id, h)
  }

  /** A caller's turn came (or its wait was aborted): the hold leaves with its last caller. */
  done(id) {
    const h = this._byTenant.get(id)
    if (h === undefined) return
    h.waiting--
    this._drop(id, h)
  }

  _nowUs(h) {
    return nowMs(this._store) * 1000 + h.skewUs
  }

  /** A hold is kept while it has callers (held, in flight or waiting for their turn): its memory is theirs. */
  _drop(id, h) {
    if (h.queue.length === 0 && h.inflight === 0 && h.waiting <= 0 && !h.timer) {
      this._byTenant.delete(id)
    }
  }

  /** Sends the held callers whose turn to be sent came; arms a timer for the next. */
  _pump(id, h) {
    while (h.queue.length > 0 && h.inflight < IN_FLIGHT) {
      const waitUs = h.tailUs - h.queue[0].aheadUs / 2 - this._nowUs(h)
      if (waitUs > 0) {
        if (!h.timer) {
          h.timer = true
          sleep(this._store, Math.ceil(waitUs / 1000)).then(() => {
            h.timer = false
            this._pump(id, h)
          })
        }
        return
      }
      h.inflight++
      h.queue.shift().go()
    }
    this._drop(id, h)
  }
}

module.exports = { Holds, IN_FLIGHT }
