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
const native = require('../index.js')
const { SluiceError, fromNative } = require('./errors')

const CR = 13
const REDIAL_MS = 1000

/**
 * The end offset of `count` complete RESP2 replies in `buf` from `at`, or -1 if the buffer
 * holds less. Iterative: array nesting costs a counter, never stack.
 */
function frame(buf, at, count) {
  let need = count
  const length = buf.length
  while (need > 0) {
    if (at >= length) return -1
    const type = buf[at]
    const eol = buf.indexOf(CR, at)
    if (eol < 0 || eol + 1 >= length) return -1
    need--
    if (type === 36 /* $ */ || type === 42 /* * */) {
      let n = 0
      let negative = false
      for (let i = at + 1; i < eol; i++) {
        const c = buf[i]
        if (c === 45 /* - */) negative = true
        else n = n * 10 + (c - 48)
      }
      if (type === 36) {
        at = negative ? eol + 2 : eol + 2 + n + 2
        if (at > length) return -1
        continue
      }
      if (!negative) need += n
    }
    at = eol + 2
  }
  return at
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

  /** Runs a direct task (see `redisDirectStep`): resolves with its last step. */
  run(task) {
    return new Promise((resolve, reject) => this._step(task, null, resolve, reject))
  }

  _step(task, replies, resolve, reject) {
    let step
    try {
      step = native.redisDirectStep(task, replies)
    } catch (err) {
      return reject(fromNative(err))
    }
    if (!step.out) return resolve(step)
    if (!this.ready) return reject(unavailable('the connection to Redis was lost'))
    this._socket.write(step.out)
    if (this._queue.length === this._head) {
      if (this._timer === null) this._timer = setTimeout(this._onTimer, this._timeoutMs)
      else this._timer.ref()
    }
    this._queue.push({ task, count: step.count, start: performance.now(), resolve, reject })
  }

  _data(chunk) {
    let buf = this._buf === null ? chunk : Buffer.concat([this._buf, chunk])
    let at = 0
    while (this._head < this._queue.length) {
      const entry = this._queue[this._head]
      const end = frame(buf, at, entry.count)
      if (end < 0) break
      this._queue[this._head++] = undefined
      if (entry.task !== null) this._step(entry.task, buf.subarray(at, end), entry.resolve, entry.reject)
      at = end
    }
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

  /** Fails commands past their deadline (their replies, if they come, are skipped). */
  _checkDeadlines() {
    this._timer = null
    const now = performance.now()
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
    if (next !== Infinity) this._timer = setTimeout(this._onTimer, Math.max(1, Math.ceil(next)))
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
      : unavailable('the connection to Redis was lost')
    for (let i = head; i < queue.length; i++) if (queue[i].task !== null) queue[i].reject(error)
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
