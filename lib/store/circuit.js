// @ts-check
'use strict'
// A RedisStore's circuit breaker: the first call that finds Redis unreachable opens it
// (status 'down', 'down' emitted, the store-down policy answers), a probe every
// `probeIntervalMs` closes it when Redis answers again ('up').

const { fromNative } = require('../base/errors')
const slots = require('./slots')
const { encodeParts } = require('../base/codec')
const { STORE_FAILURES } = require('./errors')
const LIMIT = require('../kinds/limit')
const { taggedKey } = require('./keys')

/** The probe: a peek at a bucket no limiter uses (a read: it writes nothing). */
const PROBE_ARGS = new Float64Array([LIMIT.ALGORITHM.bucket, 1, 1, 1_000_000, LIMIT.OP.peek])

class Circuit {
  /** `store`: the RedisStore; `policy`: its WhenDown (begun and ended here). */
  constructor(store, probeIntervalMs, policy) {
    this._store = store
    this._probeIntervalMs = probeIntervalMs
    this.policy = policy
    /** 'up', or 'down' from the first call that found Redis unreachable until a probe finds it back */
    /** @type {'up' | 'down'} */
    this.status = 'up'
    this.probeTimer = null
    this._probing = false
    this.probeKey = null
  }

  /**
   * Whether a failure opens the circuit: a store failure, but not one of a cluster changing
   * its topology under a call (a command redirected too often during a failover, a slot
   * being migrated) nor, under whenDown 'error', one node's failure: that call fails with
   * ERR_STORE_UNAVAILABLE, the others go on.
   */
  opens(error) {
    return (
      STORE_FAILURES.has(error.code) &&
      !this._store._closed &&
      error.detail !== 'topology-change' &&
      !this._nodeFailure(error)
    )
  }

  /**
   * Whether `error` is one cluster node's failure that leaves the circuit closed: under
   * whenDown 'error', that node's calls fail (at once, not after commandTimeoutMs) and the
   * other masters' calls are decided as usual. Under the other policies the circuit opens as
   * for any outage, so that every call is answered by the policy.
   */
  _nodeFailure(error) {
    return this._store.isCluster && this.policy.mode === 'error' && error.detail === 'node-down'
  }

  /**
   * Opens the circuit: Redis was found down by `error`, on a call for `key`. The probes read a
   * key of the same hash slot, so on a cluster they ask the node that failed.
   */
  trip(error, key) {
    if (this.status === 'down') return
    const store = this._store
    this.status = 'down'
    const open = typeof key === 'string' ? key.indexOf('{') : -1
    const close = open >= 0 ? key.indexOf('}', open) : -1
    const tag = close > open + 1 ? key.slice(open + 1, close) : 'health'
    this.probeKey = taggedKey(store, 'probe', tag)
    this.policy.begin(error)
    if (store._denyCache !== null) store._denyCache.clear()
    this.probeTimer = setInterval(() => this._probe(), this._probeIntervalMs)
    this.probeTimer.unref()
    // emitted from a later turn: a listener added just after `await connect()` still hears it
    setImmediate(() => store.emit('down', error))
  }

  /** One probe (at most one under way): an answer from Redis closes the circuit. */
  _probe() {
    // behind Sentinel, no probe reaches the old master while a replica is promoted
    if (this._probing || this._store._closed || this.status === 'up' || this._store._failingOver) return
    this._probing = true
    const key = encodeParts([this.probeKey])
    slots.call(this._store._native, LIMIT.code, key, PROBE_ARGS, -1, LIMIT.lane).then(
      () => {
        this._probing = false
        this._recover()
      },
      (err) => {
        this._probing = false
        // any answer from Redis (a script error included) means it is reachable again
        if (!STORE_FAILURES.has(fromNative(err).code)) this._recover()
      },
    )
  }

  _recover() {
    const store = this._store
    if (this.status === 'up' || store._closed) return
    clearInterval(this.probeTimer)
    this.probeTimer = null
    this.status = 'up'
    this.policy.end()
    store._waiters.dropLocal()
    setImmediate(() => store.emit('up'))
  }

  /** The store closes: no more probes, the outage's local counts are dropped. */
  close() {
    if (this.probeTimer !== null) clearInterval(this.probeTimer)
    this.probeTimer = null
    this.policy.end()
  }
}

module.exports = { Circuit }
