'use strict'
// The concurrent-limiter waiters of this process, and on a RedisStore the pub/sub channels
// their grants arrive on (subscribed while waiters of a limiter queue, read by one loop).

const native = require('../native')
const { fromNative } = require('../errors')
const { closedError } = require('./errors')

/**
 * The waiters of this process, by waiter id. A grant message (`"<id> <token>"`) resolves
 * its waiter; `"*"` asks every waiter to re-poll (a grant may have been missed while the
 * listener reconnected).
 */
class Waiters {
  constructor() {
    this._map = new Map()
    /** waiters per group (a concurrent limiter's channel), for maxWaiters */
    this._groups = new Map()
  }
  get size() {
    return this._map.size
  }
  /** Waiters of `group` queued in this process. */
  count(group) {
    return this._groups.get(group) || 0
  }
  add(id, waiter, group) {
    this._map.set(id, waiter)
    if (group !== undefined) {
      waiter.group = group
      this._groups.set(group, this.count(group) + 1)
    }
  }
  delete(id) {
    const waiter = this._map.get(id)
    if (waiter === undefined) return
    this._map.delete(id)
    if (waiter.group !== undefined) {
      const left = this.count(waiter.group) - 1
      if (left > 0) this._groups.set(waiter.group, left)
      else this._groups.delete(waiter.group)
    }
  }
  /** The store is closing: every waiter settles now with `error` (ERR_CLOSED). */
  closeAll(error) {
    for (const waiter of [...this._map.values()]) if (waiter.closed) waiter.closed(error)
  }
  wake(message) {
    if (message === '*') {
      for (const waiter of this._map.values()) waiter.resync()
      return
    }
    const space = message.indexOf(' ')
    const waiter = this._map.get(message.slice(0, space))
    if (waiter) waiter.grant(Number(message.slice(space + 1)))
  }
}

/**
 * A RedisStore's grant channels: subscribed once per channel however many waiters of this
 * process wait on it, and one loop that hands the messages to `store._waiters` while any wait.
 */
class Channels {
  constructor(store) {
    this._store = store
    this._map = new Map() // channel -> { count, ready, local }
    this._listening = false
  }

  has(channel) {
    return this._map.has(channel)
  }

  /**
   * Subscribes to a grant channel (shared by the waiters of this process). While Redis is
   * down under whenDown 'local', waiters queue on the embedded store, whose grants come back
   * in its replies: nothing to subscribe to (such entries go at recovery, see `dropLocal`).
   */
  listen(channel) {
    const store = this._store
    if (store._closed) return Promise.reject(closedError())
    let entry = this._map.get(channel)
    if (!entry && store.status === 'down' && store.whenDown === 'local') {
      entry = { count: 0, ready: Promise.resolve(), local: true }
      this._map.set(channel, entry)
    } else if (!entry) {
      entry = { count: 0, ready: null, local: false }
      entry.ready = native.redisSubscribe(store._native, channel).catch((err) => {
        if (this._map.get(channel) === entry) this._map.delete(channel)
        throw fromNative(err)
      })
      this._map.set(channel, entry)
    }
    entry.count++
    return entry.ready
  }

  unlisten(channel) {
    const entry = this._map.get(channel)
    if (!entry || --entry.count > 0) return
    this._map.delete(channel)
    if (entry.local) return
    entry.ready.then(
      () => native.redisUnsubscribe(this._store._native, channel).catch(() => {}),
      () => {},
    )
  }

  /** Redis is back: channels opened while down were never subscribed; the next waiters subscribe. */
  dropLocal() {
    for (const [channel, entry] of this._map) if (entry.local) this._map.delete(channel)
  }

  /** Starts the loop that hands grant messages to waiters, while any wait. */
  wakeLoop() {
    const store = this._store
    if (this._listening || store._closed || store.status === 'down') return
    this._listening = true
    const loop = async () => {
      try {
        while (store._waiters.size > 0 && !store._closed) {
          const messages = await native.redisNextWakes(store._native)
          for (const m of messages) store._waiters.wake(m)
        }
      } catch {
        // the store closed under the loop; waiters time out through their own deadlines
      } finally {
        this._listening = false
      }
    }
    loop()
  }

  /** A waiter left; ends the pending wake call when none is left. */
  waiterDone() {
    if (this._store._waiters.size === 0 && this._listening) native.redisStopWakes(this._store._native)
  }
}

module.exports = { Waiters, Channels }
