// @ts-check
'use strict'
// The direct lane: one connection to a standalone Redis, owned by the JS thread. Store calls
// run in native code (src/store/redis/direct.rs) and hand back the exact bytes of their
// script calls; this file writes them, frames the replies and feeds them back. A decision then
// wakes one thread (this one, when the reply arrives), like any JS Redis client, where the
// pool's tokio thread costs two more hand-offs per round trip.
//
// It is a fast path, never the only path: when it is not up, the store uses its fred pool
// (which reconnects by itself), and this connection is redialled at most once per second,
// when calls arrive. Every command has a deadline (ERR_TIMEOUT); a lost connection fails the
// calls under way with ERR_STORE_UNAVAILABLE, as the pool does.
const net = require('node:net')
const native = require('../native')
const { SluiceError, fromNative, isNativeError } = require('../base/errors')
const { OUT } = require('./slots')

const CR = 13
const LF = 10
const REDIAL_MS = 1000
/** Replies are refused (a protocol error: the connection is dropped) beyond these bounds. Our
 * scripts return flat arrays of small values; the Rust parser allows the same depth. */
const MAX_DEPTH = 4
const MAX_BULK = 64 * 1024 * 1024
const MAX_ARRAY = 1 << 24
const MAX_LINE = 64 * 1024
/** The open arrays' unread element counts while framing (index 0: the replies asked for). */
const pending = new Float64Array(MAX_DEPTH + 1)

/** A length after `$` or `*`: -1 or a whole number; NaN for anything else. */
function lengthAt(buf, from, eol) {
  if (from >= eol) return NaN
  if (buf[from] === 45 /* - */) return eol === from + 2 && buf[from + 1] === 49 /* 1 */ ? -1 : NaN
  let n = 0
  for (let i = from; i < eol; i++) {
    const d = buf[i] - 48
    if (d < 0 || d > 9) return NaN
    n = n * 10 + d
  }
  return eol - from > 12 ? NaN : n
}

/**
 * The end offset of `count` complete RESP2 replies in `buf` from `at`; -1 if the buffer holds
 * less; -2 if the bytes are not a reply we accept (an unknown type byte, a bad length, bulk
 * data not ended by CRLF, nesting deeper than MAX_DEPTH, a bulk over MAX_BULK, an array over
 * MAX_ARRAY, a line over MAX_LINE): a protocol error. Iterative: nesting costs a counter.
 */
function frame(buf, at, count) {
  const length = buf.length
  let depth = 0
  pending[0] = count
  for (;;) {
    while (pending[depth] === 0) {
      if (depth === 0) return at
      depth--
    }
    if (at >= length) return -1
    const type = buf[at]
    let eol = buf.indexOf(CR, at)
    if (eol < 0) return length - at > MAX_LINE ? -2 : -1
    if (eol + 1 >= length) return -1
    if (buf[eol + 1] !== LF) return -2
    pending[depth]--
    if (type === 43 /* + */ || type === 45 /* - */ || type === 58 /* : */) {
      at = eol + 2
    } else if (type === 36 /* $ */) {
      const n = lengthAt(buf, at + 1, eol)
      if (Number.isNaN(n) || n > MAX_BULK) return -2
      if (n < 0) {
        at = eol + 2
        continue
      }
      at = eol + 2 + n + 2
      if (at > length) return -1
      if (buf[at - 2] !== CR || buf[at - 1] !== LF) return -2
    } else if (type === 42 /* * */) {
      const n = lengthAt(buf, at + 1, eol)
      if (Number.isNaN(n) || n > MAX_ARRAY) return -2
      at = eol + 2
      if (n > 0) {
        if (depth === MAX_DEPTH) return -2
        pending[++depth] = n
      }
    } else {
      return -2
    }
  }
}

/** `[user, password, db]` of a plain `redis://` URL, or null for anything else. */
function parseUrl(url) {
  let u
  try {
    u = new URL(url)
  } catch {
    return null
  }
  if (u.protocol !== 'redis:' || u.search || u.hash) return null
  const db = u.pathname && u.pathname !== '/' ? Number(u.pathname.slice(1)) : 0
  if (!Number.isInteger(db) || db < 0) return null
  const host = u.hostname.startsWith('[') ? u.hostname.slice(1, -1) : u.hostname
  return {
    host: host || '127.0.0.1',
    port: Number(u.port || 6379),
    user: decodeURIComponent(u.username),
    password: decodeURIComponent(u.password),
    db,
  }
}

function command(...args) {
  let out = `*${args.length}\r\n`
  for (const a of args) out += `$${Buffer.byteLength(a)}\r\n${a}\r\n`
  return Buffer.from(out)
}

