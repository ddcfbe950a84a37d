// @ts-check
'use strict'
// Following a master behind Redis Sentinel: asks the sentinels where the master is, and keeps
// one subscription per sentinel to `+switch-master`, so the store moves to a promoted replica
// the moment the sentinels announce it (not when the old master starts refusing writes, which
// may be seconds later: calls counted there meanwhile are lost). The fred pool finds the
// master by itself on every reconnection; this file tells the store when to reconnect and
// where its direct lane must go.
const net = require('node:net')
const { frame } = require('./direct')

const REDIAL_MS = 1000
/** The longest a store waits for `+switch-master` once a failover has started. */
const FAILOVER_CAP_MS = 10_000
/** The sentinels' channels listened to: a failover about to promote a replica, its end. */
const STARTS = '+failover-state-send-slaveof-noone'
const ABORTS = ['-failover-abort-not-elected', '-failover-abort-no-good-slave', '-failover-abort-slave-timeout']

function command(...args) {
  let out = `*${args.length}\r\n`
  for (const a of args) out += `$${Buffer.byteLength(a)}\r\n${a}\r\n`
  return Buffer.from(out)
}

/**
 * A framed RESP2 reply read as text: a string, null, an Error for an error reply, or an array
 * of those (one level, as sentinels answer what we ask).
 */
function parse(buf, at) {
  const eol = buf.indexOf('\r\n', at)
  const line = buf.toString('utf8', at + 1, eol)
  const type = buf[at]
  if (type === 43 /* + */ || type === 58 /* : */) return [line, eol + 2]
  if (type === 45 /* - */) return [new Error(line), eol + 2]
  if (type === 36 /* $ */) {
    const n = Number(line)
    if (n < 0) return [null, eol + 2]
    return [buf.toString('utf8', eol + 2, eol + 2 + n), eol + 2 + n + 2]
  }
  const n = Number(line)
  const items = []
  at = eol + 2
  for (let i = 0; i < n; i++) {
    const [item, next] = parse(buf, at)
    items.push(item)
    at = next
  }
  return [n < 0 ? null : items, at]
}

/** The replies of one connection, each handed to `onReply` as it is complete. */
function reader(socket, onReply, onBad) {
  let buf = Buffer.alloc(0)
  socket.on('data', (chunk) => {
    buf = buf.length === 0 ? chunk : Buffer.concat([buf, chunk])
    for (;;) {
      const end = frame(buf, 0, 1)
      if (end === -2) return onBad()
      if (end < 0) return
      const [reply] = parse(buf, 0)
      buf = buf.subarray(end)
      onReply(reply)
    }
  })
}

/** `{ host, port }` of a sentinel's answer to `SENTINEL get-master-addr-by-name`, or null. */
function address(reply) {
  if (!Array.isArray(reply) || reply.length !== 2 || typeof reply[0] !== 'string') return null
  const port = Number(reply[1])
  return Number.isInteger(port) && port > 0 && port < 65536 ? { host: reply[0], port } : null
}

class SentinelWatcher {
  /**
   * `sentinel`: the checked option (lib/store/options.js); `onMaster({ host, port })` is called
   * when the sentinels name a master other than the last one known; `onFailover(true)` when a
   * sentinel is about to promote a replica of this master (from then on, what the old master
   * counts may be lost: the store sends nothing until the switch), `onFailover(false)` when
   * the failover is aborted or has not switched within FAILOVER_CAP_MS.
   */
  constructor(sentinel, onMaster, onFailover) {
    const { sentinelPassword, ...shown } = sentinel
    this._sentinel = { name: shown.name, sentinels: shown.sentinels }
    this._secret = () => sentinelPassword
    this._onMaster = onMaster
    this._onFailover = onFailover
    this._failoverTimer = null
    this.master = null
    this._sockets = new Set()
    this._timers = new Set()
    this._closed = false
  }

  /** The hello of every connection: AUTH (if the sentinels have a password), the master's address. */
  _hello() {
    const hello = []
    if (this._secret()) hello.push(command('AUTH', this._secret()))
    hello.push(command('SENTINEL', 'get-master-addr-by-name', this._sentinel.name))
    return hello
  }

