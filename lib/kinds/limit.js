// @ts-check
'use strict'
// The rate limiters' kind (BucketLimiter, WindowLimiter, LeakyLimiter, PointsLimiter): one
// decision per call. Call: `{ owner, weight, maxWaitUs, count, atUs }`, where `maxWaitUs` >= 0
// is a take (waiting up to it, leaky and points) and an OP below anything else. Result: the
// kind's `entry` fields (`RESULT`, named in src/store/kinds/limit.rs), the marker in `remaining`.

const native = require('../native')
const { appendPart } = require('../base/codec')
const { OPS, WRONG_TYPE, wrongType, resultFields } = require('./kind')
const { input } = require('../store/slots')
const { storeKey } = require('../store/keys')

const { bucket, window, leaky, adjust, reset, peek, block, group, member, backoff, tally } = OPS.limit
const cont = OPS.limit.continue
const { throttle } = OPS.limit
/** The algorithms (the owner's `_kind`); points is leaky with other names. */
const ALGORITHM = { bucket, window, leaky, points: leaky }
/**
 * Operations other than a take, in the `maxWaitUs` field (backoff: a window's, see
 * core/window.rs; throttle: a window's, @nestjs/throttler's count and block, the block's µs as
 * the weight, see core/limit/mod.rs).
 */
const OP = { adjust, reset, peek, block, backoff, continue: cont, throttle }
/** Numbers per call in a batch. */
const WIDTH = 5
/** A decision's fields (offsets in its result) and its width, as Rust names them. */
const RESULT = resultFields('limit', 'entry')
const { allowed: ALLOWED, remaining: REMAINING, retry_after_us: RETRY_US, reset_after_us: RESET_US } = RESULT
const SIZE = RESULT.size

/** A decision's result from its fields (an answer made without the store). */
function entry(allowed, remaining, retryUs, resetUs) {
  const out = new Array(SIZE).fill(0)
  out[ALLOWED] = allowed
  out[REMAINING] = remaining
  out[RETRY_US] = retryUs
  out[RESET_US] = resetUs
  return out
}

/** The kind's code in the native registry, and its pool lane (a group call's too). */
const CODE = 1
const LANE = 1

class LimitCall {
  /**
   * `owner`: the limiter; `count`: count the decision in statistics (a check); `limit`: the
   * limit decided against (the owner's, or the doors' count of every request: a limit no count
   * reaches, never answered from nor kept in the deny cache).
   */
  constructor(owner, weight, maxWaitUs, count, limit = owner._limit, intervalUs = owner._intervalUs) {
    this.owner = owner
    this.weight = weight
    this.maxWaitUs = maxWaitUs
    this.count = count
    this.limit = limit
    /** the interval decided over: the owner's, or a rule's (store.rules) */
    this.intervalUs = intervalUs
    /** a rule's limit, shown in the decision (0: the owner's) */
    this.ruled = 0
    /** when the deny cache was asked (local µs) */
    this.atUs = 0
  }
}

/** The decision of `c` at `out[o..]`, counted when `c.count`. */
function decide(c, out, o, degraded) {
  const d = c.owner._decision(out, o, degraded)
  if (c.ruled !== 0) d.limit = c.ruled
  if (c.count) c.owner._count(d, c.weight)
  return d
}

// --- Several limiters in one call: all-or-nothing takes, refunds, resets -------------------

/**
 * One call over several limiters (`owners`, distinct keys in one hash slot), sent alone (never
 * batched): `op` 'group' takes `weight` from every owner only if each admits (peeked first, in
 * the same script call; else nothing is charged), `adjust` or `reset` applies to each; 0 (one
 * owner) a take. `tally` (`{ key, limit, intervalUs }`, a window key in the same slot, or null):
 * the call's refusal counted there in the same script call (an HTTP door's `ban`).
 */
