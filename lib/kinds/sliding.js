// @ts-check
'use strict'
// The sliding windows' kind (SlidingWindowLimiter): several exact sliding windows decided and
// charged together. Call: `{ owner, op, weight, atUs }`, the windows from the owner's `_spec`
// (`[windows, (limit, intervalUs) per window]`). Result: the kind's `call` fields, then its
// `window` fields per window (`RESULT`, named in src/store/kinds/sliding.rs), the marker in
// the call's `retry_after_us`.

const native = require('../native')
const { encodeParts } = require('../base/codec')
const { OPS, WRONG_TYPE, wrongType, longest, windowed, resultFields } = require('./kind')

const { take, peek, reset, block } = OPS.sliding
const OP = { take, peek, reset, block }

class SlidingCall {
  constructor(owner, op, weight) {
    this.owner = owner
    this.op = op
    this.weight = weight
    /** when the deny cache was asked (local µs) */
    this.atUs = 0
  }
}

/** A result's fields (offsets), as Rust names them: the call's, then each window's after them. */
const RESULT = { call: resultFields('sliding', 'call'), window: resultFields('sliding', 'window') }
const { allowed: ALLOWED, retry_after_us: RETRY_US, size: HEAD } = RESULT.call
const { remaining: W_REMAINING, retry_after_us: W_RETRY_US, size: EACH } = RESULT.window

/** Numbers of the result of a call of `owner`. */
const resultLength = (owner) => HEAD + EACH * owner._windows.length

/** Appends the numbers of call `c` to `nums` from `at`; returns where they end. */
function put(nums, at, c) {
  const spec = c.owner._spec
  nums[at] = c.op
  nums[at + 1] = c.weight
  for (let i = 0; i < spec.length; i++) nums[at + 2 + i] = spec[i]
  return at + 2 + spec.length
}

// --- How the sites above the stores see a sliding-window limiter (lib/kinds/contract.d.ts)

/**
 * A sliding window's part `dw` of its Decision as door window `w`. It names no reset: until
 * it has room (refused), else its length at most.
 */
function fromSliding(w, dw) {
  w.remaining = dw.remaining
  w.resetMs = dw.retryAfterMs > 0 ? dw.retryAfterMs : w.windowMs
  return w
}

/** @satisfies {import('./contract').DoorSection} */
const doorSection = {
  algorithms: {
    sliding: {
      order: 3,
      refunds: false,
      /** One limiter of every window, charged together. */
      make: (classes, store, name, windows) =>
        new classes.SlidingWindowLimiter(store, {
          name,
          windows: windows.map((w) => ({ limit: w.limit, intervalMs: w.windowMs })),
        }),
      async check(door, limiter, key, weight, windows, at) {
        const d = await limiter.check(weight)
        windows.forEach((w, i) => fromSliding(w, d.windows[i]))
        return door.outcome(key, weight, windows, d.allowed, d.degraded, d.retryAfterMs, null, at)
      },
    },
  },
  limiters: {
    SlidingWindowLimiter: {
      refunds: false,
      async check(door, limiter, key, weight, at) {
        if (door.config.refunds) throw door.noRefund()
        const d = await limiter.check(weight)
        const windows = limiter.windows.map((w, i) =>
          fromSliding({ name: '', limit: w.limit, windowMs: w.intervalMs }, d.windows[i]),
        )
        return door.outcome(key, weight, door.named(windows), d.allowed, d.degraded, d.retryAfterMs, null, at)
      },
    },
  },
}

/** @satisfies {import('./contract').InspectSection} */
const inspectSection = {
  resettable: true,
  limiter: (classes, store, { name, options: o }) =>
    new classes.SlidingWindowLimiter(store, { name, windows: o.windows }),
  state: async (limiter) => windowed.state(await limiter.peek(0)),
  limitText: (o, per) => (o.windows || []).map((w) => `${w.limit} / ${per(w.intervalMs)}`).join(', '),
  words: windowed.words,
}

/** sluice/bullmq: a rate limiter whose sustained rate is its slowest window's. */
/** @satisfies {import('./contract').Kind['bullmq']} */
const bullmqSection = {
  SlidingWindowLimiter: {
    role: 'rate',
    rateOf: windowed.rateOf,
  },
}

/** @satisfies {import('./contract').Kind<SlidingCall> & import('./contract').Own<'RESULT'>} */
const sliding = {
  code: 2,
  name: 'sliding',
  lane: 3,
  OP,
  RESULT,
  Call: SlidingCall,
  statsKinds: ['sliding'],
  lifetimeMs: (o) => longest(o.windows, (w) => w.intervalMs),

  memory(store, c, degraded) {
    const nowUs = store._begin()
    const nums = new Float64Array(2 + c.owner._spec.length)
    put(nums, 0, c)
    const out = native.memoryCall(store._handle, sliding.code, encodeParts([c.owner._key]), nums, nowUs)
    return c.owner._decision(out, 0, degraded)
  },

  cached(cache, c, atUs) {
    c.atUs = atUs
    const key = c.owner._key
    if (c.op === OP.take) {
      const hit = cache.get(key, c.owner._sig, c.weight, atUs)
      if (hit === null) return undefined
      const out = hit.values.slice()
      const elapsedUs = atUs - hit.atUs
      out[RETRY_US] = hit.untilUs - atUs
      for (let i = HEAD + W_RETRY_US; i < out.length; i += EACH) out[i] = Math.max(0, out[i] - elapsedUs)
      return c.owner._decision(out, 0, false)
    }
    if (c.op === OP.reset) cache.delete(key)
    return undefined
  },

  encode(calls, nowUs) {
    let length = 0
    for (const c of calls) length += 2 + c.owner._spec.length
    const nums = new Float64Array(length)
    let at = 0
    for (const c of calls) at = put(nums, at, c)
    return { keys: encodeParts(calls.map((c) => c.owner._key)), nums, nowUs }
  },
  keyOf: (c) => c.owner._key,

  settle(store, out, calls, resolve, reject) {
    const cache = store._denyCache
    let o = 0
    for (let e = 0; e < calls.length; e++) {
      const c = calls[e]
      const length = resultLength(c.owner)
      if (out[o + RETRY_US] === WRONG_TYPE) {
        reject[e](wrongType('sliding-window limiter', store.keyPrefix))
        o += length
        continue
      }
      if (cache !== null && c.op === OP.take && out[o + ALLOWED] === 0) {
        cache.set(c.owner._key, c.owner._sig, c.weight, c.atUs, out[o + RETRY_US], out.slice(o, o + length))
      }
      resolve[e](c.owner._decision(out, o, false))
      o += length
    }
  },

  /** As the rate limiters' (lib/kinds/limit.js): a reset or a block needs Redis except under 'local'. */
  whenDown(policy, c) {
    const owner = c.owner
    if (policy.mode === 'local') return sliding.memory(policy.local, c, true)
    if (c.op === OP.reset || c.op === OP.block) throw policy.error
    const windows = owner._windows
    const out = new Float64Array(resultLength(owner))
    if (policy.mode === 'allow') {
      out[ALLOWED] = 1
      const charge = c.op === OP.take ? c.weight : 0
      for (let i = 0; i < windows.length; i++)
        out[HEAD + EACH * i + W_REMAINING] = Math.max(0, windows[i].limit - charge)
    } else {
      out[RETRY_US] = policy.retryUs
      for (let i = 0; i < windows.length; i++) out[HEAD + EACH * i + W_RETRY_US] = policy.retryUs
    }
    return owner._decision(out, 0, true)
  },
  door: doorSection,
  inspect: inspectSection,
  bullmq: bullmqSection,
}

module.exports = sliding
