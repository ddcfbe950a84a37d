// @ts-check
'use strict'

// The end of a Node response, for the accessors of adapters over Node's http (sluice/express:
// `res`; sluice/fastify: `reply.raw`; Koa's `ctx.res`): the one place of lib/doors/http/ that
// knows Node's `http.ServerResponse`. The machinery itself reaches responses only through an
// adapter's `HttpAccess` (lib/doors/http/adapter.d.ts).

/**
 * What onNodeEnd reads of a Node response: `http.ServerResponse` is one.
 * @typedef {{ readonly statusCode: number, readonly writableFinished: boolean,
 *   once(event: 'finish' | 'close', listener: () => void): unknown }} NodeResponse
 */

/**
 * Calls `listener(finished, status)` once when Node response `res` ends: 'finish', sent in
 * full; 'close' before it, not (the connection ended first).
 * @param {NodeResponse} res
 * @param {(finished: boolean, status: number) => void} listener
 */
function onNodeEnd(res, listener) {
  let ended = false
  const end = (finished) => {
    if (ended) return
    ended = true
    listener(finished, res.statusCode)
  }
  res.once('finish', () => end(true))
  res.once('close', () => end(res.writableFinished))
}

module.exports = { onNodeEnd }
