'use strict'
// What every kind file shares: the wrong-type marker of a result and its error, and the
// shape of a kind (documented here, implemented once per kind in lib/kinds/<kind>.js).
//
// A kind is a plain object:
// - `code`, `name`: its number and name in the registry (as src/store/kinds/mod.rs);
//   `lane`: the RedisStore pool connection its batches use; `OP`: its operation codes (from
//   the native registry, `OPS` below).
// - `statsKinds`: the kinds it counts statistics under; `lifetimeMs(options)`: how long the
//   store keeps a limiter's state, from its `_statsOptions()` (0: unknown).
// - `memory(store, call, degraded)`: runs one call on a MemoryStore, synchronously; answers
//   the decoded result (`degraded`: answered for a RedisStore whose Redis is down).
// - `cached(cache, call, atUs)` (optional): a RedisStore's local deny cache, before a call is
//   queued: the answer when the cache has one, else undefined.
// - `encode(calls, nowUs)`: a batch for native, `{ keys, nums, nowUs }` in the kind's call
//   layout (the store sends it on either lane, lib/store/lanes.js); `settle(store, out,
//   calls, resolve, reject)` decodes the reply (`out`: numbers read at once, the buffer is
//   reused; `{ values, text }` for a kind that answers strings), rejects a call whose marker
//   says wrong type;
//   `keyOf(call)`: a store key of the call (its hash slot is probed when Redis is down).
// - `alone(store, call, nowUs)` (optional): a call that is never batched (a call with
//   `alone: true`), e.g. a pacer's block, on the kind's pool lane.
// - `whenDown(policy, call)`: the answer while Redis is down, by the store-down policy (see
//   lib/store/whendown.js), or throws.
//
// How the sites above the stores see a kind (each optional: a kind with nothing to say for a
// site omits it). Classes are named as the package exports them (lib/classes/index.js); the
// sites pass that object in as `classes`, so a kind file never requires its classes (they are
// a layer above it). See lib/kinds/index.js `classEntry` for how a limiter object finds its entry.
// - `door` (HTTP doors, lib/doors/http/): `algorithms: { <algorithm>: { order, refunds,
//   resettable?, make(classes, store, name, windows), members?(limiter), check(door, limiter,
//   key, weight, windows, at) } }`: the door's `algorithm` names (`order`: where each is
//   listed in messages; `refunds`: skipFailedRequests/skipSuccessfulRequests allowed;
//   `resettable: false`: no resetKey), the limiter (or array of them) made for a door key of
//   `windows` `[{ limit, windowMs }]`, the made limiters a cache entry holds (default: the
//   array or the limiter), and the outcome of a request (`door.outcome(...)`; fill each
//   window's `remaining` and `resetMs`). `limiters: { <ClassName>: { refunds, check(door,
//   limiter, key, weight, at) } }`: what `limiter(req)` may return, and its outcome (windows
//   named by `door.named(windows)`).
// - `inspect` (lib/doors/inspect.js: CLI, sluice/dashboard, sluice/metrics): `limiter(classes,
//   store, info)` a limiter object from a registry entry `{ kind, name, options }` (null: none),
//   `stats?(classes, store, info)` (default: the limiter's `stats()`), `keyLimiter?(classes,
//   store, info, key, http)` one client's counter of an HTTP door, `state?(limiter, info)`
//   its live state with `fill` 0..1 (none: `{ fill: null }`), `limitText(options, per,
//   info)` its limit in words, `words?(state, f)` its state in words (`f`: `count`, `ms`,
//   `interval`), `resettable` (`reset()` forgets its counts), `leasesHeld?(limiter)`,
//   `dimensionUse?(limiter)` (a budget's `{ [dimension]: { used, reserved } }`, sluice/metrics).
// - `bullmq` (sluice/bullmq): `{ <ClassName>: { role: 'rate' | 'pacer' | 'concurrent',
//   rateOf?(limiter) per second (rate), spacingMs?(limiter) (pacer), prefetch?, reserves?,
//   paces?, members?(limiter) } }`.

const native = require('../native')
const { SluiceError } = require('../base/errors')

/**
 * The operation codes and other numbers of each kind's calls, by kind name, as the native
 * registry exports them (src/store/kinds/<kind>: `OPS`): defined once, in Rust.
 */
const OPS = Object.fromEntries(native.kinds().map((k) => [k.name, Object.freeze({ ...k.ops })]))

/**
 * A call's marker in its result from Redis (the field that is never negative otherwise: a
 * limiter's `remaining`, a pacer member's delay, a sliding call's retry, a quota call's
 * timestamp, a fair call's first count, a concurrent operation's first value; see
 * src/store/kinds/mod.rs `WRONG_TYPE`): its key holds a value of another type, another
 * writer's, and nothing of the call was applied. Only that call rejects, with `wrongType`.
 */
const WRONG_TYPE = -2

/**
 * The error of such a call: ERR_SCRIPT, naming the limiter's kind and the key prefix, never
 * the key (a name can be a user's data).
 */
const wrongType = (what, keyPrefix) =>
  new SluiceError(
    'ERR_SCRIPT',
    `the key of this ${what} holds a value of another type: another writer uses sluice's key prefix ` +
      `${JSON.stringify(keyPrefix)}; this call was not applied`,
  )

/** `out[from..to)` copied (the result buffer is reused once a batch is settled). */
function numbers(out, from, to) {
  const copy = new Float64Array(to - from)
  for (let i = from; i < to; i++) copy[i - from] = out[i]
  return copy
}

/** The longest of `f(x)` over `list` (0 for an empty or missing list). */
const longest = (list, f) => (Array.isArray(list) ? list.reduce((m, x) => Math.max(m, Number(f(x)) || 0), 0) : 0)

/**
 * What the sites above the stores share for kinds whose limiters have several windows
 * (`windows: [{ limit, intervalMs }]`, decisions with `windows[].remaining`): inspect's state
 * from a decision that charged nothing, its words, and sluice/bullmq's sustained rate (the
 * slowest window's, per second).
 */
const windowed = {
  state(d) {
    const windows = d.windows.map((w) => ({ limit: w.limit, intervalMs: w.intervalMs, remaining: w.remaining }))
    return { windows, fill: Math.max(0, ...windows.map((w) => (w.limit > 0 ? 1 - w.remaining / w.limit : 1))) }
  },
  words: (st, f) =>
    st.windows.map((w) => `${f.count(w.remaining)}/${f.count(w.limit)} per ${f.interval(w.intervalMs)}`).join(', '),
  rateOf: (l) => Math.min(...l.windows.map((w) => (w.limit * 1000) / w.intervalMs)),
}

module.exports = { OPS, WRONG_TYPE, wrongType, longest, windowed, numbers }
