// @ts-check
'use strict'
// The pacer's kind (DistributedPacer, PacerComposite): a call reserves a slot (`pace`) or
// admits now or refuses (`rateLimit`), on one pacer or on every member of a composite, all
// or nothing; a block or a give-back is a call of its own, never batched (`pacer.single`).
// Result: the kind's `member` fields per member (`RESULT`, named in src/store/kinds/pacer),
// the marker in `delay_us`; a block's or a give-back's answer is its `delay_us`.

const native = require('../native')
const { encodeParts } = require('../base/codec')
const { OPS, WRONG_TYPE, wrongType, resultFields } = require('./kind')
const { input } = require('../store/slots')
const { storeKey } = require('../store/keys')

/** The second number of a call's encoding: how a call is decided (a block is a call of its own). */
const OP = { rateLimit: OPS.pacer.rateLimit, pace: OPS.pacer.pace, block: OPS.pacer.block, give: OPS.pacer.give }
/** Numbers per member in a batch (after the call's two: members, op). */
const MEMBER_WIDTH = 4
/** A member's result fields (offsets) and width, as Rust names them. */
const RESULT = resultFields('pacer', 'member')
const { delay_us: DELAY_US, size: SIZE } = RESULT

/** The kind's code in the native registry, and its pool lane (a block's and a give-back's too). */
const CODE = 0
const LANE = 0

class PacerCall {
  /**
   * `owner`: a DistributedPacer (`keys` null: its own key and options) or a PacerComposite
   * (`keys`: its members' keys, `args`: the flat batch encoding of the call).
   */
  constructor(owner, weight, pace, factor, keys = null, args = null) {
    this.owner = owner
    this.weight = weight
    this.pace = pace
    this.factor = factor
    this.keys = keys
    this.args = args
    /** the owner's options when the deny cache was asked (null: not asked), and when */
    this.sig = null
    this.atUs = 0
  }

  get members() {
    return this.keys === null ? 1 : this.keys.length
  }
}

/**
 * A block of one pacer key for `nums` = `[qps, maxBurst, factor, blockUs]`; answers µs until
 * it ends. Sent as the pacer kind's call of one entry in mode `block`.
 */
class PacerBlockCall {
  constructor(key, nums) {
    this.key = key
    this.text = encodeParts([key])
    this.nums = new Float64Array([1, OP.block, nums[3], nums[0], nums[1], nums[2]])
    this.alone = true
  }
}

/**
 * A give-back on one pacer key (`outcome.cancel()`) of `nums` = `[qps, maxBurst, factor,
 * weight, startInUs]`: the weight a call took goes back to the key's queue (while its slot,
 * `startInUs` from now, is the last one queued) or bucket for the next caller; answers 1 when
 * given back, 0 when it stays spent. A call of its own, as a block.
 */
class PacerGiveCall {
  constructor(key, nums) {
    this.key = key
    this.text = encodeParts([key])
    this.nums = new Float64Array([1, OP.give, nums[3], nums[0], nums[1], nums[2], nums[4]])
    this.alone = true
  }
}

// --- How the sites above the stores see a pacer (lib/kinds/contract.d.ts)

/**
 * A pacer's part of a 'gcra' door's rateLimit() outcome (the pacer of `limit` per
 * `windowMs`, maxBurst `limit`): `mark` is its bucket level before the call. Remaining is
 * what the level leaves after an admitted charge; the reset, when the bucket is empty again
 * (refused: when a retry would be admitted, the delay). JS arithmetic on the watermark: the
 * pacer's answer carries no remaining or reset.
 */
function fromGcra(w, mark, weight, allowed, delayMs) {
  const qps = (w.limit * 1000) / w.windowMs
  const level = Math.min(w.limit, mark + (allowed ? weight : 0))
  w.remaining = Math.max(0, Math.floor(w.limit - level))
  w.resetMs = allowed ? Math.ceil((level / qps) * 1000) : delayMs
  return w
}

/**
 * The window of a pacer `p` given by `limiter(req)`: its maxBurst (rounded down: a policy's
 * quota is an Integer) per the time its bucket takes to drain; the reset is the delay.
 */
function pacerWindow(p, mark, weight, allowed, delayMs) {
  return {
    name: '',
    limit: Math.floor(p._maxBurst),
    windowMs: Math.ceil((p._maxBurst / p._qps) * 1000) || 1000,
    remaining: Math.max(0, Math.floor(p._maxBurst - mark - (allowed ? weight : 0))),
    resetMs: delayMs,
  }
}

