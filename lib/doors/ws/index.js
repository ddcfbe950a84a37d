// @ts-check
'use strict'

// sluice/ws: message limits for WebSocket connections, `ws` (a connection handler) and Socket.IO
// (events, through `socket.use`); connections themselves are the HTTP doors' job. Each message
// is one decision of an HTTP door's machinery (lib/doors/http/door.js) under the message's key:
// the connection's own (a fresh id, the default) or the app's `key(socket, req)` (a user: one
// count over all its connections, in every process). So the doors' algorithms, windows, rules
// (store.rules: deny, allow, shadow), `ban`, statistics (one limiter of kind `door`) and the
// store's localDenyCache apply: one decision per message, none for a refusal cached.
// Messages are delivered in the order they came, each once its decision is known (the
// decisions of a flood are batched together); over the limit `onLimit` says what happens:
// 'close' (the default: close 1008, policy violation), 'drop' (the message only), or a
// function `(socket, info)` (the message dropped).

const { randomUUID } = require('node:crypto')
const { Door, DOOR } = require('../http/door')
const { doorConfig } = require('../http/options')
const { invalidConfig, knownOptions } = require('../../base/errors')

/** The options limitMessages and limitEvents read (the rest are the HTTP doors'). */
const OWN = ['key', 'onLimit']
/** The HTTP doors' options that mean something for messages. */
const DOOR_OPTIONS = ['store', 'limit', 'windowMs', 'limits', 'algorithm', 'identifier', 'cacheBytes', 'mode', 'ban', 'cost']
/** Close code of a socket over its limit: policy violation (RFC 6455). */
const POLICY_VIOLATION = 1008
/** Close code of a socket whose decision failed (a store failure): internal error. */
const INTERNAL_ERROR = 1011
/** The warning of a callback of the app that threw (`key`, `onLimit`). */
const CALLBACK_WARNING = 'SLUICE_CALLBACK_THREW'

/** The door of message limits `o`; `{ door, key, onLimit }`. */
function messageDoor(o) {
  if (o === null || typeof o !== 'object' || Array.isArray(o)) throw invalidConfig('message limit options must be an object')
  knownOptions(o, [...DOOR_OPTIONS, ...OWN], 'message limit')
  if (o.key !== undefined && typeof o.key !== 'function') throw invalidConfig('key must be a function (socket, req) => string')
  const onLimit = o.onLimit ?? 'close'
  if (onLimit !== 'close' && onLimit !== 'drop' && typeof onLimit !== 'function') {
    throw invalidConfig("onLimit must be 'close', 'drop' or a function (socket, info)")
  }
  const options = {}
  for (const name of DOOR_OPTIONS) if (o[name] !== undefined) options[name] = o[name]
  // the key is given with each decision (Door.decide's `known`): the door never makes one
  options.keyGenerator = () => ''
  // a cost sees the message: (socket, data)
  const door = new Door(doorConfig(options, { defaults: { windowMs: 1000 } }))
  return { door, key: o.key, onLimit }
}

/** What a callback of the app threw: a process warning (never an unhandled rejection), with its cause. */
function warn(what, err) {
  const warning = new Error(`sluice/ws: ${what} threw: ${err instanceof Error ? err.message : String(err)}`)
  warning.name = 'SluiceWarning'
  Object.assign(warning, { code: CALLBACK_WARNING, cause: err })
  process.emitWarning(warning)
}

/**
 * The key of a connection: `key(socket, req)`'s (a connection of its own without one), or null
 * when it threw: that connection is ended with `end()` (the others go on) and a warning says why.
 */
function keyOf(key, socket, req, end) {
  if (key === undefined) return randomUUID()
  try {
    return String(key(socket, req))
  } catch (err) {
    warn('key(socket, req)', err)
    end()
    return null
  }
}

/** A refused message handed to the app's `onLimit`: one that throws drops that message only (a warning). */
function refused(onLimit, socket, info) {
  try {
    const r = onLimit(socket, info)
    if (r !== null && typeof r === 'object' && typeof r.then === 'function') r.then(undefined, (err) => warn('onLimit', err))
  } catch (err) {
    warn('onLimit', err)
  }
}

/**
 * `wss.on('connection', limitMessages({ store, limit: 20, windowMs: 1000 }))` (or call the
 * function it returns with `(socket, req)` in your own connection handler, before adding
 * 'message' listeners or after: it sits in front of them): a `ws` socket's messages, each one
 * decision. Per connection by default; `key(socket, req)`: one count per key (a user), in every
 * process. `limit` per `windowMs` (default 1000 ms), or the HTTP doors' `limits`, `algorithm`...
 * @param {any} o
 */
function limitMessages(o) {
  const { door, key, onLimit } = messageDoor(o)
  const attach = function sluiceLimitMessages(socket, req) {
    const id = keyOf(key, socket, req, () => socket.close(INTERNAL_ERROR, 'rate limit unavailable'))
    if (id === null) return
    const emit = socket.emit
    /** @type {{ args: unknown[], o: any, err: unknown, done: boolean }[]} the messages awaiting their decision, in order */
    const queue = []
    let closed = false
    const drain = () => {
      while (queue.length > 0 && queue[0].done) {
        const m = /** @type {any} */ (queue.shift())
        if (closed) continue
        if (m.err !== null) {
          closed = true
          queue.length = 0
          socket.close(INTERNAL_ERROR, 'rate limit unavailable')
        } else if (m.o === null || m.o.allowed) emit.call(socket, 'message', ...m.args)
        else if (onLimit === 'close') {
          closed = true
          queue.length = 0
          socket.close(POLICY_VIOLATION, 'rate limit exceeded')
        } else if (onLimit !== 'drop') refused(onLimit, socket, door.info(m.o))
      }
    }
    socket.emit = function (event, ...args) {
      if (event !== 'message') return emit.call(this, event, ...args)
      if (closed) return false
      const m = { args, o: null, err: null, done: false }
      queue.push(m)
      door.decide(args[0], socket, id).then(
        (o) => {
          m.o = o
          m.done = true
          drain()
        },
        (err) => {
          m.err = err
          m.done = true
          drain()
        },
      )
      return true
    }
  }
  Object.defineProperty(attach, DOOR, { value: door })
  return attach
}

/**
 * `io.on('connection', limitEvents({ store, limit: 20, windowMs: 1000 }))`: a Socket.IO
 * socket's events (through `socket.use`), each one decision; the same options as limitMessages,
 * `key(socket)`. Over the limit, 'close' disconnects the socket, 'drop' drops the event.
 * @param {any} o
 */
function limitEvents(o) {
  const { door, key, onLimit } = messageDoor(o)
  const attach = function sluiceLimitEvents(socket) {
    const id = keyOf(key, socket, socket.request, () => socket.disconnect(true))
    if (id === null) return
    socket.use((packet, next) => {
      door.decide(packet, socket, id).then(
        (d) => {
          if (d === null || d.allowed) return next()
          if (onLimit === 'close') socket.disconnect(true)
          else if (onLimit !== 'drop') refused(onLimit, socket, door.info(d))
        },
        (err) => next(err),
      )
    })
  }
  Object.defineProperty(attach, DOOR, { value: door })
  return attach
}

module.exports = { limitMessages, limitEvents }
