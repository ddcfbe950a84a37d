'use strict'
// The horizon of an adaptive key's asks in one process (sluice/fetch; issue 36 item 4): this
// process's callers ask the key's record for slots in order, and only while the latest slot
// the process holds, each ask under way or let through counting one slot at the rate, starts
// within HORIZON_MS of now; the others wait their turn here. The record's queue is then about
// HORIZON_MS (and a slot per process) deep instead of every caller's slot (64 callers at 10/s:
// 6 s of slots handed out at an old rate), so a cut or a climb of the rate reaches the sends
// within HORIZON_MS. Found in the JS model (bench/adaptive-model.js, `horizon`); a caller's
// wait here counts against its maxWaitMs and its abort signal, and a spare slot
// (lib/store/spares.js) is taken without a turn (lib/doors/fetch/gate.js's admit()).

const { nowMs, aborted } = require('../../classes/base')
const { longTimeout } = require('../../base/timers')

/** How far ahead of now this process's next slot of a key may start before its next caller asks, ms. */
const HORIZON_MS = 100

class Horizon {
  /** `gate`: the key's gate (its `rate`, as the record last said, and its door's store). */
  constructor(gate) {
    this.gate = gate
    this.queue = [] // callers waiting their turn, in order: { go, leave }
    this.asking = 0 // asks under way (paces of weight 1 sent, not answered)
    this.released = 0 // callers let through that have not asked yet
    this.latestMs = 0 // the latest slot start this process holds, on the store's clock
    this.timer = null // cancels the one timer for the next turn
  }

  /** How far ahead of now the next ask's slot would start with `extra` more asks before it, ms. */
  aheadMs(extra = 0) {
    const now = nowMs(this.gate.door.store)
    return Math.max(this.latestMs, now) + (this.asking + this.released + extra) * (1000 / this.gate.rate) - now
  }

  /**
   * Resolves when this caller may ask for a slot (then it calls asked()): at once while no one
   * waits and the process's slots reach less than HORIZON_MS ahead, else in order. Rejects with
   * ERR_ABORTED when `signal` aborts, and with `refuse(ms)` (nothing taken) when its slot would
   * start past `deadlineMs` (as estimated from the callers ahead of it, at once) or its turn has
   * not come by then; a caller that leaves gives its place to the next.
   */
  turn(signal, deadlineMs, refuse) {
    const store = this.gate.door.store
    if (this.queue.length === 0 && this.aheadMs() <= HORIZON_MS) {
      this.released++
      return Promise.resolve()
    }
    const leftMs = deadlineMs - nowMs(store)
    const expectMs = this.aheadMs(this.queue.length)
    if (expectMs > leftMs) return Promise.reject(refuse(Math.ceil(expectMs)))
    return new Promise((resolve, reject) => {
      if (signal && signal.aborted) return reject(aborted(signal))
      let stop = () => {}
      const finish = () => {
        stop()
        if (signal) signal.removeEventListener('abort', onAbort)
      }
      const entry = {
        go: () => {
          finish()
          resolve()
        },
        leave: (err) => {
          const i = this.queue.indexOf(entry)
          if (i >= 0) this.queue.splice(i, 1)
          finish()
          reject(err)
        },
      }
      const onAbort = () => entry.leave(aborted(signal))
      if (signal) signal.addEventListener('abort', onAbort, { once: true })
      if (leftMs < Infinity) {
        stop = longTimeout(() => entry.leave(refuse(Math.max(0, Math.ceil(this.aheadMs())))), Math.ceil(leftMs), {
          clock: store.clock,
        })
      }
      this.queue.push(entry)
      this.pump()
    })
  }

  /** A caller let through asks now (a pace of weight 1 sent). */
  asked() {
    if (this.released > 0) this.released--
    this.asking++
  }

  /** An ask was answered: its slot's start (ms, the store's clock), or null (refused, failed). */
  answered(atMs) {
    this.asking--
    if (atMs !== null) this.hold(atMs)
    this.pump()
  }

  /** This process holds a slot at `atMs` (asked, or a spare one). */
  hold(atMs) {
    if (atMs > this.latestMs) this.latestMs = atMs
  }

  /** Lets the next callers ask while the process's slots reach less than HORIZON_MS ahead. */
  pump() {
    while (this.queue.length > 0) {
      const ahead = this.aheadMs()
      if (ahead > HORIZON_MS) {
        if (this.timer === null) {
          const store = this.gate.door.store
          this.timer = longTimeout(
            () => {
              this.timer = null
              this.pump()
            },
            Math.max(1, Math.ceil(ahead - HORIZON_MS)),
            { clock: store.clock },
          )
        }
        return
      }
      this.released++
      this.queue.shift().go()
    }
  }
}

module.exports = { Horizon, HORIZON_MS }