/** A pacer (or, `composite`, a PacerComposite) given by `limiter(req)`: a window per member. */
const pacerRequest = (composite) => ({
  refunds: false,
  async check(door, limiter, key, weight, at) {
    const pacers = composite ? limiter._leaves : [limiter]
    if (pacers.length === 0) return null // a composite of no pacers limits nothing
    const o = await limiter.rateLimit(weight)
    const allowed = o.delayMs === 0
    const marks = composite ? o.watermarks : [o.watermark]
    const windows = pacers.map((p, i) => pacerWindow(p, marks[i], weight, allowed, o.delayMs))
    return door.outcome(key, weight, door.named(windows), allowed, o.degraded, o.delayMs, null, at)
  },
})

/**
 * The store key of window `i` of a door's several windows of counter `name`: one hash tag per
 * door key, so a composite of them is one script call on a cluster; `v2` sets it apart from a
 * pacer's own key `<prefix>:pacer:{<key>}`.
 */
const groupKey = (store, name, i) => storeKey(store, 'pacer', name, 2, [i])

/** @satisfies {import('./contract').DoorSection} */
const doorSection = {
  algorithms: {
    gcra: {
      order: 5,
      refunds: false,
      resettable: false,
      /**
       * A pacer per window (a composite of them for several), maxBurst its limit. Several
       * windows' store keys share a hash tag, `<prefix>:pacer:v2:{<counter>}:<i>`, so the
       * composite is one script call on a cluster too (no undo); one window keeps
       * `<prefix>:pacer:{<counter>}`. A counter name needs no escaping (`[A-Za-z0-9_-]`).
       */
      make(classes, store, name, windows) {
        const pacers = windows.map((w, i) => {
          const p = new classes.DistributedPacer(store, {
            // a pacer's key may hold any character: `.` is in no counter name
            key: windows.length === 1 ? name : `${name}.${i}`,
            qps: (w.limit * 1000) / w.windowMs,
            maxBurst: w.limit,
          })
          return windows.length > 1 ? p._asWindow(name, i) : p
        })
        return pacers.length === 1 ? pacers[0] : new classes.PacerComposite(pacers)
      },
      members: (limiter) => limiter._leaves ?? [limiter],
      async check(door, limiter, key, weight, windows, at) {
        const o = await limiter.rateLimit(weight)
        const allowed = o.delayMs === 0
        const marks = windows.length === 1 ? [o.watermark] : o.watermarks
        windows.forEach((w, i) => fromGcra(w, marks[i], weight, allowed, o.delayMs))
        return door.outcome(key, weight, windows, allowed, o.degraded, o.delayMs, null, at)
      },
    },
  },
  limiters: { DistributedPacer: pacerRequest(false), PacerComposite: pacerRequest(true) },
}

/** @satisfies {import('./contract').InspectSection} */
const inspectSection = {
  limiter: (classes, store, { name, options: o }) =>
    new classes.DistributedPacer(store, { key: name, qps: o.qps, maxBurst: o.maxBurst }),
  async state(limiter, info) {
    const o = await limiter.rateLimit(0) // a probe: charges nothing, counts nothing
    const maxBurst = info.options.maxBurst
    return {
      backlogMs: o.delayMs,
      watermark: o.watermark,
      fill: o.delayMs > 0 ? 1 : maxBurst > 0 ? Math.min(1, Math.max(0, o.watermark / maxBurst)) : 0,
    }
  },
  limitText: (o) => `${o.qps}/s, burst ${o.maxBurst}`,
  words: (st, f) => (st.backlogMs > 0 ? `backlog ${f.ms(st.backlogMs)}` : `burst used ${f.count(st.watermark)}`),
}

/** @satisfies {import('./contract').Kind['bullmq']} */
const bullmqSection = {
  DistributedPacer: { role: 'pacer', paces: true, spacingMs: (p) => 1000 / p._qps },
  PacerComposite: {
    role: 'pacer',
    spacingMs: (c) => Math.max(0, ...c._leaves.map((p) => 1000 / p._qps)),
    members: (c) => c._leaves,
  },
}

/** A block or give-back `c` on the embedded store `store`: its number. */
function runSingle(store, c) {
  return native.memoryCall(store._handle, CODE, c.text, c.nums, store._begin())[DELAY_US]
}

/**
 * How a store runs a call on one pacer key that is never batched, a block or a give-back:
 * `_call(pacer.single, call)`, answering a number (µs until the block ends; 1 given back, 0 not).
 */
/** @satisfies {import('./contract').AloneKind<PacerBlockCall | PacerGiveCall, number>} */
const single = {
  code: CODE,
  name: 'pacer',
  lane: LANE,
  memory: (store, c) => runSingle(store, c),
  /** On the pool lane; its key holding another type rejects (ERR_SCRIPT). */
  async alone(store, c, nowUs) {
    const out = await store._poolCall(CODE, c.text, c.nums, nowUs, LANE)
    if (out[DELAY_US] === WRONG_TYPE) throw wrongType('pacer', store.keyPrefix)
    return out[DELAY_US]
  },
  /** Needs Redis, except under 'local' (recorded in this process). */
  whenDown(policy, c) {
    if (policy.mode === 'local') return runSingle(policy.local, c)
    throw policy.error
  },
  keyOf: (c) => c.key,
}

