// @ts-check
'use strict'
// The adaptive rate's kind (sluice/fetch): one record per key owns the key's rate, its pacing
// queue and its block, shared by every process. Call: `{ owner, nums }`, `nums` the 16 numbers
// of src/store/kinds/adaptive.rs (`pace`: reserve a slot, successes reported; `report`: what a
// response said; `give`: a slot given back). Result: the op's group of the kind's fields
// (`RESULT`, named in src/store/kinds/adaptive.rs: pace `delay_us, rate_mqps, admitted,
// block_us`, report `recorded_block_us, rate_mqps, decreased, block_us`, give `none, rate_mqps,
// given, block_us`), the wrong-type marker in the first. A call answers the tuple `[delay_us |
// recorded_block_us | 0, rate_mqps, admitted | decreased | given, block_us, degraded]`. Used
// by lib/doors/fetch/gate.js.

const native = require('../native')
const { encodeParts } = require('../base/codec')
const { OPS, WRONG_TYPE, wrongType, resultFields } = require('./kind')
const { storeKey } = require('../store/keys')

const NATIVE_NAME = 'adaptive'
const CODE = native.kinds().find((k) => k.name === NATIVE_NAME).code
const OP = OPS[NATIVE_NAME]
/** Numbers per call. */
const WIDTH = 16
/**
 * The record's layout version, in its key (`<prefix>:adaptive:v2:{<key>}`): v2 added the
 * cycles (src/core/adaptive/cycle.rs); a record of another layout is never read (it expires).
 */
const VERSION = 2
/** Each op's result fields (offsets), as Rust names them; the three share their offsets. */
const RESULT = {
  pace: resultFields(NATIVE_NAME, 'pace'),
  report: resultFields(NATIVE_NAME, 'report'),
  give: resultFields(NATIVE_NAME, 'give'),
}
const { delay_us: FIRST, rate_mqps: RATE, admitted: FLAG, block_us: BLOCK_US, size: SIZE } = RESULT.pace
if (
  RESULT.report.recorded_block_us !== FIRST ||
  RESULT.give.none !== FIRST ||
  RESULT.report.decreased !== FLAG ||
  RESULT.give.given !== FLAG ||
  RESULT.report.rate_mqps !== RATE ||
  RESULT.give.rate_mqps !== RATE ||
  RESULT.report.block_us !== BLOCK_US ||
  RESULT.give.block_us !== BLOCK_US ||
  RESULT.report.size !== SIZE ||
  RESULT.give.size !== SIZE
) {
  throw new Error("the adaptive kind's result groups no longer share their offsets (src/store/kinds/adaptive.rs)")
}

/** The answer (see above) of the result at `out[o..]`. */
const answer = (out, o, degraded) => [out[o + FIRST], out[o + RATE], out[o + FLAG], out[o + BLOCK_US], degraded]

class AdaptiveCall {
  /** `owner` has `_storeKey`; `nums`: the call's 16 numbers. */
  constructor(owner, nums) {
    this.owner = owner
    this.nums = nums
  }
}

function encode(calls, nowUs) {
  const nums = new Float64Array(WIDTH * calls.length)
  for (let i = 0; i < calls.length; i++) nums.set(calls[i].nums, WIDTH * i)
  return { keys: encodeParts(calls.map((c) => c.owner._storeKey)), nums, nowUs }
}

// --- How the sites above the stores see it (lib/kinds/contract.d.ts)

/** A key's record as the inspecting tools see it: the settings its door sends (registry options). */
class AdaptiveView {
  constructor(store, name, o) {
    this.store = store
    this.name = name
    this.params = Array.isArray(o.params) && o.params.length === 7 ? o.params.map(Number) : null
    this._storeKey = storeKey(store, 'adaptive', name, VERSION)
  }

  /** A probe: a slot of weight 0 (charges nothing: the queue's tail stays where the next call finds it). */
  async probe() {
    if (this.params === null) return null
    const nums = new Float64Array(WIDTH)
    nums.set([OP.pace, 0, 0, -1])
    nums.set(this.params, 8)
    const [delayUs, rate] = await this.store._call(adaptive, new AdaptiveCall(this, nums))
    return { backlogMs: delayUs / 1000, qps: rate / 1000 }
  }
}

