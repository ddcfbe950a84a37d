'use strict'
// The callers of one process waiting for their slots of a key (sluice/fetch's gates): each
// sleeps until its slot, on the store's clock, in a list sorted by slot. When one gives up,
// the latest one waiting moves up to its slot (the capacity goes to a caller still waiting,
// and the spacing of the fleet's slots holds), and the latest slot is what is left free.

const { nowMs, aborted } = require('../../classes/base')
const { longTimeout } = require('../../base/timers')

/**
 * Sleeps until `slot.atMs` on `store`'s clock, among `waiters` (sorted by `atMs`) meanwhile;
 * `moveUp()` may move the slot earlier (`slot.rearm()`). Rejects with ERR_ABORTED when
 * `signal` aborts.
 */
function sleepUntil(store, slot, signal, waiters) {
  return new Promise((resolve, reject) => {
    if (signal && signal.aborted) return reject(aborted(signal))
    let cancel = () => {}
    const finish = () => {
      cancel()
      const i = waiters.indexOf(slot)
      if (i >= 0) waiters.splice(i, 1)
      if (signal) signal.removeEventListener('abort', onAbort)
    }
    const done = () => {
      finish()
      resolve()
    }
    const onAbort = () => {
      finish()
      reject(aborted(signal))
    }
    slot.rearm = () => {
      cancel()
      cancel = longTimeout(done, Math.ceil(slot.atMs - nowMs(store)), { clock: store.clock })
    }
    if (signal) signal.addEventListener('abort', onAbort, { once: true })
    insert(waiters, slot)
    slot.rearm()
  })
}

/** Puts `slot` into `waiters`, sorted by `atMs` (after those of the same time). */
function insert(waiters, slot) {
  let i = waiters.length
  while (i > 0 && waiters[i - 1].atMs > slot.atMs) i--
  waiters.splice(i, 0, slot)
}

/**
 * Moves the latest of `waiters` (sorted by `atMs`) up to `atMs`, a slot its caller gave up,
 * when it waits for a later one: answers the slot left free (the latest one's, or `atMs`).
 */
function moveUp(waiters, atMs) {
  const last = waiters[waiters.length - 1]
  if (last === undefined || last.atMs <= atMs) return atMs
  waiters.pop()
  const freed = last.atMs
  last.atMs = atMs
  insert(waiters, last)
  last.rearm()
  return freed
}

module.exports = { sleepUntil, moveUp }