class LimitGroupCall {
  constructor(owners, weight, op, count, tallied = null) {
    this.owners = owners
    this.weight = weight
    this.count = count
    this.alone = true
    this.text = ''
    this.tally = tallied
    this.nums = new Float64Array((owners.length + (tallied === null ? 0 : 1)) * WIDTH)
    for (let e = 0; e < owners.length; e++) {
      const owner = owners[e]
      this.text = appendPart(this.text, owner._storeKey)
      this.nums.set(
        [owner._kind, weight, owner._limit, owner._intervalUs, op === group && e > 0 ? member : op],
        e * WIDTH,
      )
    }
    if (tallied !== null) {
      this.text = appendPart(this.text, tallied.key)
      this.nums.set([window, 1, tallied.limit, tallied.intervalUs, tally], owners.length * WIDTH)
    }
  }
}

/**
 * A group call's answer: `{ allowed (all), degraded, decisions, refusals }`, each window
 * counted as the group went; `refusals`: the tally's count of refusals in its window (0 when
 * the call had no tally or it was answered without the store).
 */
function decideGroup(c, out, degraded) {
  const decisions = c.owners.map((owner, e) => owner._decision(out, SIZE * e, degraded))
  const allowed = decisions.every((d) => d.allowed)
  if (c.count) {
    c.owners.forEach((owner, e) => owner._count(allowed ? decisions[e] : { ...decisions[e], allowed }, c.weight))
  }
  let refusals = 0
  const t = SIZE * c.owners.length + REMAINING
  if (c.tally !== null && !degraded && out.length > t && out[t] !== WRONG_TYPE) refusals = c.tally.limit - out[t]
  return { allowed, degraded, decisions, refusals }
}

/** How a store runs a LimitGroupCall: `_call(limit.group, call)`. */
/** @satisfies {import('./contract').AloneKind<LimitGroupCall, any> & import('./contract').Own<'Call'>} */
const groupKind = {
  code: CODE,
  name: 'limit group',
  lane: LANE,
  Call: LimitGroupCall,
  memory(store, c, degraded) {
    const nowUs = store._begin()
    store._sweepFor(c.owners.length, nowUs)
    return decideGroup(c, native.memoryCall(store._handle, CODE, c.text, c.nums, nowUs), degraded)
  },
  async alone(store, c, nowUs) {
    const out = await store._poolCall(CODE, c.text, c.nums, nowUs, LANE)
    const wrong = c.owners.findIndex((_, e) => out[SIZE * e + REMAINING] === WRONG_TYPE)
    if (wrong >= 0) throw wrongType(`${c.owners[wrong]._statsKind} limiter`, store.keyPrefix)
    return decideGroup(c, out, false)
  },
  /** As `limit.whenDown`, for each owner. */
  whenDown(policy, c) {
    if (policy.mode === 'local') return limit.group.memory(policy.local, c, true)
    const op = c.nums[4]
    if (op === OP.reset) throw policy.error
    const out = c.owners.flatMap((owner) => {
      const max = owner._limit
      if (op === OP.adjust) return entry(1, max, 0, 0)
      if (policy.mode === 'allow') return entry(1, Math.max(0, max - c.weight), 0, 0)
      return entry(0, 0, policy.retryUs, policy.retryUs)
    })
    return decideGroup(c, out, true)
  },
  keyOf: (c) => c.owners[0]._storeKey,
}

/**
 * An HTTP door's several windows of one key (`members`, limiters whose keys share a hash
 * tag), decided all or nothing in one store call, refunded and reset in one call.
 */
class LimitGroup {
  constructor(members) {
    this.members = members
    this._store = members[0]._store
  }

  /** Takes `weight` from every window or none: `{ allowed, degraded, decisions }`. */
  check(weight) {
    return this._store._call(limit.group, new LimitGroupCall(this.members, weight, group, true))
  }

  /**
   * Gives back `weight` charged by `decisions` (a check made at `atMs`, elapsedMs' clock): one
   * adjust over the windows whose refund still lands in the window charged (as `_refund`).
   */
  refund(weight, decisions, atMs) {
    const owners = this.members.filter((l, i) => !decisions[i].degraded && l._refundable(decisions[i], atMs))
    if (owners.length === 0) return Promise.resolve(false)
    return this._store._call(limit.group, new LimitGroupCall(owners, -weight, OP.adjust, false)).then(() => true)
  }

  /** Forgets every window's counts. */
  async reset() {
    await this._store._call(limit.group, new LimitGroupCall(this.members, 0, OP.reset, false))
  }
}

