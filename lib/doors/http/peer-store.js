// @ts-check
'use strict'

// SluiceStore: a sluice store behind the peers' own middleware, for the apps that keep it.
// express-rate-limit (its `store` option) and hono-rate-limiter (the same `Store` interface) call
// `init(options)` once, then `increment(key)` per request and compare the count with their limit:
// each increment is one atomic store call, so every process of the fleet counts together, also
// on a Redis Cluster (one slot per client key), with the store's whenDown and TTLs.
// Counters are windows that open at a client's first request (express-rate-limit's own
// MemoryStore's), named as the HTTP doors name theirs (lib/doors/http/key.js: a name is data).

const classes = require('../../classes')
const { MemoryStore, RedisStore } = require('../../store')
const { invalidConfig, describeValue } = require('../../base/errors')
const { OP } = require('../../kinds/limit')
const { keyId, nameOf } = require('./key')
const { MAX_LIMIT, MAX_WINDOW_MS } = require('./options')

class SluiceStore {
  /** `{ store, prefix }`: a sluice MemoryStore or RedisStore; `prefix` names this limiter's counters (default 'erl'). */
  constructor(options) {
    const o = options ?? {}
    if (!(o.store instanceof MemoryStore) && !(o.store instanceof RedisStore)) {
      throw invalidConfig('SluiceStore needs { store }: a sluice MemoryStore or RedisStore')
    }
    const prefix = o.prefix ?? 'erl'
    if (typeof prefix !== 'string' || !/^[\x20-\x7e]{1,64}$/.test(prefix)) {
      throw invalidConfig(`prefix must be 1..64 printable ASCII characters, got ${describeValue(prefix)}`)
    }
    this.store = o.store
    /** what the peers read: this store's counters are distinct from another limiter's */
    this.prefix = prefix
    /** keys counted here are counted in every process (the peers' `localKeys`) */
    this.localKeys = false
    this._windowMs = 60_000
  }

  /** The peer's options: its `windowMs`, the length of each client's window. */
  init(options) {
    const ms = options?.windowMs
    if (typeof ms !== 'number' || !Number.isInteger(ms) || ms < 1 || ms > MAX_WINDOW_MS) {
      throw invalidConfig(`windowMs must be whole ms in [1, ${MAX_WINDOW_MS}], got ${describeValue(ms)}`)
    }
    this._windowMs = ms
  }

  /** The counter of `key`: one window of the peer's length, counting every request. */
  _counter(key) {
    const name = nameOf(this.prefix, keyId(String(key)))
    const counter = new classes.WindowLimiter(this.store, { name, limit: MAX_LIMIT, interval: this._windowMs })
    return counter._uncounted()
  }

  /** `{ totalHits, resetTime }` of a decision of a counter (MAX_LIMIT - remaining hits). */
  _info(d) {
    const now = this.store.clock ? this.store.clock.now() : Date.now()
    return {
      totalHits: MAX_LIMIT - d.remaining,
      resetTime: new Date(now + (d.allowed ? d.resetAfterMs : d.retryAfterMs)),
    }
  }

  /** Counts a request of `key`: its hits in the window, this one included, and when the window ends. */
  async increment(key) {
    return this._info(await this._counter(key)._countAt(MAX_LIMIT, 0))
  }

  /** Takes one request of `key` back (the peers' skipFailedRequests and the like); never below 0. */
  async decrement(key) {
    await this._counter(key)._call(-1, OP.adjust, false)
  }

  /** What is counted for `key`, or undefined when nothing is; nothing is charged. */
  async get(key) {
    const d = await this._counter(key)._countAt(MAX_LIMIT, OP.peek)
    if (d.allowed && d.remaining >= MAX_LIMIT) return undefined
    return this._info(d)
  }

  /** Forgets what was counted for `key`, in every process. */
  async resetKey(key) {
    await this._counter(key).reset()
  }
}

module.exports = { SluiceStore }
