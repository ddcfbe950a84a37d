// @ts-check
'use strict'
// What the two kinds of several windows share (sliding: exact logs; sliding-counter: two
// counters per window): a call's numbers (`[op, weight, ...c.spec]`: the owner's windows, or a
// rule's, store.rules), the result's
// layout (the kind's `call` fields, then its `window` fields per window, as Rust names them),
// the store-down answers, and how the sites above the stores see such a limiter (inspect's
// state and words, sluice/bullmq's rate).

const native = require('../native')
const { encodeParts } = require('../base/codec')
const { resultFields, WRONG_TYPE, wrongType } = require('./kind')

/**
 * The result layout of the windowed kind named `nativeName` (its registry name in Rust):
 * `RESULT` (its `call` and `window` groups) and what its files read of it.
 * @param {string} nativeName
 */
function layout(nativeName) {
  const RESULT = { call: resultFields(nativeName, 'call'), window: resultFields(nativeName, 'window') }
  const { allowed, retry_after_us, size: head } = RESULT.call
  const { remaining, retry_after_us: windowRetry, size: each } = RESULT.window
  return {
    RESULT,
    ALLOWED: allowed,
    RETRY_US: retry_after_us,
    HEAD: head,
    EACH: each,
    W_REMAINING: remaining,
    W_RETRY_US: windowRetry,
    /** Numbers of the result of call `c` (of its `windows`). */
    resultLength: (c) => head + each * c.windows.length,
  }
}

/** Appends the numbers of call `c` to `nums` from `at`; returns where they end. */
function put(nums, at, c) {
  const spec = c.spec
  nums[at] = c.op
  nums[at + 1] = c.weight
  for (let i = 0; i < spec.length; i++) nums[at + 2 + i] = spec[i]
  return at + 2 + spec.length
}

/** The calls' keys and numbers, as a store call of such a kind. */
function encode(calls, nowUs) {
  let length = 0
  for (const c of calls) length += 2 + c.spec.length
  const nums = new Float64Array(length)
  let at = 0
  for (const c of calls) at = put(nums, at, c)
  return { keys: encodeParts(calls.map((c) => c.owner._storeKey)), nums, nowUs }
}

/** Call `c` run on the embedded `store` (kind `code`): its owner's decision. */
function memory(code, store, c, degraded) {
  const b = encode([c], store._begin())
  return c.owner._decision(native.memoryCall(store._handle, code, b.keys, b.nums, b.nowUs), 0, degraded, c.windows)
}

/**
 * Settles a batch of kind layout `L` (`what`: the limiter named in a wrong-type error); `cached`,
 * if given, is told each decided call and where its result starts (the deny cache's).
 */
function settle(L, what, store, out, calls, resolve, reject, cached = null) {
  let o = 0
  for (let e = 0; e < calls.length; e++) {
    const c = calls[e]
    if (out[o + L.RETRY_US] === WRONG_TYPE) reject[e](wrongType(what, store.keyPrefix))
    else {
      if (cached !== null) cached(c, o)
      resolve[e](c.owner._decision(out, o, false, c.windows))
    }
    o += L.resultLength(c)
  }
}

/**
 * The store-down answer of a take or peek `c` of kind layout `L` (not 'local', which decides on
 * the embedded store): 'allow' admits with the windows' room less the charge (`charged`: the
 * call charges its weight), else refused for the policy's retry; `retryFields`: the window's
 * fields that carry it.
 */
function answerDown(L, policy, c, allow, charged, retryFields) {
  const owner = c.owner
  const windows = c.windows
  const out = new Float64Array(L.resultLength(c))
  if (allow) {
    out[L.ALLOWED] = 1
    const charge = charged ? c.weight : 0
    for (let i = 0; i < windows.length; i++) {
      out[L.HEAD + L.EACH * i + L.W_REMAINING] = Math.max(0, windows[i].limit - charge)
    }
  } else {
    out[L.RETRY_US] = policy.retryUs
    for (let i = 0; i < windows.length; i++) {
      for (const f of retryFields) out[L.HEAD + L.EACH * i + f] = policy.retryUs
    }
  }
  return owner._decision(out, 0, true, windows)
}

/**
 * How the sites above the stores see a limiter of several windows (`className`, as the
 * package exports it): inspect's state (from a decision that charged nothing: `peek`), words
 * and limit text (`approx`: '~' before each limit), and sluice/bullmq's rate (the slowest
 * window's, per second).
 */
function sections(className, peek, approx) {
  /** @satisfies {import('./contract').InspectSection} */
  const inspect = {
    resettable: true,
    limiter: (classes, store, { name, options: o }) => new classes[className](store, { name, windows: o.windows }),
    async state(limiter) {
      const d = await peek(limiter)
      const windows = d.windows.map((w) => ({ limit: w.limit, intervalMs: w.intervalMs, remaining: w.remaining }))
      return { windows, fill: Math.max(0, ...windows.map((w) => (w.limit > 0 ? 1 - w.remaining / w.limit : 1))) }
    },
    limitText: (o, per) =>
      (o.windows || []).map((w) => `${approx ? '~' : ''}${w.limit} / ${per(w.intervalMs)}`).join(', '),
    words: (st, f) =>
      st.windows.map((w) => `${f.count(w.remaining)}/${f.count(w.limit)} per ${f.interval(w.intervalMs)}`).join(', '),
  }
  const rateOf = (l) => Math.min(...l.windows.map((w) => (w.limit * 1000) / w.intervalMs))
  /** @type {import('./contract').Kind['bullmq']} */
  const bullmq = { [className]: { role: 'rate', rateOf } }
  return { inspect, bullmq }
}

module.exports = { layout, put, encode, memory, settle, answerDown, sections }
