// @ts-check
'use strict'

// The HTTP machinery over the Fetch API (a `Request` in, a `Response` out), with no Node req/res:
// `fetchAccess`, the accessors (lib/doors/http/adapter.d.ts `HttpAccess`) over a Request and the
// `FetchReply` its answer is built in, and `fetchLimiter`, a door wrapped around a fetch handler
// `(request) => Response`. A door of a Fetch-API framework (Hono, a Worker, Deno, Bun) builds on
// these pieces; the client address is the platform's to give (Hono's getConnInfo, Deno's
// `info.remoteAddr`, Bun's `server.requestIP`): the Fetch API has none.

const { Door, DOOR } = require('./door')
const { doorConfig } = require('./options')
const { admit } = require('./respond')
const { invalidConfig } = require('../../base/errors')

/** Each Request's rate limit info by property name (`rateLimitOf`): a Request's own fields are the platform's. */
const INFOS = new WeakMap()

/** What a request's answer is built in: the door's headers, the refusal, the end of the response. */
class FetchReply {
  constructor() {
    /** @type {[string, string, boolean][]} [name, value, append] the door wrote */
    this.headers = []
    /** @type {Response | null} the refusal, once answered */
    this.response = null
    /** @type {((finished: boolean, status: number) => void)[]} */
    this._ends = []
    this._ended = false
  }

  /**
   * `response` with the door's headers: the same Response when its headers can be written, a
   * copy when they cannot (a Response from fetch() has immutable headers).
   * @param {Response} response
   */
  withHeaders(response) {
    if (this.headers.length === 0) return response
    try {
      writeInto(response.headers, this.headers)
      return response
    } catch {
      const headers = new Headers(response.headers)
      writeInto(headers, this.headers)
      return new Response(response.body, { status: response.status, statusText: response.statusText, headers })
    }
  }

  /** @param {(finished: boolean, status: number) => void} listener */
  onEnd(listener) {
    this._ends.push(listener)
  }

  /** Ends the response, once: sent (`finished`) or not, with `status`. */
  end(finished, status) {
    if (this._ended) return
    this._ended = true
    for (const listener of this._ends) listener(finished, status)
  }
}

/** Writes the door's `[name, value, append]` into `headers` (append: a list field other doors may add to). */
function writeInto(headers, entries) {
  for (const [name, value, append] of entries) {
    if (append) headers.append(name, value)
    else headers.set(name, value)
  }
}

/** The refusal of `body` (`message`, or `handler`'s answer): a Response as it is, text, bytes, or JSON. */
function refusal(body, status) {
  if (body instanceof Response) return body
  if (body === undefined || body === null) return new Response(null, { status })
  if (typeof body === 'string') {
    return new Response(body, { status, headers: { 'content-type': 'text/plain; charset=utf-8' } })
  }
  if (body instanceof Uint8Array || body instanceof ArrayBuffer || body instanceof Blob) {
    return new Response(body, { status })
  }
  return Response.json(body, { status })
}

/**
 * The accessors over a Request and its FetchReply. `clientAddress(request)`: the client's
 * address (the default key), the platform's; none: a keyGenerator is needed.
 * @param {((request: Request) => string | undefined) | undefined} clientAddress
 * @returns {import('./adapter').HttpAccess<Request, FetchReply>}
 */
function fetchAccess(clientAddress) {
  return {
    clientAddress: (request) => (clientAddress ? clientAddress(request) : undefined),
    setInfo: (request, name, info) => {
      let infos = INFOS.get(request)
      if (infos === undefined) INFOS.set(request, (infos = {}))
      infos[name] = info
    },
    setHeader: (reply, name, value, append) => {
      reply.headers.push([name, value, append])
    },
    refuse: (reply, status, body) => {
      reply.response = reply.withHeaders(refusal(body, status))
    },
    onEnd: (reply, listener) => reply.onEnd(listener),
  }
}

/** The rate limit info a fetchLimiter put on `request` (its `requestPropertyName`, default 'rateLimit'). */
function rateLimitOf(request, name = 'rateLimit') {
  const infos = INFOS.get(request)
  return infos === undefined ? undefined : infos[name]
}

/**
 * `const limited = fetchLimiter({ store, limit: 100, windowMs: 60_000 }, { clientAddress })`,
 * then `await limited(request, handler)`: the handler's Response with the door's headers, or the
 * refusal (429, `Retry-After`, `message`), the handler not called. The HTTP doors' common options
 * (lib/doors/http/options.js); `handler(request, reply)` answers a refusal's body (a Response is
 * sent as it is, with the headers). A refund (skipFailedRequests, skipSuccessfulRequests) settles
 * when the handler's Response is made, by its status; a handler that throws failed (and rejects).
 * `defaults`: the door's defaults of the options (a framework's door gives its own).
 * @param {any} options
 * @param {{ clientAddress?: (request: Request) => string | undefined, defaults?: Record<string, unknown> }} [adapter]
 */
function fetchLimiter(options, { clientAddress, defaults = {} } = {}) {
  if (clientAddress !== undefined && typeof clientAddress !== 'function') {
    throw invalidConfig('clientAddress must be a function (request) => the client address')
  }
  if (clientAddress === undefined && !(options && options.keyGenerator)) {
    throw invalidConfig('the Fetch API has no client address: give clientAddress or a keyGenerator')
  }
  const door = new Door(doorConfig(options, { defaults, access: fetchAccess(clientAddress) }))
  /**
   * @param {Request} request
   * @param {(request: Request) => Response | Promise<Response>} handler
   */
  async function limited(request, handler) {
    const reply = new FetchReply()
    if (!(await admit(door, request, reply))) {
      const refused = /** @type {Response} */ (reply.response)
      reply.end(true, refused.status)
      return refused
    }
    let response
    try {
      response = await handler(request)
    } catch (err) {
      reply.end(false, 500)
      throw err
    }
    const answered = reply.withHeaders(response)
    reply.end(true, answered.status)
    return answered
  }
  Object.defineProperty(limited, DOOR, { value: door })
  return limited
}

module.exports = { fetchLimiter, fetchAccess, FetchReply, rateLimitOf, refusal }