  /**
   * Asks the sentinels, one after the other, where the master is; resolves `{ host, port }`,
   * or null when none answers with an address within `timeoutMs` each.
   */
  async ask(timeoutMs) {
    for (const at of this._sentinel.sentinels) {
      const found = await new Promise((resolve) => {
        const socket = net.connect({ host: at.host, port: at.port, noDelay: true })
        const done = (value) => {
          clearTimeout(timer)
          socket.destroy()
          resolve(value)
        }
        const timer = setTimeout(() => done(null), timeoutMs)
        socket.on('error', () => done(null))
        const hello = this._hello()
        let replies = 0
        reader(
          socket,
          (reply) => {
            if (++replies === hello.length) done(address(reply))
          },
          () => done(null),
        )
        socket.once('connect', () => socket.write(Buffer.concat(hello)))
      })
      if (found) {
        this._seen(found)
        return found
      }
    }
    return null
  }

  /** Subscribes to `+switch-master` on every sentinel (each redialled after a loss). */
  start() {
    for (const at of this._sentinel.sentinels) this._watch(at)
  }

  _watch(at) {
    if (this._closed) return
    const socket = net.connect({ host: at.host, port: at.port, noDelay: true })
    this._sockets.add(socket)
    socket.on('error', () => {})
    socket.on('close', () => {
      this._sockets.delete(socket)
      if (this._closed) return
      const timer = setTimeout(() => {
        this._timers.delete(timer)
        this._watch(at)
      }, REDIAL_MS)
      timer.unref()
      this._timers.add(timer)
    })
    socket.unref()
    const hello = this._hello()
    let replies = 0
    reader(
      socket,
      (reply) => {
        replies++
        // the address asked on every (re)connection: a switch announced while this
        // connection was down is not missed
        if (replies === hello.length) {
          const found = address(reply)
          if (found) this._seen(found)
        } else if (Array.isArray(reply) && reply[0] === 'message' && reply[1] === '+switch-master') {
          // "<name> <old ip> <old port> <new ip> <new port>"
          const [name, , , host, port] = String(reply[2]).split(' ')
          if (name === this._sentinel.name) this._seen(address([host, port]))
        } else if (Array.isArray(reply) && reply[0] === 'message') {
          this._event(reply[1], String(reply[2]))
        }
      },
      () => socket.destroy(),
    )
    socket.once('connect', () =>
      socket.write(Buffer.concat([...hello, command('SUBSCRIBE', '+switch-master', STARTS, ...ABORTS)])),
    )
  }

  /**
   * A failover event: "<type> <name> <ip> <port> @ <master> <ip> <port>" (about a replica of
   * master <master>) or "master <name> <ip> <port>" (about the master itself).
   */
  _event(channel, text) {
    const words = text.split(' ')
    const at = words.indexOf('@')
    const master = at >= 0 ? words[at + 1] : words[0] === 'master' ? words[1] : null
    if (master !== this._sentinel.name || this._closed) return
    if (channel === STARTS) {
      if (this._failoverTimer !== null) return
      this._failoverTimer = setTimeout(() => this._failoverEnds(), FAILOVER_CAP_MS)
      this._failoverTimer.unref()
      this._onFailover(true)
    } else if (ABORTS.includes(channel)) {
      this._failoverEnds()
    }
  }

  _failoverEnds() {
    if (this._failoverTimer === null) return
    clearTimeout(this._failoverTimer)
    this._failoverTimer = null
    this._onFailover(false)
  }

  _seen(found) {
    if (found === null || this._closed) return
    const last = this.master
    if (last !== null && last.host === found.host && last.port === found.port) return
    this.master = found
    if (this._failoverTimer !== null) {
      // the switch ends the failover: the store goes on once it reaches the new master
      clearTimeout(this._failoverTimer)
      this._failoverTimer = null
    }
    if (last !== null) this._onMaster(found)
  }

  close() {
    this._closed = true
    if (this._failoverTimer !== null) clearTimeout(this._failoverTimer)
    for (const t of this._timers) clearTimeout(t)
    for (const s of this._sockets) s.destroy()
  }
}

module.exports = { SentinelWatcher }