// --- How the sites above the stores see a rate limiter (lib/kinds/contract.d.ts)

/** The limiter class of each statistics kind, by its name in the package's exports. */
const CLASS = { bucket: 'BucketLimiter', window: 'WindowLimiter', leaky: 'LeakyLimiter', points: 'PointsLimiter' }

/** A counter's Decision, as the store answered it, as door window `w`: remaining and reset. */
function fromDecision(w, d) {
  w.remaining = d.remaining
  w.resetMs = d.allowed ? d.resetAfterMs : d.retryAfterMs
  return w
}

/**
 * The outcome of a door's windows as group call `g` answered them (each window's remaining and
 * reset); `refundOf()` makes what gives an admitted charge back, when the door refunds.
 */
function groupOutcome(door, g, key, weight, windows, at, refundOf) {
  let retryAfterMs = 0
  g.decisions.forEach((d, i) => {
    fromDecision(windows[i], d)
    if (!d.allowed) retryAfterMs = Math.max(retryAfterMs, d.retryAfterMs)
  })
  const refund = g.allowed && weight > 0 && door.config.refunds ? refundOf() : null
  return door.outcome(key, weight, windows, g.allowed, g.degraded, retryAfterMs, refund, at)
}

/** A door's several windows, one all-or-nothing store call: each window as the store answered it. */
async function checkGroup(door, limiters, key, weight, windows, at) {
  const g = await limiters.check(weight)
  return groupOutcome(door, g, key, weight, windows, at, () => {
    const atE = door.elapsedAt(at)
    return () => limiters.refund(weight, g.decisions, atE)
  })
}

/**
 * A door key's windows (one limiter or a LimitGroup) decided with the refusal tallied
 * (`tallied`, see LimitGroupCall) in the same script call: the outcome, its `refusals` the
 * tally's count.
 */
async function checkTallied(door, limiter, key, weight, windows, at, tallied) {
  const several = limiter instanceof LimitGroup
  const members = several ? limiter.members : [limiter]
  const call = new LimitGroupCall(members, weight, several ? group : 0, true, tallied)
  const g = await members[0]._store._call(groupKind, call)
  const o = groupOutcome(door, g, key, weight, windows, at, () => {
    if (!several) return door.refundOf(limiter, weight, g.decisions[0], at)
    const atE = door.elapsedAt(at)
    return () => limiter.refund(weight, g.decisions, atE)
  })
  o.refusals = g.refusals
  return o
}

/**
 * The store key of window `i` of a door's several windows of counter `name`: one hash tag per
 * door key, so the windows share a slot (one script call on a cluster); `v2` sets it apart from
 * the one-window layout `<prefix>:<segment>:{<name>}`, which stays.
 */
const groupKey = (store, segment, name, i) => storeKey(store, segment, name, 2, [i])

/** A door algorithm of counters of `statsKind`: one limiter per window. */
const counters = (statsKind, order) => ({
  order,
  refunds: true,
  /** a door of one window may lease (its options' `lease`: see lib/doors/http/options.js) */
  leases: true,
  make(classes, store, name, windows, lease = null) {
    const made = windows.map((w, i) => {
      const l = new classes[CLASS[statsKind]](store, {
        // `_<window>`: a second `_`, so never the name of one window of another key
        name: windows.length === 1 ? name : `${name}_${i}`,
        limit: w.limit,
        interval: w.windowMs,
        waitTimeoutMs: 0,
        // a lease's size is at most the counter's limit (a limit given per request may be small)
        lease:
          lease === null
            ? undefined
            : {
                maxAgeMs: lease.maxAgeMs,
                maxTokens: lease.maxTokens === null ? undefined : Math.min(lease.maxTokens, w.limit),
              },
      })
      // several windows: keys under one hash tag (statistics keep the window's name)
      return windows.length > 1 ? l._asWindow(name, i) : l
    })
    return made.length === 1 ? made[0] : new LimitGroup(made)
  },
  members: (limiter) => (limiter instanceof LimitGroup ? limiter.members : [limiter]),
  async check(door, limiter, key, weight, windows, at) {
    // a door's `ban`: the refusal tallied in the decision's own script call
    const tallied =
      door.config.ban === null
        ? null
        : door.tallyOf(limiter instanceof LimitGroup ? limiter.members[0]._window.group : limiter.name)
    if (tallied !== null) return checkTallied(door, limiter, key, weight, windows, at, tallied)
    if (limiter instanceof LimitGroup) return checkGroup(door, limiter, key, weight, windows, at)
    // one counter: the common case, kept short (the weight is checked: straight to the
    // store, or to its lease), and counted in the store's statistics as check() counts
    const d = await limiter._take(weight, 0, true)
    fromDecision(windows[0], d)
    const refund = door.refundOf(limiter, weight, d, at)
    return door.outcome(key, weight, windows, d.allowed, d.degraded, d.retryAfterMs, refund, at)
  },
})

