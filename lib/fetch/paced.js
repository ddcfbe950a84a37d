'use strict'
// pacedFetch(options): a function with fetch's signature that waits for its key's slot (shared
// by every process on the store), sends, reads the answer (Retry-After, learned limits) and
// retries what the options allow, after the key's block and paced like every other call.

const { fetchConfig } = require('./options')
const { Door } = require('./gate')
const { fromHeaders } = require('./headers')
const { sleep } = require('../limiter')

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
 * `pacedFetch(options)` returns `fetch(input, init)`: the call waits for its key's slot (default
 * key: the origin), is sent with the wrapped fetch (default: the global one), and its answer
 * is read: a 429/503 with Retry-After, or an exhausted quota, blocks the key in every process;
 * stated limits pace the key (never above `qps`); a status in `retry.statuses` of a method in
 * `retry.methods` is retried (its body drained) after the block, up to `retry.maxRetries`.
 * The last answer is returned as the wrapped fetch gave it. `stats(key?)` counts per key.
 */
function pacedFetch(options) {
  const config = fetchConfig(options, true)
  const door = new Door(config)
  const send = config.fetch
  async function fetch(input, init) {
    const request = isRequest(input)
    const url = new URL(request ? input.url : input instanceof URL ? input.href : String(input))
    const method = String((init && init.method) || (request ? input.method : 'GET')).toUpperCase()
    const signal = (init && init.signal) || (request ? input.signal : undefined) || undefined
    const gate = await door.gate(door.keyOf(url, init))
    const retry = config.retry
    const replayable =
      retry !== null &&
      retry.maxRetries > 0 &&
      retry.methods.has(method) &&
      replayableBody(init ? init.body : undefined) &&
      !(request && input.bodyUsed)
    gate.counts.calls++
    for (let attempt = 0; ; attempt++) {
      await gate.admit(signal)
      const last = !replayable || attempt >= retry.maxRetries
      // a Request's body is read by the send: a copy goes out while another try may follow
      const res = await send(request && !last && input.body !== null ? input.clone() : input, init)
      const blockMs = await gate.observe(res.status, fromHeaders(res.headers))
      if (last || !door.retries(res.status, method, attempt)) return res
      gate.counts.retries++
      if (res.body) await res.body.cancel().catch(() => {})
      const waitMs = gate.backoffMs(attempt, blockMs)
      if (waitMs > 0) await sleep(door.store, waitMs, signal)
    }
  }
  fetch.stats = (key) => door.stats(key)
  return fetch
}

module.exports = { pacedFetch, isRequest, replayableBody }
