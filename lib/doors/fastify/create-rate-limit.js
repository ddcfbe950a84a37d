// @ts-check
'use strict'

// sluice/fastify's `fastify.createRateLimit(options)` (@fastify/rate-limit's): a check of a
// door (lib/doors/http/door.js) answered in the peer's terms, for places no route hook fits.

const { checkedKey } = require('../http/key')

/**
 * `fastify.createRateLimit(options)`: a check to call where no route hook fits (GraphQL
 * resolvers, tRPC): `await check(req, { increment })` answers the peer's `{ isAllowed, key,
 * max, timeWindow, remaining, ttl, ttlInSeconds, isExceeded, isBanned }` (`isAllowed`: the
 * allowList exempts the request, then only `{ isAllowed, key }`); `increment: false` reads
 * without charging. Its calls are counted as the peer's store counts them (refusals too: a
 * read after a refusal is `isExceeded`, `isBanned` past `ban` of them) on a door of one
 * 'window' (the default); the route hooks charge only what they admit.
 */
function checkFor(door) {
  return async function checkRateLimit(req, callOptions) {
    const raw = await door.rawKeyOf(req, undefined)
    const key = checkedKey(raw)
    // allowList sees the key as keyGenerator gave it (a number stays one, as in the peer)
    if (door.config.allowList !== null && (await door.allowListed(req, raw))) return { isAllowed: true, key: raw }
    const charge = !(callOptions && callOptions.increment === false)
    let o
    try {
      // counted as the peer's store counts: refusals too, so a read tells a window that refused
      o = await door.decide(req, undefined, key, charge, true)
    } catch (err) {
      if (!door.passes(err)) throw err
      // skipOnError: as the peer, nothing counted (a window of the configured size, all left)
      const w = door.config.windows === null ? undefined : door.config.windows[0]
      const max = w && w.limit !== null ? w.limit : 0
      return {
        isAllowed: false,
        key,
        max,
        timeWindow: w && w.windowMs !== null ? w.windowMs : 0,
        remaining: max,
        ttl: 0,
        ttlInSeconds: 0,
        isExceeded: false,
        isBanned: false,
      }
    }
    const main = o.windows[o.main]
    // a read of a key with nothing counted has no window yet (the peer's ttl 0)
    const ttl = !charge && main.remaining === main.limit ? 0 : main.resetMs
    return {
      isAllowed: false,
      key,
      max: main.limit,
      timeWindow: main.windowMs,
      remaining: main.remaining,
      ttl,
      ttlInSeconds: Math.ceil(ttl / 1000),
      isExceeded: !o.allowed,
      isBanned: o.banned === true,
    }
  }
}

module.exports = { checkFor }