class DirectConnection {
  /**
   * Opens the connection (AUTH and SELECT as the URL says); resolves with null when the URL is
   * not a plain `redis://` one or the connection cannot be made in time.
   */
  static async open(url, { connectTimeoutMs, commandTimeoutMs }) {
    const target = parseUrl(url)
    if (!target) return null
    const conn = new DirectConnection(target, commandTimeoutMs)
    return (await conn._dial(connectTimeoutMs)) ? conn : null
  }

  /**
   * A connection not dialled yet (Redis was down when the store started): the store dials it
   * when calls arrive, as after any loss; null when the URL is not a plain `redis://` one.
   */
  static idle(url, { commandTimeoutMs }) {
    const target = parseUrl(url)
    return target ? new DirectConnection(target, commandTimeoutMs) : null
  }

  constructor(target, commandTimeoutMs) {
    // the password is kept out of every property, so no inspect or log of the store shows it
    const { password, ...shown } = target
    this._target = shown
    this._password = () => password
    this._timeoutMs = commandTimeoutMs
    this._socket = null
    this.ready = false
    this._closed = false
    this._lastDial = 0
    this._dialing = false
    this._buf = null
    this._lostBecause = null
    // commands written and not answered, oldest first: { task, count, start, resolve, reject }
    this._queue = []
    this._head = 0
    this._timer = null
    this._onData = (chunk) => this._data(chunk)
    this._onTimer = () => this._checkDeadlines()
  }

  _dial(timeoutMs) {
    this._lastDial = Date.now()
    this._dialing = true
    const { host, port, user, db } = this._target
    const password = this._password()
    return new Promise((resolve) => {
      const socket = net.connect({ host, port, noDelay: true })
      let settled = false
      const done = (ok) => {
        if (settled) return
        settled = true
        clearTimeout(timer)
        this._dialing = false
        if (!ok) {
          socket.destroy()
          return resolve(false)
        }
        socket.removeAllListeners('data')
        this._socket = socket
        this._buf = null
        socket.on('data', this._onData)
        socket.on('close', () => this._lost(socket))
        // an idle store does not keep the process alive; while a call is pending, its
        // deadline timer does
        socket.unref()
        this.ready = !this._closed
        if (this._closed) socket.destroy()
        resolve(!this._closed)
      }
      const timer = setTimeout(() => done(false), timeoutMs)
      socket.once('error', () => done(false))
      socket.on('error', () => {}) // later errors end in 'close'
      const hello = []
      if (password) hello.push(user ? command('AUTH', user, password) : command('AUTH', password))
      if (db) hello.push(command('SELECT', String(db)))
      socket.once('connect', () => {
        if (hello.length === 0) return done(true)
        socket.write(Buffer.concat(hello))
        let buf = Buffer.alloc(0)
        socket.on('data', (chunk) => {
          buf = Buffer.concat([buf, chunk])
          const end = frame(buf, 0, hello.length)
          if (end === -2) return done(false)
          if (end < 0) return
          // every handshake reply must be +OK; an error reply leaves the store on its pool
          const ok = buf.subarray(0, end).toString('latin1').split('\r\n').filter(Boolean)
          done(ok.length === hello.length && ok.every((line) => line === '+OK'))
        })
      })
    })
  }

  /** Redials in the background, at most once per REDIAL_MS; calls meanwhile use the pool. */
  redial(connectTimeoutMs) {
    if (this._closed || this.ready || this._dialing || Date.now() - this._lastDial < REDIAL_MS) return
    this._dial(connectTimeoutMs)
  }

  /**
   * Runs a direct task (see `redisDirectStep`): `done(out)` with its result (the result
   * buffer, read at once, or the result itself), or `fail(error)`; called once, never from
   * this call.
   */
  run(task, done, fail) {
    this._step(task, null, done, fail)
  }

  _step(task, replies, resolve, reject) {
    let step
    try {
      step = native.redisDirectStep(task, replies)
    } catch (err) {
      return reject(fromNative(err))
    }
    if (typeof step === 'number') return resolve(OUT)
    // not bytes to write: the result itself, or a store failure as a value (never a Buffer, so
    // the bytes' path, the common one, pays one check)
    if (!Buffer.isBuffer(step)) return isNativeError(step) ? reject(fromNative(step)) : resolve(step)
    if (!this.ready) return reject(unavailable('the connection to Redis was lost'))
    const count = OUT[0]
    this._socket.write(step)
    if (this._queue.length === this._head) {
      if (this._timer === null) this._timer = setTimeout(this._onTimer, this._timeoutMs)
      else this._timer.ref()
    }
    this._queue.push({ task, count, start: performance.now(), resolve, reject })
  }

