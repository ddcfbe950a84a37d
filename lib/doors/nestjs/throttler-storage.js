// @ts-check
'use strict'

// SluiceThrottlerStorage: a sluice store behind @nestjs/throttler's own guard (its `storage`
// option), for the apps that keep ThrottlerModule. Its `increment(key, ttl, limit,
// blockDuration, throttlerName)` is one atomic store call (the limit kind's `throttle`, see
// src/core/limit/mod.rs `Op::Throttle` and lua/limit.lua), so every process of the fleet counts
// together, also on a Redis Cluster (one slot per key), where the peer's community storages
// read and write in separate commands (nestjs/throttler#1303). What it answers is the peer's
// contract: a window of `ttl` opened by the first hit counts hits; the hit that takes the count
// over `limit` blocks the key for `blockDuration` (isBlocked); hits while blocked are refused and
// not counted; the first hit after a block opens a new window. Times in whole seconds, rounded
// up, as the peer's guard puts them in its headers.

const classes = require('../../classes')
const { MemoryStore, RedisStore } = require('../../store')
const { invalidConfig, invalidArgument, describeValue } = require('../../base/errors')
const { OP } = require('../../kinds/limit')
const { keyId, nameOf } = require('../http/key')
const { MAX_LIMIT, MAX_WINDOW_MS } = require('../http/options')

/** Whole ms in [min, MAX_WINDOW_MS], rounded up (the peer's ttl and blockDuration may be any number of ms). */
function ms(name, value, min) {
  if (typeof value !== 'number' || !Number.isFinite(value) || value < min || value > MAX_WINDOW_MS) {
    throw invalidArgument(`${name} must be ms in [${min}, ${MAX_WINDOW_MS}], got ${describeValue(value)}`)
  }
  return Math.max(min, Math.ceil(value))
}

/** Seconds, rounded up, of a span of ms. */
const seconds = (spanMs) => Math.ceil(spanMs / 1000)

class SluiceThrottlerStorage {
  /**
   * `new SluiceThrottlerStorage(store)` or `(store, { prefix })`: a sluice MemoryStore or
   * RedisStore; `prefix` names these counters apart from another app's on the same store
   * (default 'nest-throttler').
   */
  constructor(store, options) {
    if (!(store instanceof MemoryStore) && !(store instanceof RedisStore)) {
      throw invalidConfig('SluiceThrottlerStorage needs a sluice MemoryStore or RedisStore')
    }
    const o = options ?? {}
    if (o === null || typeof o !== 'object') throw invalidConfig('SluiceThrottlerStorage options must be an object')
    const prefix = o.prefix ?? 'nest-throttler'
    if (typeof prefix !== 'string' || !/^[\x20-\x7e]{1,64}$/.test(prefix)) {
      throw invalidConfig(`prefix must be 1..64 printable ASCII characters, got ${describeValue(prefix)}`)
    }
    this.store = store
    this.prefix = prefix
  }

  /**
   * Counts a hit of `key` for throttler `throttlerName` (a window of `ttl` ms admitting `limit`
   * hits; the hit over it blocks the key for `blockDuration` ms): `{ totalHits, timeToExpire,
   * isBlocked, timeToBlockExpire }`, times in seconds. One atomic store call. A limit of 0
   * blocks every hit (nothing is counted). Bad numbers reject with ERR_INVALID_ARGUMENT.
   * @param {string} key
   * @param {number} ttl
   * @param {number} limit
   * @param {number} blockDuration
   * @param {string} throttlerName
   */
  async increment(key, ttl, limit, blockDuration, throttlerName) {
    const ttlMs = ms('ttl', ttl, 1)
    const blockMs = ms('blockDuration', blockDuration, 0)
    if (typeof limit !== 'number' || !Number.isInteger(limit) || limit < 0 || limit > MAX_LIMIT) {
      throw invalidArgument(`limit must be an integer in [0, ${MAX_LIMIT}], got ${describeValue(limit)}`)
    }
    if (limit === 0)
      return { totalHits: 1, timeToExpire: seconds(ttlMs), isBlocked: true, timeToBlockExpire: seconds(blockMs) }
    // a name is data: the throttler's and the key's, each escaped (or hashed), never joined raw
    const throttler = nameOf(this.prefix, keyId(String(throttlerName ?? 'default')))
    const name = nameOf(throttler, keyId(String(key)))
    const counter = new classes.WindowLimiter(this.store, { name, limit, interval: ttlMs })._uncounted()
    const d = await counter._call(blockMs * 1000, OP.throttle, false)
    if (d.allowed) {
      return {
        totalHits: limit - d.remaining,
        timeToExpire: seconds(d.resetAfterMs),
        isBlocked: false,
        timeToBlockExpire: 0,
      }
    }
    return {
      totalHits: limit + 1,
      timeToExpire: seconds(d.resetAfterMs),
      isBlocked: true,
      timeToBlockExpire: seconds(d.retryAfterMs),
    }
  }
}

module.exports = { SluiceThrottlerStorage }