/** A counter given by `limiter(req)`: one window, refunded when asked. */
const counterRequest = {
  refunds: true,
  async check(door, limiter, key, weight, at) {
    const d = await limiter.check(weight)
    const w = fromDecision({ name: '', limit: limiter.limit, windowMs: limiter.intervalMs }, d)
    const refund = door.refundOf(limiter, weight, d, at)
    return door.outcome(key, weight, door.named([w]), d.allowed, d.degraded, d.retryAfterMs, refund, at)
  },
}

/** @satisfies {import('./contract').DoorSection} */
const doorSection = {
  algorithms: { fixed: counters('bucket', 1), window: counters('window', 2), leaky: counters('leaky', 4) },
  limiters: Object.fromEntries(Object.values(CLASS).map((name) => [name, counterRequest])),
}

/** A leaky bucket's drip, `intervalMs / limit`, in the words of `per` (to 0.1 ms when not whole). */
const drip = (per, intervalMs, limit) => {
  const ms = intervalMs / limit
  return Number.isInteger(ms) ? per(ms) : `${ms.toFixed(1)}ms`
}

/** @satisfies {import('./contract').InspectSection} */
const inspectSection = {
  resettable: true,
  limiter(classes, store, { kind, name, options: o }) {
    if (kind === 'points') return new classes.PointsLimiter(store, { name, points: o.points, interval: o.intervalMs })
    const l = new classes[CLASS[kind]](store, { name, limit: o.limit, interval: o.intervalMs })
    // a window of a door's several windows lives under the door key's hash tag
    const w = o.window
    return w && typeof w.group === 'string' && Number.isInteger(w.index) ? l._asWindow(w.group, w.index) : l
  },
  async state(limiter) {
    const d = await limiter.peek()
    return {
      remaining: d.remaining,
      limit: d.limit,
      retryAfterMs: d.retryAfterMs,
      resetAfterMs: d.resetAfterMs,
      fill: d.limit > 0 ? 1 - d.remaining / d.limit : 1,
    }
  },
  limitText(o, per, info) {
    // a leaky bucket (and the points limiter) admits a burst of its limit at once, then drips:
    // "4 / 1s" would read as at most 4 in any second, which it is not
    if (info.kind === 'points')
      return `a burst of ${o.points} points, then one every ${drip(per, o.intervalMs, o.points)}`
    if (info.kind === 'leaky') return `a burst of ${o.limit}, then one every ${drip(per, o.intervalMs, o.limit)}`
    return `${o.limit} / ${per(o.intervalMs)}`
  },
  words: (st, f) => `${f.count(st.remaining)} of ${f.count(st.limit)} left`,
}

/** sluice/bullmq: rate limiters; Leaky and Points charge later slots, Bucket and Window prefetch. */
const rateOf = (l) => (l.limit * 1000) / l.intervalMs
/** @satisfies {import('./contract').Kind['bullmq']} */
const bullmqSection = {
  BucketLimiter: { role: 'rate', prefetch: true, rateOf },
  WindowLimiter: { role: 'rate', prefetch: true, rateOf },
  LeakyLimiter: { role: 'rate', reserves: true, rateOf },
  PointsLimiter: { role: 'rate', reserves: true, rateOf },
}