/** @satisfies {import('./contract').Kind<PacerCall> & import('./contract').Own<'RESULT' | 'single' | 'BlockCall' | 'GiveCall' | 'groupKey'>} */
const pacer = {
  code: CODE,
  name: 'pacer',
  lane: LANE,
  OP,
  RESULT,
  Call: PacerCall,
  single,
  BlockCall: PacerBlockCall,
  GiveCall: PacerGiveCall,
  statsKinds: ['pacer'],
  statsFields: ['shadowRefused', 'denied'],
  lifetimeMs: (o) => (o.qps > 0 ? Math.ceil((((Number(o.maxBurst) || 0) + 1) / o.qps) * 1000) : 0),

  memory(store, c, degraded) {
    const nowUs = store._begin()
    let out
    if (c.keys === null) {
      const owner = c.owner
      const id = store._id(owner._storeKey, nowUs)
      // the io buffer: the call's numbers in, its result out (src/store/kinds/pacer: memory_io)
      const io = store._io
      io[0] = c.weight
      io[1] = owner._qps
      io[2] = owner._maxBurst
      io[3] = c.factor
      io[4] = c.pace ? 1 : 0
      io[5] = nowUs
      native.memoryStep(store._handle, pacer.code, id)
      out = io
    } else {
      store._sweepFor(c.keys.length, nowUs)
      out = native.memoryCall(store._handle, pacer.code, encodeParts(c.keys), new Float64Array(c.args), nowUs)
    }
    return c.owner._outcome(out, 0, c.weight, degraded, c.pace)
  },

  cached(cache, c, atUs) {
    if (c.pace || c.keys !== null) return undefined
    const owner = c.owner
    c.sig = owner._sig
    c.atUs = atUs
    const hit = cache.get(owner._storeKey, c.sig, c.weight, atUs)
    if (hit === null) return undefined
    const out = hit.values.slice()
    out[DELAY_US] = hit.untilUs - atUs
    return owner._outcome(out, 0, c.weight, false, false)
  },

  encode(calls, nowUs) {
    const keys = []
    let length = 0
    for (const c of calls) length += c.keys === null ? 2 + MEMBER_WIDTH : c.args.length
    const nums = input(length)
    let at = 0
    for (const c of calls) {
      if (c.keys === null) {
        const owner = c.owner
        keys.push(owner._storeKey)
        nums[at] = 1
        nums[at + 1] = c.pace ? OP.pace : OP.rateLimit
        nums[at + 2] = c.weight
        nums[at + 3] = owner._qps
        nums[at + 4] = owner._maxBurst
        nums[at + 5] = c.factor
        at += 2 + MEMBER_WIDTH
      } else {
        for (const key of c.keys) keys.push(key)
        for (const x of c.args) nums[at++] = x
      }
    }
    return { keys: encodeParts(keys), nums: nums.subarray(0, length), nowUs }
  },
  keyOf: (c) => (c.keys === null ? c.owner._storeKey : c.keys[0]),

  settle(store, out, calls, resolve, reject) {
    const cache = store._denyCache
    let offset = 0
    for (let e = 0; e < calls.length; e++) {
      const c = calls[e]
      const members = c.members
      let wrong = false
      for (let m = 0; m < members; m++) wrong ||= out[offset + SIZE * m + DELAY_US] === WRONG_TYPE
      if (wrong) {
        reject[e](wrongType(members === 1 ? 'pacer' : 'pacer composite', store.keyPrefix))
      } else {
        if (c.sig !== null && out[offset + DELAY_US] > 0) {
          const delayUs = out[offset + DELAY_US]
          cache.set(c.owner._storeKey, c.sig, c.weight, c.atUs, delayUs, out.slice(offset, offset + SIZE))
        }
        resolve[e](c.owner._outcome(out, offset, c.weight, false, c.pace))
      }
      offset += SIZE * members
    }
  },

  /**
   * 'allow' admits (no delay), 'deny' refuses rateLimit() until the next probe (and rejects
   * pace(), which cannot refuse), 'local' decides on the embedded store.
   */
  whenDown(policy, c) {
    if (policy.mode === 'local') return pacer.memory(policy.local, c, true)
    const members = c.members
    const out = new Float64Array(SIZE * members)
    if (policy.mode === 'deny') {
      if (c.pace) throw policy.error
      for (let i = 0; i < members; i++) out[SIZE * i + DELAY_US] = policy.retryUs
    }
    return c.owner._outcome(out, 0, c.weight, true, c.pace)
  },
  groupKey,
  door: doorSection,
  inspect: inspectSection,
  bullmq: bullmqSection,
}

module.exports = pacer
