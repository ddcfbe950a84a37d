// @ts-check
'use strict'
// How a RedisStore's calls travel: one queue per kind, batched (see batcher.js), each batch on
// the direct connection when it is up, else on the queue's own pool connection (its lane);
// a failure opens the circuit, and batches already written are waited for at close().

const native = require('../native')
const { SluiceError, fromNative } = require('../base/errors')
const { Batcher } = require('./batcher')
const { closedError } = require('./errors')
const slots = require('./slots')

/**
 * How each kind's calls are batched (see batcher.js). `maxBatch`: calls per native call and
 * per script call, big enough to amortise the crossing and the round trip, small enough that
 * one script call never runs for long. `maxInFlight`: batches under way per kind before new
 * calls wait to leave together (group commit).
 */
const BATCHING = { maxBatch: 64, maxInFlight: Number(process.env.SLUICE_MAX_IN_FLIGHT) || 2 }

class Lanes {
  /** `direct`: the direct connection (a DirectConnection), or null (a cluster, or turned off). */
  constructor(store, direct, connectTimeoutMs) {
    this._store = store
    this.direct = direct
    this._connectTimeoutMs = connectTimeoutMs
    this.queues = []
    /** batches written and not yet answered; close() waits for them (`drain`) */
    this._inFlight = 0
    this._drained = null
    this._settled = () => {
      if (--this._inFlight === 0 && this._drained !== null) this._drained()
    }
  }

  /**
   * A new queue on pool lane `lane`: its batches are sent by `send(calls, resolve, reject, q)`
   * (which calls `batch`). Its batches reach Redis in call order, on either connection.
   */
  queue(lane, send) {
    const q = { lane, direct: false, batcher: null, directBatches: 0 }
    q.batcher = new Batcher((calls, resolve, reject) => send(calls, resolve, reject, q), BATCHING)
    this.queues.push(q)
    return q
  }

  /** `calls` store calls went out in `batches` native calls, `direct` of them on the direct connection. */
  get batching() {
    let calls = 0
    let batches = 0
    let direct = 0
    for (const q of this.queues) {
      calls += q.batcher.calls
      batches += q.batcher.batches
      direct += q.directBatches
    }
    return { calls, batches, direct }
  }

  /**
   * Sends one batch of `kind`'s `calls` on queue `q`: on the direct connection or on the pool
   * (its result comes back under a slot, see slots.js); `kind.settle` settles the calls. A
   * store failure opens the circuit; then, and while it is open, `degrade()` answers every
   * call by the store-down policy ('error': they reject with the store's error). Any other
   * failure rejects them all. Returns true when the batch is under way (the batcher hears
   * `done()` when it is settled).
   */
  batch(q, kind, calls, resolve, reject, degrade) {
    const store = this._store
    const circuit = store._circuit
    const fail = (err) => {
      const error = store._failure(err)
      if (circuit.opens(error)) {
        // the probes go to the node of a key of the batch
        circuit.trip(error, kind.keyOf(calls[0]))
        if (circuit.policy.mode !== 'error') return degrade()
      }
      for (const r of reject) r(error)
    }
    // some calls failed (their slots' master down), the others were decided: each part
    // settles as a batch of its own; the failed part as `fail` would, by itself
    const partial = (out) => {
      const ok = [[], [], []]
      const lost = [[], [], []]
      for (let i = 0, f = 0; i < calls.length; i++) {
        const to = f < out.failed.length && out.failed[f] === i ? (f++, lost) : ok
        to[0].push(calls[i])
        to[1].push(resolve[i])
        to[2].push(reject[i])
      }
      try {
        kind.settle(store, out.text == null ? out.values : { values: out.values, text: out.text }, ...ok)
      } catch (err) {
        for (const r of ok[2]) r(fromNative(err))
      }
      const error = store._failure(out.error)
      if (circuit.opens(error)) {
        circuit.trip(error, kind.keyOf(lost[0][0]))
        if (circuit.policy.mode !== 'error') return circuit.policy.answer(kind, ...lost)
      }
      for (const r of lost[2]) r(error)
    }
    if (store._closed) {
      fail(closedError())
      return false
    }
    if (store._failingOver && circuit.status === 'up') {
      // behind Sentinel, a replica is being promoted: what the old master would count may be
      // lost, so nothing is sent until the store is on the new master
      fail(
        new SluiceError(
          'ERR_STORE_UNAVAILABLE',
          'the master is failing over (Sentinel): nothing is sent until the switch',
        ),
      )
      return false
    }
    if (circuit.status === 'down') {
      if (circuit.policy.mode !== 'error') degrade()
      else for (const r of reject) r(circuit.policy.error)
      return false
    }
    const done = (out) => {
      this._settled()
      if (out.failed !== undefined) partial(out)
      else {
        try {
          kind.settle(store, out, calls, resolve, reject)
        } catch (err) {
          for (const r of reject) r(fromNative(err))
        }
      }
      q.batcher.done()
    }
    const failed = (err) => {
      this._settled()
      fail(err)
      q.batcher.done()
    }
    try {
      const b = kind.encode(calls, store._nowUs())
      const n = store._native
      const d = this._via(q)
      if (d === null) {
        const slot = slots.take(done, failed)
        try {
          native.redisCall(n, kind.code, b.keys, b.nums, b.nowUs, q.lane, slot)
        } catch (err) {
          slots.release(slot)
          throw err
        }
      } else {
        d.run(native.redisDirect(n, kind.code, b.keys, b.nums, b.nowUs), done, failed)
      }
    } catch (err) {
      fail(err)
      return false
    }
    // written: close() waits for its reply (it may have been applied), see `drain`
    this._inFlight++
    return true
  }

  /**
   * The direct connection for queue `q`'s next batch, or null for the pool. A queue moves to
   * the direct connection only when none of its batches is under way on the pool, so its
   * batches keep their order.
   */
  _via(q) {
    const d = this.direct
    if (d === null) return null
    if (!d.ready) {
      d.redial(this._connectTimeoutMs)
      q.direct = false
      return null
    }
    if (!q.direct && q.batcher._inFlight > 1) return null
    q.direct = true
    q.directBatches++
    return d
  }

  /**
   * Waits for the batches already written (each has its own deadline, so this is bounded;
   * `backstopMs` bounds it anyway), then closes the direct connection.
   */
  async drain(backstopMs) {
    if (this._inFlight > 0) {
      await new Promise((resolve) => {
        const backstop = setTimeout(resolve, backstopMs)
        this._drained = () => {
          clearTimeout(backstop)
          resolve()
        }
      })
    }
    this._drained = null
  }

  close() {
    if (this.direct !== null) this.direct.close()
  }
}

module.exports = { Lanes }
