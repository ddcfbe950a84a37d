'use strict'
// interceptor(options): sluice/fetch for undici 7's `Dispatcher.compose`. Each request of the
// dispatcher waits for its key's slot before it is dispatched; its answer is read as
// pacedFetch reads it; a retryable answer is swallowed and the request dispatched again.

const { fetchConfig } = require('./options')
const { FetchDoor } = require('./door')
const { fromObject } = require('./headers')
const { sleep } = require('../../classes/base')
const { SluiceError } = require('../../base/errors')

/** Bodies that can be dispatched again (a stream or an iterator cannot). */
const replayable = (body) => body === undefined || body === null || typeof body === 'string' || ArrayBuffer.isView(body)

/**
 * The controller the caller's handler holds: it exists before the request is dispatched (the
 * caller can abort a wait) and forwards to the dispatcher's controller once there is one.
 */
class PacedController {
  constructor(call) {
    this._call = call
  }
  abort(reason) {
    this._call.abort(reason)
  }
  pause() {
    if (this._call.controller) this._call.controller.pause()
  }
  resume() {
    if (this._call.controller) this._call.controller.resume()
  }
  get paused() {
    return this._call.controller ? this._call.controller.paused : false
  }
  get aborted() {
    return this._call.aborter.signal.aborted
  }
  get reason() {
    return this._call.aborter.signal.aborted ? this._call.aborter.signal.reason : null
  }
}

/** One request through the interceptor: a handler towards the dispatcher, wrapping the caller's. */
class PacedCall {
  constructor(door, dispatch, opts, handler) {
    this.door = door
    this.dispatch = dispatch
    this.opts = opts
    this.handler = handler
    this.controller = null // the dispatcher's, per dispatch
    this.aborter = new AbortController()
    this.proxy = new PacedController(this)
    this.gate = null
    this.method = String(opts.method || 'GET').toUpperCase()
    this.attempt = 0
    this.retrying = false
    this.blocked = null // the observe() of the answer being read
    this.sentMs = 0 // when the request went (the gate's clock)
    this.done = false
  }

  start() {
    this.handler.onRequestStart?.(this.proxy, {})
    if (this.aborter.signal.aborted) return
    this.run().catch((err) => this.fail(err))
  }

  async run() {
    if (this.gate === null) {
      const url = new URL(this.opts.path, this.opts.origin)
      this.gate = await this.door.gate(this.door.keyOf(url, undefined))
      this.gate.counts.calls++
    }
    this.sentMs = await this.gate.admit(this.aborter.signal)
    this.retrying = false
    this.dispatch(this.opts, this)
  }

  abort(reason) {
    if (this.aborter.signal.aborted) return
    this.aborter.abort(reason)
    if (this.controller) this.controller.abort(reason)
  }

  fail(err) {
    if (this.gate !== null) this.gate.firstAnswered() // a first call that failed lets the others go
    if (this.done) return
    this.done = true
    if (err instanceof SluiceError && err.code === 'ERR_ABORTED' && this.controller) return // the dispatcher reports it
    this.handler.onResponseError?.(this.proxy, err)
  }

  // --- the dispatcher's side ---
  onRequestStart(controller) {
    this.controller = controller
    if (this.aborter.signal.aborted) controller.abort(this.aborter.signal.reason)
  }

  onRequestUpgrade(controller, statusCode, headers, socket) {
    this.handler.onRequestUpgrade?.(this.proxy, statusCode, headers, socket)
  }

  onResponseStart(controller, statusCode, headers, statusMessage) {
    this.blocked = this.gate.observe(statusCode, fromObject(headers), this.sentMs)
    const retry = this.door.config.retry
    if (
      retry !== null &&
      replayable(this.opts.body) &&
      !this.aborter.signal.aborted &&
      this.door.retries(statusCode, this.method, this.attempt)
    ) {
      this.retrying = true
      return
    }
    this.handler.onResponseStart?.(this.proxy, statusCode, headers, statusMessage)
  }

  onResponseData(controller, chunk) {
    if (this.retrying) return
    this.handler.onResponseData?.(this.proxy, chunk)
  }

  onResponseEnd(controller, trailers) {
    if (!this.retrying) {
      this.done = true
      this.handler.onResponseEnd?.(this.proxy, trailers)
      return
    }
    this.again().catch((err) => this.fail(err))
  }

  onResponseError(controller, err) {
    if (this.gate !== null) this.gate.firstAnswered()
    if (this.done) return
    this.done = true
    this.handler.onResponseError?.(this.proxy, err)
  }

  /** Dispatches a retried request again: after the backoff (when no block was given), paced. */
  async again() {
    const seen = await this.blocked
    this.gate.counts.retries++
    const waitMs = this.door.backoffMs(this.attempt, seen)
    this.attempt++
    this.controller = null
    if (waitMs > 0) await sleep(this.door.store, waitMs, this.aborter.signal)
    await this.run()
  }
}

/**
 * `interceptor(options)` for undici 7: `new Agent().compose(interceptor(o))` paces every request
 * of the dispatcher (fetch, request, or a library given the dispatcher) as `pacedFetch` does,
 * with the same options (but `fetch`). Its `stats(key?)` counts per key.
 */
function interceptor(options) {
  const door = new FetchDoor(fetchConfig(options, false))
  const intercept = (dispatch) =>
    function pacedDispatch(opts, handler) {
      new PacedCall(door, dispatch, opts, handler).start()
      return true
    }
  intercept.stats = (key) => door.stats(key)
  return intercept
}

module.exports = { interceptor }
