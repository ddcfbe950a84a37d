// @ts-check
'use strict'
// The concurrent-limiter waiters of this process (one interface on both stores: enter, leave,
// wake), and on a RedisStore the pub/sub channels their grants arrive on.

const native = require('../native')
const { orThrow } = require('../base/errors')
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
  /**
   * Queues waiter `id` of `group` (a concurrent limiter's channel) until `leave`. Here grants
   * come back in the replies of this process's own store: nothing to subscribe to.
   */
  async enter(id, waiter, group) {
    this.add(id, waiter, group)
  }

  leave(id) {
    this.delete(id)
  }

  /** Whether the waiters of `group` already listen for grants (a subscription is up). */
  listening() {
    return false
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
 * A RedisStore's waiters: their grants arrive on pub/sub channels, subscribed once per
 * channel however many waiters of this process wait on it, and read by one loop while any
 * waits.
 */
class RedisWaiters extends Waiters {
  constructor(store) {
    super()
    this._store = store
    this._channels = new Map() // channel -> { count, ready, local }
    this._looping = false
    /** the store's other listener (its rules, lib/store/rules/rules.js): `rules <v>` and `*` messages */
    this._listener = null
  }

  /**
   * Subscribes `listener` (the store's rules) to `channel` for good: it gets the messages that
   * start with `rules ` and every `*`, from the loop while waiters wait, else from `drain()`
   * (the listener's own timer, which keeps no process alive: a waiting native call would).
   */
  listen(channel, listener) {
    this._listener = listener
    return this._listen(channel)
  }

  /** Hands over the messages received meanwhile, without waiting (none while the loop runs). */
  drain() {
    const store = this._store
    if (this._looping || store._closed) return
    for (const m of native.redisTakeWakes(store._native)) this.wake(m)
  }

  /** Whether `channel` is subscribed on Redis (not only queued while the store was down). */
  subscribed(channel) {
    const entry = this._channels.get(channel)
    return entry !== undefined && !entry.local
  }

  wake(message) {
    if (message.startsWith('rules ')) {
      if (this._listener !== null) this._listener.message(message)
      return
    }
    if (message === '*' && this._listener !== null) this._listener.message(message)
    super.wake(message)
  }

  listening(channel) {
    return this._channels.has(channel)
  }

  /** Queues waiter `id` and subscribes to its channel `group`; rejects (and leaves) when that fails. */
  async enter(id, waiter, group) {
    this.add(id, waiter, group)
    try {
      await this._listen(group)
    } catch (err) {
      this.delete(id)
      this._waiterDone()
      throw err
    }
    this._wakeLoop()
  }

  leave(id, group) {
    this._unlisten(group)
    this.delete(id)
    this._waiterDone()
  }

  /**
   * Subscribes to a grant channel (shared by the waiters of this process). While Redis is
   * down under whenDown 'local', waiters queue on the embedded store, whose grants come back
   * in its replies: nothing to subscribe to (such entries go at recovery, see `dropLocal`).
   */
  _listen(channel) {
    const store = this._store
    if (store._closed) return Promise.reject(closedError())
    let entry = this._channels.get(channel)
    if (!entry && store.status === 'down' && store.whenDown === 'local') {
      entry = { count: 0, ready: Promise.resolve(), local: true }
      this._channels.set(channel, entry)
    } else if (!entry) {
      entry = { count: 0, ready: null, local: false }
      entry.ready = native
        .redisSubscribe(store._native, channel)
        .then(orThrow)
        .catch((err) => {
          if (this._channels.get(channel) === entry) this._channels.delete(channel)
          throw store._failure(err)
        })
      this._channels.set(channel, entry)
    }
    entry.count++
    return entry.ready
  }

  _unlisten(channel) {
    const entry = this._channels.get(channel)
    if (!entry || --entry.count > 0) return
    this._channels.delete(channel)
    if (entry.local) return
    entry.ready.then(
      () => native.redisUnsubscribe(this._store._native, channel).catch(() => {}),
      () => {},
    )
  }

  /** Redis is back: channels opened while down were never subscribed; the next waiters subscribe. */
  dropLocal() {
    for (const [channel, entry] of this._channels) if (entry.local) this._channels.delete(channel)
  }

  /** Starts the loop that hands grant messages to waiters, while any wait. */
  _wakeLoop() {
    const store = this._store
    if (this._looping || store._closed || store.status === 'down') return
    this._looping = true
    const loop = async () => {
      try {
        while (this.size > 0 && !store._closed) {
          const messages = await native.redisNextWakes(store._native)
          for (const m of messages) this.wake(m)
        }
      } catch {
        // the store closed under the loop; waiters time out through their own deadlines
      } finally {
        this._looping = false
      }
    }
    loop()
  }

  /** A waiter left; ends the pending wake call when none is left. */
  _waiterDone() {
    if (this.size === 0 && this._looping) native.redisStopWakes(this._store._native)
  }
}

module.exports = { Waiters, RedisWaiters }
