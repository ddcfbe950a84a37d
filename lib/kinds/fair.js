// @ts-check
'use strict'
// The fair tenants' kind (FairTenant): registers a job of a tenant and counts the tenant's
// jobs in each rule's window. Call: `{ key, id, nums }`, `nums` = `[mode (0 exact, 1
// approximate), rules, (perMs, granularityMs) per rule]`. Result: the kind's `rule` fields per
// rule (`RESULT`, named in src/store/kinds/fair.rs: the count), the marker in the first.

const native = require('../native')
const { encodeParts, appendPart } = require('../base/codec')
const { OPS, WRONG_TYPE, wrongType, longest, degraded, resultFields } = require('./kind')

/** The first number of a call: how the tenant's jobs are counted (FairTenant's `mode`). */
const MODE = { exact: OPS.fair.exact, approximate: OPS.fair.approximate }

/** A rule's result fields (offsets) and width, as Rust names them. */
const RESULT = resultFields('fair', 'rule')
const { count: COUNT, size: RULE } = RESULT

class FairCall {
  constructor(key, id, nums) {
    this.key = key
    this.id = id
    this.nums = nums
  }
}

/** The counts of a call of `rules` rules whose result starts at `out[o]`, one per rule. */
function counts(out, o, rules) {
  const c = new Float64Array(rules)
  for (let i = 0; i < rules; i++) c[i] = out[o + RULE * i + COUNT]
  return c
}

/** Per call its key then its job id, in the codec's encoding. */
function keysAndIds(calls) {
  let text = ''
  for (const c of calls) text = appendPart(appendPart(text, c.key), c.id)
  return text
}

// --- How the sites above the stores see a fair tenant (lib/kinds/contract.d.ts)

/** @satisfies {import('./contract').InspectSection} */
const inspectSection = {
  limiter: (classes, store, { name, options: o }) =>
    new classes.FairTenant(store, {
      name,
      mode: o.mode,
      rules: o.rules.map((r) => ({ queue: r.queue, threshold: r.threshold, perMs: r.perMs })),
      maxWindowMs: Math.max(...o.rules.map((r) => r.perMs)),
    }),
  limitText: (o, per) => (o.rules || []).map((r) => `>${r.threshold}/${per(r.perMs)} → ${r.queue}`).join(', '),
}

/** @satisfies {import('./contract').Kind<FairCall> & import('./contract').Own<'MODE'>} */
const fair = {
  code: 4,
  name: 'fair',
  lane: 5,
  MODE,
  Call: FairCall,
  statsKinds: ['fair'],
  lifetimeMs: (o) => longest(o.rules, (r) => r.perMs),

  memory(store, c) {
    const out = native.memoryCall(store._handle, fair.code, encodeParts([c.key, c.id]), c.nums, store._begin())
    return counts(out, 0, c.nums[1])
  },

  encode(calls, nowUs) {
    let length = 0
    for (const c of calls) length += c.nums.length
    const nums = new Float64Array(length)
    let at = 0
    for (const c of calls) {
      nums.set(c.nums, at)
      at += c.nums.length
    }
    return { keys: keysAndIds(calls), nums, nowUs }
  },
  keyOf: (c) => c.key,

  settle(store, out, calls, resolve, reject) {
    let o = 0
    for (let e = 0; e < calls.length; e++) {
      const rules = calls[e].nums[1]
      if (out[o + COUNT] === WRONG_TYPE) reject[e](wrongType('fair-tenant rule set', store.keyPrefix))
      else resolve[e](counts(out, o, rules))
      o += RULE * rules
    }
  },

  /**
   * Flagged `degraded`: 'local' counts on the embedded store; 'allow' and 'deny' count nothing
   * (no rule matches: the job keeps its default queue, and the enqueue goes on).
   */
  whenDown(policy, c) {
    const out = policy.mode === 'local' ? fair.memory(policy.local, c) : new Float64Array(c.nums[1])
    return degraded(out)
  },
  inspect: inspectSection,
}

module.exports = fair
