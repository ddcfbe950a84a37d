'use strict'
// The budget's kind (Budget, lib/budget.js): reservations of several dimensions charged all or
// nothing in one fleet-wide FIFO, settled, cancelled, or expired as spent. Call: `{ owner, op,
// id, amounts, ttlUs, maxWaitUs }`, the dimensions from the owner's `_spec`. Result per call:
// `[status, delayUs, nowUs, open, expired, (used, reserved) per dimension]`, the wrong-type marker in
// `status` (src/store/kinds/budget.rs, lua/budget.lua).

const native = require('../native')
const { encodeParts } = require('../codec')
const { OPS, WRONG_TYPE, wrongType } = require('./kind')

const NATIVE_NAME = 'budget'
const CODE = native.kinds().find((k) => k.name === NATIVE_NAME).code
const OP = OPS[NATIVE_NAME]
/** A call's status (src/core/budget.rs): done, refused (over its max wait), not open. */
const STATUS = Object.freeze({ ok: 1, refused: 0, notOpen: 3 })

class BudgetCall {
  constructor(owner, op, id, amounts, ttlUs, maxWaitUs) {
    this.owner = owner
    this.op = op
    this.id = id
    this.amounts = amounts
    this.ttlUs = ttlUs
    this.maxWaitUs = maxWaitUs
  }
}

/** Numbers of the result of a call of `owner`. */
const resultLength = (owner) => 5 + 2 * owner._names.length

function encode(calls, nowUs) {
  let length = 0
  const text = []
  for (const c of calls) {
    length += 4 + 4 * c.owner._names.length
    text.push(c.owner._key, c.id)
  }
  const nums = new Float64Array(length)
  let at = 0
  for (const c of calls) {
    const spec = c.owner._spec
    const n = spec.length / 3
    nums[at] = c.op
    nums[at + 1] = c.ttlUs
    nums[at + 2] = c.maxWaitUs
    nums[at + 3] = n
    at += 4
    for (let d = 0; d < n; d++) {
      nums[at] = spec[3 * d]
      nums[at + 1] = spec[3 * d + 1]
      nums[at + 2] = spec[3 * d + 2]
      nums[at + 3] = c.amounts === null ? 0 : c.amounts[d]
      at += 4
    }
  }
  return { keys: encodeParts(text), nums, nowUs }
}

/** The decoded result at `o` of a flat result. */
function result(owner, out, o, degraded) {
  const n = owner._names.length
  const used = new Array(n)
  const reserved = new Array(n)
  for (let d = 0; d < n; d++) {
    used[d] = out[o + 5 + 2 * d]
    reserved[d] = out[o + 6 + 2 * d]
  }
  const [status, delayUs, nowUs, open, expired] = [out[o], out[o + 1], out[o + 2], out[o + 3], out[o + 4]]
  return { status, delayUs, nowUs, open, expired, used, reserved, degraded }
}

const budget = {
  code: CODE,
  name: 'budget',
  lane: CODE,
  OP,
  STATUS,
  Call: BudgetCall,
  statsKinds: ['budget'],
  // a dimension drains in interval * (1 + maxBurst / limit); reservations live 10 minutes by default
  lifetimeMs: (o) =>
    600_000 +
    Math.max(0, ...Object.values(o.dimensions || {}).map((d) => d.intervalMs * (1 + (d.maxBurst || 0) / d.limit))),

  memory(store, c, degraded) {
    const b = encode([c], store._begin())
    return result(c.owner, native.memoryCall(store._handle, CODE, b.keys, b.nums, b.nowUs), 0, degraded)
  },

  encode,
  keyOf: (c) => c.owner._key,

  settle(store, out, calls, resolve, reject) {
    let o = 0
    for (let e = 0; e < calls.length; e++) {
      const c = calls[e]
      if (out[o] === WRONG_TYPE) reject[e](wrongType('budget', store.keyPrefix))
      else resolve[e](result(c.owner, out, o, false))
      o += resultLength(c.owner)
    }
  },

  /**
   * 'local' decides on the embedded store (from zero); 'allow' admits a reservation at once,
   * 'deny' refuses it until the next probe; a settle or cancel is answered done (a reservation
   * made on Redis keeps its charge: it expires as spent); stats need Redis.
   */
  whenDown(policy, c) {
    if (policy.mode === 'local') return budget.memory(policy.local, c, true)
    if (c.op === OP.stats) throw policy.error
    const out = new Float64Array(resultLength(c.owner))
    out[0] = STATUS.ok
    out[2] = policy.nowUs()
    if (c.op === OP.reserve && policy.mode === 'deny') {
      out[0] = STATUS.refused
      out[1] = policy.retryUs
    }
    return result(c.owner, out, 0, true)
  },
}

// --- How the sites above the stores see it (see lib/kinds/kind.js) --

budget.inspect = {
  limiter: (lib, store, { name, options: o }) => new lib.Budget(store, { name, dimensions: o.dimensions }),
  async state(limiter) {
    const s = await limiter.stats()
    const dims = Object.entries(s.dimensions)
    return {
      dimensions: s.dimensions,
      reservations: s.reservations,
      fill: Math.max(0, ...dims.map(([, d]) => Math.min(1, d.used / d.limit))),
    }
  },
  /** sluice/metrics: per dimension `{ used, reserved }`, read now */
  dimensionUse: async (limiter) => (await limiter.stats()).dimensions,
  limitText: (o, per) =>
    Object.entries(o.dimensions || {})
      .map(([name, d]) => `${d.limit} ${name} / ${per(d.intervalMs)}`)
      .join(', '),
  words: (st, f) =>
    Object.entries(st.dimensions)
      .map(([name, d]) => `${f.count(d.used)}/${f.count(d.limit)} ${name} used`)
      .concat(`${f.count(st.reservations)} open`)
      .join(', '),
}

module.exports = budget
