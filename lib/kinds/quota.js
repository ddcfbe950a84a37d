// @ts-check
'use strict'
// The quotas' kind (QuotaLimiter, Sentry's sliding-window quotas). Call: `{ keys, nums, mode,
// timestamp }`: the distinct counters' keys (in the codec's encoding) and `nums` =
// `[counters, (window, granularity) per counter, requests, (amount, quotas, (counter, limit)
// per quota) per request]`. Result: the kind's `call` fields (its length), then (nothing for
// `use`) its `grants` fields, per request its `request` fields and per quota of the request its
// `quota` fields (`RESULT`, named in src/store/kinds/quota), the marker in `timestamp`; a call
// resolves with what follows its `call` fields.

const native = require('../native')
const { OPS, WRONG_TYPE, numbers, wrongType, longest, degraded, resultFields } = require('./kind')

const { check, checkAndUse, use } = OPS.quota
const MODE = { check, checkAndUse, use }

/** A result's groups of fields (offsets) and widths, as Rust names them. */
const RESULT = {
  call: resultFields('quota', 'call'),
  grants: resultFields('quota', 'grants'),
  request: resultFields('quota', 'request'),
  quota: resultFields('quota', 'quota'),
}
const { length: LENGTH, size: HEAD } = RESULT.call
const { timestamp: TIMESTAMP, size: GRANTS } = RESULT.grants
const { granted: GRANTED, size: REQUEST } = RESULT.request
const { reached: REACHED, size: QUOTA } = RESULT.quota

class QuotaCall {
  /** `timestamp`: seconds, or -1 for the store's clock (read now when it is a ManualClock). */
  constructor(store, keys, nums, mode, timestamp) {
    this.keys = keys
    this.nums = nums
    this.mode = mode
    this.timestamp = timestamp
    /** the timestamp Redis is given: a ManualClock's time is read when the call is made */
    this.redisTimestamp = timestamp === -1 && store.clock ? Math.floor(store.clock.now() / 1000) : timestamp
  }
}

/** Writes call `c` at `timestamp` into `nums` from `at`; returns where it ends. */
function put(nums, at, c, timestamp) {
  nums[at] = c.nums.length
  nums[at + 1] = c.mode
  nums[at + 2] = timestamp
  nums.set(c.nums, at + 3)
  return at + 3 + c.nums.length
}

/** Call `c` on the embedded store `store` at `timestamp`: its result without its length. */
function run(store, c, timestamp) {
  const nums = new Float64Array(3 + c.nums.length)
  put(nums, 0, c, timestamp)
  const out = /** @type {number[]} */ (native.memoryCall(store._handle, quota.code, c.keys, nums, store._begin()))
  out.splice(0, HEAD) // the call's own fields (its length): one call
  return out
}

// --- How the sites above the stores see the quotas (lib/kinds/contract.d.ts)

/** A quota prefix has no limiter object of its own: its statistics are read through one. */
/** @satisfies {import('./contract').InspectSection} */
const inspectSection = {
  limiter: () => null,
  stats: (classes, store, info) => new classes.QuotaLimiter(store).stats(info.name),
  limitText: (o) => `${(o.quotas || []).length} quota${(o.quotas || []).length === 1 ? '' : 's'}`,
}

/** @satisfies {import('./contract').Kind<QuotaCall> & import('./contract').Own<'MODE' | 'RESULT'>} */
const quota = {
  code: 3,
  name: 'quota',
  lane: 4,
  MODE,
  RESULT,
  Call: QuotaCall,
  statsKinds: ['quota'],
  lifetimeMs: (o) => longest(o.quotas, (q) => q.windowSeconds * 1000),

  /** Answers `[timestamp, ...]` (the result without its length). */
  memory(store, c) {
    return run(store, c, c.timestamp)
  },

  /**
   * Calls in the quota kind's layout: their counters' keys in turn (each call's `keys` is
   * already encoded), and per call `[length, mode, timestamp, ...nums]`.
   */
  encode(calls) {
    let length = 0
    let keys = ''
    for (const c of calls) {
      length += 3 + c.nums.length
      keys += c.keys
    }
    const nums = new Float64Array(length)
    let at = 0
    for (const c of calls) at = put(nums, at, c, c.redisTimestamp)
    return { keys, nums, nowUs: -1 }
  },
  keyOf: (c) => c.keys,

  settle(store, out, calls, resolve, reject) {
    let o = 0
    for (let e = 0; e < calls.length; e++) {
      const length = out[o + LENGTH]
      // the timestamp is the marker
      if (out[o + HEAD + TIMESTAMP] === WRONG_TYPE) reject[e](wrongType('quota', store.keyPrefix))
      else resolve[e](numbers(out, o + HEAD, o + HEAD + length))
      o += HEAD + length
    }
  },

  /**
   * Flagged `degraded`: 'allow' grants what was requested, 'deny' grants nothing (every quota
   * reached), 'local' decides on the embedded store; `useQuotas` is dropped under 'allow' and
   * 'deny'.
   */
  whenDown(policy, c) {
    let out
    if (policy.mode === 'local') {
      const local = policy.local
      out = Float64Array.from(run(local, c, c.redisTimestamp))
    } else {
      const nums = c.nums
      const counters = nums[0]
      let i = 1 + 2 * counters
      const requests = nums[i++]
      const values = new Array(GRANTS).fill(0)
      values[TIMESTAMP] = c.redisTimestamp >= 0 ? c.redisTimestamp : Math.floor(policy.nowUs() / 1e6)
      const allow = policy.mode === 'allow'
      for (let r = 0; r < requests; r++) {
        const amount = nums[i]
        const quotas = nums[i + 1]
        i += 2 + 2 * quotas
        const request = new Array(REQUEST).fill(0)
        request[GRANTED] = allow ? amount : 0
        values.push(...request)
        for (let j = 0; j < quotas; j++) {
          const quota = new Array(QUOTA).fill(0)
          quota[REACHED] = allow ? 0 : 1
          values.push(...quota)
        }
      }
      out = new Float64Array(c.mode === MODE.use ? 0 : values.length)
      if (c.mode !== MODE.use) out.set(values)
    }
    return degraded(out)
  },
  inspect: inspectSection,
}

module.exports = quota
