// @ts-check
'use strict'
// An HTTP door (sluice/express, sluice/fastify, sluice/http) as the registry and statistics
// see it: one limiter of statistics kind `door`, named by the door's counter identifier,
// counting every request it decides over all its clients. It is no store kind: the counters
// of its clients are the limiters of its algorithm's kind (lib/kinds/<kind>.js `door`), kept
// out of the registry (a flood of client keys must not own it). Options in the registry:
// `{ algorithm, windows: [{ limit, windowMs }] }` (null for a limit or window given by a
// function). What the inspecting tools (lib/doors/inspect.js) do with it: its statistics, its limit
// in words, and one client's counter by its key (`sluice reset <door> --key K`).

const { longest } = require('./kind')

/** `100 per 60s, 1000 per 1h (window)`: a door's windows in words. */
function limitText(o, per) {
  const windows = Array.isArray(o.windows) ? o.windows : []
  const text = windows
    .map(
      (w) =>
        `${w.limit === null ? 'limit(req)' : w.limit} per ${w.windowMs === null ? 'windowMs(req)' : per(w.windowMs)}`,
    )
    .join(', ')
  return typeof o.algorithm === 'string' ? `${text} (${o.algorithm}) per client` : text
}

/** @satisfies {import('./contract').Registered} */
const door = {
  name: 'door',
  statsKinds: ['door'],
  statsFields: ['shadowRefused', 'denied'],
  /** the longest window (a client's counter lives that long); 0 when a function gives it */
  lifetimeMs: (o) => longest(o.windows, (w) => w.windowMs),
  inspect: {
    /** no one limiter: a door's state is its clients' counters */
    limiter: () => null,
    stats: (classes, store, info) => store._statsOf('door', info.name),
    limitText,
    /**
     * The counter (or counters, one per window) of the client of `key`, as the door made it
     * (null when its options do not say enough: a window given by a function). `http`: what
     * the site gives of the HTTP doors (lib/doors/inspect.js): their `algorithms` by name and
     * `counterName(name, key)`, the name of a client's counter.
     */
    keyLimiter(classes, store, info, key, http) {
      const o = info.options || {}
      const algorithm = http.algorithms.get(o.algorithm)
      const windows = Array.isArray(o.windows) ? o.windows : []
      if (algorithm === undefined || windows.length === 0 || algorithm.resettable === false) return null
      if (windows.some((w) => w === null || typeof w !== 'object' || !(w.windowMs > 0))) return null
      // a limit given by a function: any limit names the same counter (as Door.resetKey)
      const made = windows.map((w) => ({ limit: w.limit === null ? 1 : w.limit, windowMs: w.windowMs }))
      return algorithm.make(classes, store, http.counterName(info.name, key), made)
    },
  },
}

module.exports = door
