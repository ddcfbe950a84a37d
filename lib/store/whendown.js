// @ts-check
'use strict'
// What a RedisStore answers while its circuit is open (Redis found down), by its `whenDown`
// policy: 'error' (reject), 'allow' (admit, fail open), 'deny' (refuse until the next probe,
// fail closed) or 'local' (an embedded store in this process decides, from zero). Every answer
// made here is flagged degraded. What each kind answers is in its file (lib/kinds/, `whenDown`).

const { SluiceError, fromNative } = require('../base/errors')

const WHEN_DOWN = ['error', 'allow', 'deny', 'local']

class WhenDown {
  /**
   * `mode`: the policy; `probeIntervalMs`: how long a caller refused for want of Redis should
   * wait (until the next probe); `makeLocal()`: a fresh embedded store; `nowUs()`: local time.
   */
  constructor(mode, probeIntervalMs, { makeLocal, nowUs }) {
    this.mode = mode
    /** how long a refusal asks to wait: until the next probe, µs */
    this.retryUs = probeIntervalMs * 1000
    this._probeIntervalMs = probeIntervalMs
    this._makeLocal = makeLocal
    /** the local time, µs */
    this.nowUs = nowUs
    /** the error calls get while down ('error', and what cannot be answered without Redis) */
    this.error = null
    /** 'local': the embedded store deciding during this outage */
    this.local = null
  }

  /** The outage began: Redis was found down by `cause`. */
  begin(cause) {
    this.error = new SluiceError(
      'ERR_STORE_UNAVAILABLE',
      `Redis is down (${cause.code}: ${cause.message}); probing every ${this._probeIntervalMs} ms`,
      { cause },
    )
    if (this.mode === 'local') this.local = this._makeLocal()
  }

  /** The outage ended (or the store closed): the local counts are dropped. */
  end() {
    this.error = null
    const local = this.local
    this.local = null
    if (local !== null) local.close()
  }

  /** Answers each of `calls` of `kind` (its `whenDown`: a value, or throws: that call rejects). */
  answer(kind, calls, resolve, reject) {
    for (let e = 0; e < calls.length; e++) {
      let value
      try {
        value = kind.whenDown(this, calls[e])
      } catch (err) {
        reject[e](fromNative(err))
        continue
      }
      resolve[e](value)
    }
  }
}

module.exports = { WhenDown, WHEN_DOWN }
