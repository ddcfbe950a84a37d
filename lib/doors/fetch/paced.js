'use strict'
// pacedFetch(options): a function with fetch's signature that waits for its key's slot (shared
// by every process on the store), sends, reads the answer (Retry-After, learned limits) and
// retries what the options allow, after the key's block and paced like every other call.

const { fetchConfig } = require('./options')
const { FetchDoor } = require('./door')
const { fromHeaders } = require('./headers')
const { sleep } = require('../../classes/base')

/** A WHATWG Request of any realm (Node's global one or undici's own class). */
function isRequest(input) {
  return (
    input !== null &&
    typeof input === 'object' &&
    !(input instanceof URL) &&
    typeof input.url === 'string' &&
    typeof input.method === 'string' &&
    typeof input.clone === 'function'
  )
}

/** Whether `body` (of `init`) can be sent again: a stream or an iterator cannot. */
function replayableBody(body) {
  if (body === undefined || body === null || typeof body === 'string') return true
  if (body instanceof ArrayBuffer || ArrayBuffer.isView(body)) return true
  if (body instanceof URLSearchParams) return true
  if (typeof Blob !== 'undefined' && body instanceof Blob) return true
  if (typeof FormData !== 'undefined' && body instanceof FormData) return true
  return false
}

/**
 * The Request `estimate(req)` and `settle(res, req)` are given: the call's own (a copy, its
 * body readable) or one made from `input` and `init` (a body that cannot be read twice, a
 * stream, is left out of it).
 */
function requestFor(input, init, request) {
  const base = request ? input.clone() : input instanceof URL ? input.href : String(input)
  if (init === undefined || init === null) return request ? base : new Request(base)
  const o = replayableBody(init.body) ? init : { ...init, body: undefined }
  try {
    return new Request(base, o)
  } catch {
    // e.g. a body on a GET: what the budget is told of is the call without it
    return new Request(base, { method: o.method, headers: o.headers })
  }
}

/**
 * Settles `reservation` from the answer (`settle(res, req)`, given a copy of the response so
 * the caller's body stays unread; without `settle`: as reserved). Runs beside the caller's
 * reading of the body; a `settle` that throws or answers amounts the budget refuses settles as
 * reserved, counted in `budgetErrors`. Never throws.
 */
async function settleFrom(config, gate, reservation, res, req) {
  let amounts = {}
  if (config.settle !== null) {
    try {
      amounts = await config.settle(res.clone(), req)
    } catch {
      gate.counts.budgetErrors++
      amounts = {}
    }
  }
  try {
    await reservation.settle(amounts)
  } catch {
    gate.counts.budgetErrors++
    await reservation.settle({}).catch(() => {}) // refused amounts: as reserved (else it expires as spent)
  }
}

/**
 * `pacedFetch(options)` returns `fetch(input, init)`: the call waits for its key's slot (default
 * key: the origin), is sent with the wrapped fetch (default: the global one), and its answer
 * is read: a 429/503 with Retry-After, or an exhausted quota, blocks the key in every process;
 * stated limits pace the key (never above `qps`); a status in `retry.statuses` of a method in
 * `retry.methods` is retried (its body drained) after the block, up to `retry.maxRetries`.
 * The last answer is returned as the wrapped fetch gave it. `stats(key?)` counts per key.
 */
function pacedFetch(options) {
  const config = fetchConfig(options, true)
  const door = new FetchDoor(config)
  const send = config.fetch
  async function fetch(input, init) {
    const request = isRequest(input)
    const url = new URL(request ? input.url : input instanceof URL ? input.href : String(input))
    const method = String((init && init.method) || (request ? input.method : 'GET')).toUpperCase()
    const signal = (init && init.signal) || (request ? input.signal : undefined) || undefined
    const gate = await door.gate(door.keyOf(url, init))
    // a budget: the call's estimate reserved before it is paced and sent
    let reservation = null
    let req = null
    if (config.budget !== null) {
      req = requestFor(input, init, request)
      const amounts = await config.estimate(req)
      const maxWaitMs = config.maxWaitMs
      reservation = await config.budget.reserve(amounts, { maxWaitMs, signal })
      gate.counts.reserved++
    }
    const retry = config.retry
    const replayable =
      retry !== null &&
      retry.maxRetries > 0 &&
      retry.methods.has(method) &&
      replayableBody(init ? init.body : undefined) &&
      !(request && input.bodyUsed)
    gate.counts.calls++
    let res
    try {
      for (let attempt = 0; ; attempt++) {
        const sentMs = await gate.admit(signal)
        const last = !replayable || attempt >= retry.maxRetries
        // a Request's body is read by the send: a copy goes out while another try may follow
        res = await send(request && !last && input.body !== null ? input.clone() : input, init)
        const seen = await gate.observe(res.status, fromHeaders(res.headers), sentMs)
        if (last || !door.retries(res.status, method, attempt)) break
        gate.counts.retries++
        if (res.body) await res.body.cancel().catch(() => {})
        const waitMs = door.backoffMs(attempt, seen)
        if (waitMs > 0) await sleep(door.store, waitMs, signal)
      }
    } catch (err) {
      gate.firstAnswered() // a first call that failed lets the others go
      // no answer to settle from (an abort, maxWaitMs, a network error, a retry that could not
      // wait): the reservation is given back whole
      if (reservation !== null) {
        gate.counts.cancelled++
        await reservation.cancel().catch(() => gate.counts.budgetErrors++)
      }
      throw err
    }
    if (reservation !== null) void settleFrom(config, gate, reservation, res, req)
    return res
  }
  fetch.stats = (key) => door.stats(key)
  return fetch
}

module.exports = { pacedFetch, isRequest, replayableBody, requestFor }