  _data(chunk) {
    let buf = this._buf === null ? chunk : Buffer.concat([this._buf, chunk])
    let at = 0
    while (this._head < this._queue.length) {
      const entry = this._queue[this._head]
      const end = frame(buf, at, entry.count)
      if (end === -2) return this._protocolError()
      if (end < 0) break
      this._queue[this._head++] = undefined
      if (entry.task !== null) this._step(entry.task, buf.subarray(at, end), entry.resolve, entry.reject)
      at = end
    }
    // bytes with no command waiting for them are not a reply to anything: kept, they would be
    // framed as the next command's reply and every later reply would go to the wrong caller
    if (at < buf.length && this._head === this._queue.length) return this._protocolError()
    this._buf = at === buf.length ? null : buf.subarray(at)
    if (this._head === this._queue.length) {
      this._queue = []
      this._head = 0
      if (this._timer !== null) this._timer.unref()
    } else if (this._head > 1024) {
      this._queue = this._queue.slice(this._head)
      this._head = 0
    }
  }

  /**
   * Bytes that are not a reply: the connection is dropped (every call under way fails with
   * ERR_STORE_UNAVAILABLE) and redialled when calls arrive; meanwhile calls use the pool.
   */
  _protocolError() {
    this._lostBecause =
      'Redis sent bytes that are not a RESP2 reply to a command sent (protocol error); the connection was dropped'
    const socket = this._socket
    this._lost(socket)
    socket.destroy()
  }

  /**
   * Fails commands past their deadline (their replies, if they come, are skipped). When the
   * oldest has waited twice its deadline, the connection is dropped as unresponsive (as the
   * pool does): a server stuck mid-reply would otherwise time out every later command here.
   */
  _checkDeadlines() {
    this._timer = null
    const now = performance.now()
    if (this._head < this._queue.length && now - this._queue[this._head].start >= 2 * this._timeoutMs) {
      this._lostBecause = `Redis did not answer for ${2 * this._timeoutMs} ms; the connection was dropped`
      const socket = this._socket
      this._lost(socket)
      if (socket) socket.destroy()
      return
    }
    let next = Infinity
    for (let i = this._head; i < this._queue.length; i++) {
      const entry = this._queue[i]
      if (entry.task === null) continue
      if (now - entry.start >= this._timeoutMs) {
        entry.task = null
        entry.reject(new SluiceError('ERR_TIMEOUT', `Redis did not answer within ${this._timeoutMs} ms`))
      } else {
        next = Math.min(next, entry.start + this._timeoutMs - now)
        break // later entries were written later
      }
    }
    // the oldest command, failed or not, is watched until it is answered
    if (this._head < this._queue.length) {
      next = Math.min(next, this._queue[this._head].start + 2 * this._timeoutMs - now)
    }
    if (next !== Infinity) {
      this._timer = setTimeout(this._onTimer, Math.max(1, Math.ceil(next)))
      // only the watch is left when every call waiting here has failed: it keeps no process alive
      let waiting = false
      for (let i = this._head; i < this._queue.length && !waiting; i++) waiting = this._queue[i].task !== null
      if (!waiting) this._timer.unref()
    }
  }

  _lost(socket) {
    if (this._socket !== socket) return
    this.ready = false
    this._socket = null
    this._buf = null
    const queue = this._queue
    const head = this._head
    this._queue = []
    this._head = 0
    const error = this._closed
      ? new SluiceError('ERR_CLOSED', 'the store is closed')
      : unavailable(this._lostBecause || 'the connection to Redis was lost')
    this._lostBecause = null
    for (let i = head; i < queue.length; i++) if (queue[i].task !== null) queue[i].reject(error)
  }

  /**
   * Moves the connection to another server (behind Sentinel: the promoted replica). Calls under
   * way on the old one fail with ERR_STORE_UNAVAILABLE (never sent again); the next call dials
   * the new one at once (meanwhile calls use the pool).
   */
  retarget(host, port) {
    this._target = { ...this._target, host, port }
    this._lastDial = 0
    const socket = this._socket
    if (socket) {
      this._lostBecause = `the master moved to ${host}:${port} (Sentinel); the connection to the old one was dropped`
      this._lost(socket)
      socket.destroy()
    }
  }

  close() {
    this._closed = true
    this.ready = false
    if (this._socket) this._socket.destroy()
  }
}

function unavailable(message) {
  return new SluiceError('ERR_STORE_UNAVAILABLE', message)
}

module.exports = { DirectConnection, frame, parseUrl }
