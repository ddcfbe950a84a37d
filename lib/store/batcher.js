// @ts-check
'use strict'
// Flush policy: a call leaves at the end of the tick it was made in (process.nextTick) when
// fewer than `maxInFlight` batches of its queue are under way; otherwise it waits for one of
// them to finish and leaves with every call queued meanwhile (group commit). Calls coalesce
// only while a round trip is already under way: no timer ever holds a call back.

/**
 * One queue of store calls of one kind. `send(calls, resolve, reject)` sends a batch of at most
 * `maxBatch` calls (the arrays are the batcher's: the callee may keep them) and returns true
 * when the batch is under way (the callee calls `done()` once every call of it is settled),
 * false when it is settled already; a throw rejects them all.
 * Batches leave in call order; the store sends them on one connection, so they reach Redis in
 * that order too.
 */
class Batcher {
  constructor(send, { maxInFlight, maxBatch }) {
    this._send = send
    this._maxInFlight = maxInFlight
    this._maxBatch = maxBatch
    this._calls = []
    this._resolve = []
    this._reject = []
    this._inFlight = 0
    this._scheduled = false
    this._flushBound = () => this._flush()
    /** Batches sent and calls they carried, since the store was made (for benchmarks and tests). */
    this.batches = 0
    this.calls = 0
  }

  /** Queues one call (an array of its fields); resolves with what the batch gives it. */
  add(call) {
    return new Promise((resolve, reject) => {
      this._calls.push(call)
      this._resolve.push(resolve)
      this._reject.push(reject)
      if (!this._scheduled && this._inFlight < this._maxInFlight) {
        this._scheduled = true
        process.nextTick(this._flushBound)
      }
    })
  }

  _flush() {
    this._scheduled = false
    while (this._calls.length > 0 && this._inFlight < this._maxInFlight) {
      let calls = this._calls
      let resolve = this._resolve
      let reject = this._reject
      if (calls.length > this._maxBatch) {
        calls = calls.splice(0, this._maxBatch)
        resolve = resolve.splice(0, this._maxBatch)
        reject = reject.splice(0, this._maxBatch)
      } else {
        this._calls = []
        this._resolve = []
        this._reject = []
      }
      this._inFlight++
      this.batches++
      this.calls += calls.length
      let later = false
      try {
        later = this._send(calls, resolve, reject)
      } catch (err) {
        for (const r of reject) r(err)
      }
      if (!later) this.done()
    }
  }

  /** A batch finished: the calls queued meanwhile leave together, after this tick's own. */
  done() {
    this._inFlight--
    if (this._calls.length > 0 && !this._scheduled) {
      this._scheduled = true
      process.nextTick(this._flushBound)
    }
  }
}

module.exports = { Batcher }
