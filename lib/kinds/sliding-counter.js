// @ts-check
'use strict'
// The approximate sliding window's kind (its limiter: SlidingCounterLimiter, lib/classes/): per window two
// counters (this calendar window's and the previous one's, weighted by its overlap with the
// sliding window: Cloudflare's estimate), several windows decided and charged together. Call:
// `{ owner, op, weight }`, the windows from the owner's `_spec`. Result: the kind's `call`
// fields, then its `window` fields per window (`RESULT`, named in
// src/store/kinds/sliding_counter.rs), the wrong-type marker in the call's `retry_after_us`.

const native = require('../native')
const { encodeParts } = require('../base/codec')
const { OPS, WRONG_TYPE, wrongType, longest, windowed, resultFields } = require('./kind')

const NATIVE_NAME = 'sliding_counter'
const CODE = native.kinds().find((k) => k.name === NATIVE_NAME).code
const OP = OPS[NATIVE_NAME]

class SlidingCounterCall {
  constructor(owner, op, weight) {
    this.owner = owner
    this.op = op
    this.weight = weight
  }
}

/** A result's fields (offsets), as Rust names them: the call's, then each window's after them. */
const RESULT = { call: resultFields(NATIVE_NAME, 'call'), window: resultFields(NATIVE_NAME, 'window') }
const { allowed: ALLOWED, retry_after_us: RETRY_US, size: HEAD } = RESULT.call
const { remaining: W_REMAINING, retry_after_us: W_RETRY_US, reset_after_us: W_RESET_US, size: EACH } = RESULT.window

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

function encode(calls, nowUs) {
  let length = 0
  for (const c of calls) length += 2 + c.owner._spec.length
  const nums = new Float64Array(length)
  let at = 0
  for (const c of calls) at = put(nums, at, c)
  return { keys: encodeParts(calls.map((c) => c.owner._key)), nums, nowUs }
}

// --- How the sites above the stores see it (lib/kinds/contract.d.ts)

/** A window `dw` of its Decision as door window `w`: if it refuses, until it admits; else its full reset. */
function fromWindow(w, dw) {
  w.remaining = dw.remaining
  w.resetMs = dw.retryAfterMs > 0 ? dw.retryAfterMs : dw.resetAfterMs
  return w
}

/** The door's answer for `d`, a decision of `limiter` on door windows `windows`. */
function doorOutcome(door, limiter, key, weight, windows, d, at) {
  windows.forEach((w, i) => fromWindow(w, d.windows[i]))
  const refund = door.refundOf(limiter, weight, d, at)
  return door.outcome(key, weight, windows, d.allowed, d.degraded, d.retryAfterMs, refund, at)
}

/** @satisfies {import('./contract').DoorSection} */
const doorSection = {
  algorithms: {
    'sliding-counter': {
      order: 6,
      refunds: true,
      /** One limiter of every window, charged together in one call. */
      make: (classes, store, name, windows) =>
        new classes.SlidingCounterLimiter(store, {
          name,
          windows: windows.map((w) => ({ limit: w.limit, intervalMs: w.windowMs })),
        }),
      async check(door, limiter, key, weight, windows, at) {
        return doorOutcome(door, limiter, key, weight, windows, await limiter.check(weight), at)
      },
    },
  },
  limiters: {
    SlidingCounterLimiter: {
      refunds: true,
      async check(door, limiter, key, weight, at) {
        const windows = limiter.windows.map((w) => ({ name: '', limit: w.limit, windowMs: w.intervalMs }))
        const d = await limiter.check(weight)
        return doorOutcome(door, limiter, key, weight, door.named(windows), d, at)
      },
    },
  },
}

/** @satisfies {import('./contract').InspectSection} */
const inspectSection = {
  resettable: true,
  limiter: (classes, store, { name, options: o }) =>
    new classes.SlidingCounterLimiter(store, { name, windows: o.windows }),
  state: async (limiter) => windowed.state(await limiter.peek()),
  limitText: (o, per) => (o.windows || []).map((w) => `~${w.limit} / ${per(w.intervalMs)}`).join(', '),
  words: windowed.words,
}

/** sluice/bullmq: a rate limiter whose sustained rate is its slowest window's. */
/** @satisfies {import('./contract').Kind['bullmq']} */
const bullmqSection = {
  SlidingCounterLimiter: {
    role: 'rate',
    rateOf: windowed.rateOf,
  },
}

/** @satisfies {import('./contract').Kind<SlidingCounterCall> & import('./contract').Own<'RESULT'>} */
const slidingCounter = {
  code: CODE,
  name: 'sliding-counter',
  lane: CODE,
  OP,
  RESULT,
  Call: SlidingCounterCall,
  statsKinds: ['sliding-counter'],
  // the previous calendar window still counts for a whole interval after it ends
  lifetimeMs: (o) => 2 * longest(o.windows, (w) => w.intervalMs),

  memory(store, c, degraded) {
    const b = encode([c], store._begin())
    return c.owner._decision(native.memoryCall(store._handle, CODE, b.keys, b.nums, b.nowUs), 0, degraded)
  },

  encode,
  keyOf: (c) => c.owner._key,

  settle(store, out, calls, resolve, reject) {
    let o = 0
    for (let e = 0; e < calls.length; e++) {
      const c = calls[e]
      if (out[o + RETRY_US] === WRONG_TYPE) reject[e](wrongType('sliding-counter limiter', store.keyPrefix))
      else resolve[e](c.owner._decision(out, o, false))
      o += resultLength(c.owner)
    }
  },

  /** As the rate limiters': 'local' decides on the embedded store; a reset or a block needs Redis. */
  whenDown(policy, c) {
    const owner = c.owner
    if (policy.mode === 'local') return slidingCounter.memory(policy.local, c, true)
    if (c.op === OP.reset || c.op === OP.block) throw policy.error
    const windows = owner._windows
    const out = new Float64Array(resultLength(owner))
    if (policy.mode === 'allow' || c.op === OP.adjust) {
      out[ALLOWED] = 1
      const charge = c.op === OP.take ? c.weight : 0
      for (let i = 0; i < windows.length; i++)
        out[HEAD + EACH * i + W_REMAINING] = Math.max(0, windows[i].limit - charge)
    } else {
      out[RETRY_US] = policy.retryUs
      for (let i = 0; i < windows.length; i++) {
        out[HEAD + EACH * i + W_RETRY_US] = out[HEAD + EACH * i + W_RESET_US] = policy.retryUs
      }
    }
    return owner._decision(out, 0, true)
  },
  door: doorSection,
  inspect: inspectSection,
  bullmq: bullmqSection,
}

module.exports = slidingCounter
