// @ts-check
'use strict'
// The approximate sliding window's kind (its limiter: SlidingCounterLimiter, lib/classes/): per window two
// counters (this calendar window's and the previous one's, weighted by its overlap with the
// sliding window: Cloudflare's estimate), several windows decided and charged together. Call:
// `{ owner, op, weight }`, the windows from the owner's `_spec`. Result: the kind's `call`
// fields, then its `window` fields per window (`RESULT`, named in
// src/store/kinds/sliding_counter.rs), the wrong-type marker in the call's `retry_after_us`.

const native = require('../native')
const { OPS, longest } = require('./kind')
const windowed = require('./windowed')

const NATIVE_NAME = 'sliding_counter'
const CODE = native.kinds().find((k) => k.name === NATIVE_NAME).code
const OP = OPS[NATIVE_NAME]

class SlidingCounterCall {
  /** `windows`, `spec`: the windows decided on, the owner's or a rule's (store.rules) */
  constructor(owner, op, weight, windows = owner._windows, spec = owner._spec) {
    this.owner = owner
    this.op = op
    this.weight = weight
    this.windows = windows
    this.spec = spec
  }
}

/** The result's layout: the call's fields, then each window's after them, as Rust names them. */
const L = windowed.layout(NATIVE_NAME)
const { RESULT } = L
const { retry_after_us: W_RETRY_US, reset_after_us: W_RESET_US } = RESULT.window

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

/** The inspecting tools' view (state from a peek) and sluice/bullmq's; its limits are estimates ('~'). */
const sections = windowed.sections('SlidingCounterLimiter', (limiter) => limiter.peek(), true)

/** @satisfies {import('./contract').Kind<SlidingCounterCall> & import('./contract').Own<'RESULT'>} */
const slidingCounter = {
  code: CODE,
  name: 'sliding-counter',
  lane: CODE,
  OP,
  RESULT,
  Call: SlidingCounterCall,
  statsKinds: ['sliding-counter'],
  statsFields: ['shadowRefused', 'denied'],
  // the previous calendar window still counts for a whole interval after it ends
  lifetimeMs: (o) => 2 * longest(o.windows, (w) => w.intervalMs),

  memory: (store, c, degraded) => windowed.memory(CODE, store, c, degraded),
  encode: windowed.encode,
  keyOf: (c) => c.owner._storeKey,

  settle(store, out, calls, resolve, reject) {
    windowed.settle(L, 'sliding-counter limiter', store, out, calls, resolve, reject)
  },

  /** As the rate limiters': 'local' decides on the embedded store; a reset or a block needs Redis. */
  whenDown(policy, c) {
    if (policy.mode === 'local') return slidingCounter.memory(policy.local, c, true)
    if (c.op === OP.reset || c.op === OP.block) throw policy.error
    const allow = policy.mode === 'allow' || c.op === OP.adjust
    return windowed.answerDown(L, policy, c, allow, c.op === OP.take, [W_RETRY_US, W_RESET_US])
  },
  door: doorSection,
  inspect: sections.inspect,
  bullmq: sections.bullmq,
}

module.exports = slidingCounter
