// @ts-check
'use strict'
// The sliding windows' kind (SlidingWindowLimiter): several exact sliding windows decided and
// charged together. Call: `{ owner, op, weight, atUs }`, the windows from the owner's `_spec`
// (`[windows, (limit, intervalUs) per window]`). Result: the kind's `call` fields, then its
// `window` fields per window (`RESULT`, named in src/store/kinds/sliding.rs), the marker in
// the call's `retry_after_us`.

const { OPS, longest } = require('./kind')
const windowed = require('./windowed')

const { take, peek, reset, block } = OPS.sliding
const OP = { take, peek, reset, block }

class SlidingCall {
  /** `windows`, `spec`: the windows decided on, the owner's or a rule's (store.rules) */
  constructor(owner, op, weight, windows = owner._windows, spec = owner._spec) {
    this.owner = owner
    this.op = op
    this.weight = weight
    this.windows = windows
    this.spec = spec
    /** when the deny cache was asked (local µs) */
    this.atUs = 0
  }
}

/** The result's layout: the call's fields, then each window's after them, as Rust names them. */
const L = windowed.layout('sliding')
const { RESULT, ALLOWED, RETRY_US, HEAD, EACH, W_RETRY_US, resultLength } = L

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

/** The inspecting tools' view (state from a peek of weight 0: it charges nothing) and sluice/bullmq's. */
const sections = windowed.sections('SlidingWindowLimiter', (limiter) => limiter.peek(0), false)

/** @satisfies {import('./contract').Kind<SlidingCall> & import('./contract').Own<'RESULT'>} */
const sliding = {
  code: 2,
  name: 'sliding',
  lane: 3,
  OP,
  RESULT,
  Call: SlidingCall,
  statsKinds: ['sliding'],
  statsFields: ['shadowRefused', 'denied'],
  lifetimeMs: (o) => longest(o.windows, (w) => w.intervalMs),

  memory: (store, c, degraded) => windowed.memory(sliding.code, store, c, degraded),

  cached(cache, c, atUs) {
    c.atUs = atUs
    const key = c.owner._storeKey
    if (c.op === OP.take && c.spec === c.owner._spec) {
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

  encode: windowed.encode,
  keyOf: (c) => c.owner._storeKey,

  settle(store, out, calls, resolve, reject) {
    const cache = store._denyCache
    const remember = (c, o) => {
      if (c.op === OP.take && out[o + ALLOWED] === 0 && c.spec === c.owner._spec) {
        cache.set(
          c.owner._storeKey,
          c.owner._sig,
          c.weight,
          c.atUs,
          out[o + RETRY_US],
          out.slice(o, o + resultLength(c)),
        )
      }
    }
    windowed.settle(L, 'sliding-window limiter', store, out, calls, resolve, reject, cache === null ? null : remember)
  },

  /** As the rate limiters' (lib/kinds/limit.js): a reset or a block needs Redis except under 'local'. */
  whenDown(policy, c) {
    if (policy.mode === 'local') return sliding.memory(policy.local, c, true)
    if (c.op === OP.reset || c.op === OP.block) throw policy.error
    return windowed.answerDown(L, policy, c, policy.mode === 'allow', c.op === OP.take, [W_RETRY_US])
  },
  door: doorSection,
  inspect: sections.inspect,
  bullmq: sections.bullmq,
}

module.exports = sliding
