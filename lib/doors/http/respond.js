// @ts-check
'use strict'

// What an HTTP door does with a request's outcome, through the adapter's accessors only
// (`config.access`, lib/doors/http/adapter.d.ts `HttpAccess`): the refund after the response
// (`settleAfter`), and `admit`, the whole answer to a request for a door with no peer's flow to
// copy (the Fetch-API adapter, lib/doors/http/fetch-api.js, and the next doors). sluice/express
// and sluice/fastify keep their peers' orders and refusals, and call the parts themselves.

const { invalidConfig } = require('../../base/errors')

/** @typedef {import('./adapter').HttpDoor} HttpDoor */
/** @typedef {import('./adapter').DoorOutcome} DoorOutcome */

/** The adapter's accessors of a door, or ERR_INVALID_CONFIG for a door that only decides. */
function accessOf(door) {
  const access = door.config.access
  if (access === null) throw invalidConfig('this door has no adapter access (DoorAdapter.access): it only decides')
  return access
}

/**
 * Gives the charge of `o` back once the response `res` ends, when skipFailedRequests or
 * skipSuccessfulRequests ask: the adapter calls back with whether the response was sent in
 * full (one that was not counts as failed) and its status (below 400: succeeded, unless
 * `requestWasSuccessful` says otherwise; a throw or a rejection of it: failed).
 * @param {HttpDoor} door
 * @param {DoorOutcome} o
 * @param {unknown} req
 * @param {unknown} res
 */
function settleAfter(door, o, req, res) {
  const c = door.config
  if (o.refund === null || (!c.skipFailedRequests && !c.skipSuccessfulRequests)) return
  const refund = o.refund
  const done = (success) => {
    if (success ? c.skipSuccessfulRequests : c.skipFailedRequests) refund().catch(() => {})
  }
  accessOf(door).onEnd(res, (finished, status) => {
    /** @type {any} a boolean, or a promise of one */
    let ok = false
    try {
      ok = finished && (typeof c.requestWasSuccessful === 'function' ? c.requestWasSuccessful(req, res) : status < 400)
    } catch {
      ok = false // a requestWasSuccessful that throws: the request did not succeed
    }
    // requestWasSuccessful may answer a promise (express-rate-limit awaits it); rejected: failed
    if (ok !== null && typeof ok === 'object' && typeof ok.then === 'function')
      ok.then(
        (v) => done(Boolean(v)),
        () => done(false),
      )
    else done(Boolean(ok))
  })
}

/**
 * Decides request `req` and answers it through the adapter's accessors: `req.rateLimit` (the
 * configured property), the headers, the refund after the response, and on a refusal its status
 * and body (`handler(req, res)`'s answer, else `message`, or `message(req, res)`'s). True: the
 * request goes on; false: it was refused (the refusal answered). Skipped (skip, allowList) or a
 * store failure passOnStoreError lets through: true, nothing written. Other errors reject.
 * @param {HttpDoor} door
 * @param {unknown} req
 * @param {unknown} res
 * @returns {Promise<boolean>}
 */
async function admit(door, req, res) {
  let o
  try {
    o = await door.decide(req, res)
  } catch (err) {
    if (door.passes(err)) return true
    throw err
  }
  if (o === null) return true
  door.attach(o, req)
  door.writeHeaders(o, res)
  door.settleAfter(o, req, res)
  if (o.allowed) return true
  accessOf(door).refuse(res, door.status(o), await refusalBody(door, req, res))
  return false
}

/** The body of a refusal: what `handler(req, res)` answers, else `message` (or `message(req, res)`'s). */
async function refusalBody(door, req, res) {
  const c = door.config
  const message = c.message
  if (typeof c.handler === 'function') return c.handler(req, res)
  return typeof message === 'function' ? message(req, res) : message
}

module.exports = { settleAfter, admit, accessOf, refusalBody }