/** @satisfies {import('./contract').InspectSection} */
const inspectSection = {
  limiter: (classes, store, { name, options }) => new AdaptiveView(store, name, options || {}),
  async state(view) {
    const p = await view.probe()
    if (p === null) return { fill: null }
    // full: a second or more of calls queued (or a block that long)
    return { qps: p.qps, backlogMs: p.backlogMs, fill: Math.min(1, p.backlogMs / 1000) }
  },
  limitText: (o) =>
    o.adaptive ? `adaptive ${o.minQps}..${o.qps}/s` : o.qps === null ? 'unpaced' : `${o.qps}/s, burst ${o.maxBurst}`,
  words: (st, f) =>
    st.qps === undefined
      ? ''
      : `${f.count(st.qps)}/s now${st.backlogMs >= 10 ? `, backlog ${f.ms(st.backlogMs)}` : ''}`,
  /** sluice/metrics: this process's keys with their current and learned rates (sluice/fetch's doors) */
  rates: (store) => ratesOf(store),
}

/** The sluice/fetch doors made on each store (weakly held; lib/doors/fetch/door.js adds them). */
const DOORS = new WeakMap()

/** Remembers `door` (a sluice/fetch Door: `gates`, each with `key` and `stats()`) made on `store`. */
const addDoor = (store, door) => {
  let doors = DOORS.get(store)
  if (doors === undefined) DOORS.set(store, (doors = new Set()))
  doors.add(new WeakRef(door))
}

/**
 * This process's keys on `store` with their rates: `{ key, qps, learnedQps }` (qps: the
 * current rate as the store last answered, null when unpaced; learnedQps: the rate the
 * upstream stated, while remembered, else null).
 */
function ratesOf(store) {
  const doors = DOORS.get(store)
  if (doors === undefined) return []
  const out = []
  for (const ref of doors) {
    const door = ref.deref()
    if (door === undefined) {
      doors.delete(ref)
      continue
    }
    for (const g of door.gates.values()) {
      const st = g.stats()
      const learnedQps = st.learned === undefined ? null : (st.learned.limit * 1000) / st.learned.windowMs
      out.push({ key: g.key, qps: st.qps, learnedQps })
    }
  }
  return out
}

/** @satisfies {import('./contract').Kind<AdaptiveCall> & import('./contract').Own<'WIDTH' | 'VERSION' | 'addDoor'>} */
const adaptive = {
  code: CODE,
  name: NATIVE_NAME,
  lane: 0, // the pacer's: the same callers, never both on one call
  OP,
  WIDTH,
  VERSION,
  Call: AdaptiveCall,
  statsKinds: ['adaptive'],
  /** What sluice/fetch counts besides calls (admitted), maxWaitMs refusals, waits and degraded answers. */
  statsFields: ['throttled', 'blocks', 'shadowRefused', 'denied'],
  lifetimeMs: () => 600_000,

  memory(store, c, degraded) {
    const b = encode([c], store._begin())
    const out = native.memoryCall(store._handle, CODE, b.keys, b.nums, b.nowUs)
    return answer(out, 0, degraded)
  },

  encode,
  keyOf: (c) => c.owner._storeKey,

  settle(store, out, calls, resolve, reject) {
    for (let e = 0; e < calls.length; e++) {
      const o = SIZE * e
      if (out[o + FIRST] === WRONG_TYPE) reject[e](wrongType('adaptive rate', store.keyPrefix))
      else resolve[e](answer(out, o, false))
    }
  },

  /**
   * 'local' decides on the embedded store; 'allow' lets a call go at once (a report is
   * dropped); 'deny' and 'error' refuse (the policy's error).
   */
  whenDown(policy, c) {
    if (policy.mode === 'local') return adaptive.memory(policy.local, c, true)
    if (policy.mode === 'allow') return [0, c.nums[8] * 1000, c.nums[0] === OP.pace ? 1 : 0, 0, true]
    throw policy.error
  },
  inspect: inspectSection,
  addDoor,
}

module.exports = adaptive