/** @satisfies {import('./contract').Kind<LimitCall> & import('./contract').Own<'ALGORITHM' | 'RESULT' | 'group' | 'groupKey'>} */
const limit = {
  code: CODE,
  name: 'limit',
  lane: LANE,
  OP,
  ALGORITHM,
  RESULT,
  Call: LimitCall,
  statsKinds: ['bucket', 'window', 'leaky', 'points'],
  statsFields: ['shadowRefused', 'denied', 'leaseCalls', 'returned'],
  lifetimeMs: (o) => Number(o.intervalMs) || 0,

  memory(store, c, degraded) {
    const owner = c.owner
    const nowUs = store._begin()
    const id = store._id(owner._storeKey, nowUs)
    const io = store._io
    io[0] = owner._kind
    io[1] = c.weight
    io[2] = c.limit
    io[3] = c.intervalUs
    io[4] = c.maxWaitUs
    io[5] = nowUs
    native.memoryStep(store._handle, CODE, id)
    return decide(c, io, 0, degraded)
  },

  cached(cache, c, atUs) {
    c.atUs = atUs
    const key = c.owner._storeKey
    if (c.maxWaitUs === 0 && c.limit === c.owner._limit && c.intervalUs === c.owner._intervalUs) {
      const hit = cache.get(key, c.owner._sig, c.weight, atUs)
      if (hit === null) return undefined
      const v = hit.values
      const resetUs = Math.max(0, v[RESET_US] - (atUs - hit.atUs))
      return decide(c, entry(0, v[REMAINING], hit.untilUs - atUs, resetUs), 0, false)
    }
    if (c.maxWaitUs === OP.reset || c.maxWaitUs === OP.adjust) cache.delete(key)
    return undefined
  },

  encode(calls, nowUs) {
    const n = calls.length
    const nums = input(n * WIDTH)
    let keys = ''
    for (let e = 0; e < n; e++) {
      const c = calls[e]
      const owner = c.owner
      keys = appendPart(keys, owner._storeKey)
      const i = e * WIDTH
      nums[i] = owner._kind
      nums[i + 1] = c.weight
      nums[i + 2] = c.limit
      nums[i + 3] = c.intervalUs
      nums[i + 4] = c.maxWaitUs
    }
    return { keys, nums: nums.subarray(0, n * WIDTH), nowUs }
  },
  keyOf: (c) => c.owner._storeKey,

  settle(store, out, calls, resolve, reject) {
    const cache = store._denyCache
    for (let e = 0; e < calls.length; e++) {
      const c = calls[e]
      const o = SIZE * e
      if (out[o + REMAINING] === WRONG_TYPE) {
        reject[e](wrongType(`${c.owner._statsKind} limiter`, store.keyPrefix))
        continue
      }
      if (
        cache !== null &&
        c.maxWaitUs === 0 &&
        out[o + ALLOWED] === 0 &&
        c.limit === c.owner._limit &&
        c.intervalUs === c.owner._intervalUs
      ) {
        cache.set(c.owner._storeKey, c.owner._sig, c.weight, c.atUs, out[o + RETRY_US], out.slice(o, o + SIZE))
      }
      resolve[e](decide(c, out, o, false))
    }
  },

  /**
   * 'allow' admits, 'deny' refuses until the next probe, 'local' decides on the embedded
   * store. A refund (adjust) is dropped; a reset or a block needs Redis (it rejects) except
   * under 'local'.
   */
  whenDown(policy, c) {
    if (policy.mode === 'local') return limit.memory(policy.local, c, true)
    const { maxWaitUs, weight } = c
    const max = c.limit
    if (maxWaitUs === OP.reset || maxWaitUs === OP.block) throw policy.error
    let out
    if (maxWaitUs === OP.adjust) out = entry(1, max, 0, 0)
    else if (policy.mode === 'allow') {
      // a throttle's weight is its block's duration: it counts one
      const taken = maxWaitUs === OP.peek ? 0 : maxWaitUs === OP.throttle ? 1 : weight
      out = entry(1, Math.max(0, max - taken), 0, 0)
    } else out = entry(0, 0, policy.retryUs, policy.retryUs)
    return decide(c, out, 0, true)
  },
  group: groupKind,
  groupKey,
  door: doorSection,
  inspect: inspectSection,
  bullmq: bullmqSection,
}

module.exports = limit
