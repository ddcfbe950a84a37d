// @ts-check
'use strict'
// Where a RedisStore's batches wait for their results, without an object per call at the
// native boundary: a slot per batch under way (one table for every store of the process), the
// result buffer native writes into (on the JS thread, read at once), and the one function
// native announces pool results to. That function holds no store: the native store keeps it
// (see src/bindings/completions.rs), so it must not keep the store alive.

const native = require('../native')

/** Results from native: pool records (see `announced`), or a direct step's numbers from 0. */
const OUT = new Float64Array(4096)
/** Arguments to native: a batch's numbers, read by native during the call that sends them. */
let IN = new Float64Array(1024)
/** slot -> what settles its batch: `done(out)`, `fail(error)` */
const doneOf = []
const failOf = []
const free = []

/**
 * The argument buffer with room for `n` numbers (grown when needed): write a batch's numbers,
 * then pass `subarray(0, n)` to the native call that sends it (nothing else writes it between).
 */
function input(n) {
  if (IN.length < n) IN = new Float64Array(Math.max(n, 2 * IN.length))
  return IN
}

/** A slot for a batch under way. */
function take(done, fail) {
  const slot = free.length > 0 ? free.pop() : doneOf.length
  doneOf[slot] = done
  failOf[slot] = fail
  return slot
}

/** A slot whose call never went out. */
function release(slot) {
  doneOf[slot] = undefined
  failOf[slot] = undefined
  free.push(slot)
}

/**
 * Native announces `records` finished pool calls: per record `[slot, status, n, index]` in
 * OUT, then (status 0) its `n` numbers; status 1: `extra[index]` is the result (numbers,
 * `{ values, text }`, or `{ values, text, failed, error }` when some of the batch's calls
 * failed: src/bindings/completions.rs `PartialReply`, its `error` a `NativeError`); status 2:
 * `extra[index]` is the call's failure, a `NativeError` `{ code, detail, message }`.
 */
function announced(records, extra) {
  let at = 0
  for (let r = 0; r < records; r++) {
    const slot = OUT[at]
    const status = OUT[at + 1]
    const n = OUT[at + 2]
    const done = doneOf[slot]
    const fail = failOf[slot]
    release(slot)
    if (status === 0) done(OUT.subarray(at + 4, at + 4 + n))
    else if (status === 1) done(extra[OUT[at + 3]])
    else fail(extra[OUT[at + 3]])
    at += 4 + n
  }
}

/**
 * One call of kind `code` on pool lane `lane` of `nativeStore`, outside any batch (a probe, a
 * pacer's block): a promise of its result, copied out of the buffer.
 */
function call(nativeStore, code, text, nums, nowUs, lane) {
  return new Promise((resolve, reject) => {
    // a call alone is one hash slot's: it fails as a whole (a partial result only in case)
    const slot = take(
      (out) =>
        out.failed !== undefined ? reject(out.error) : resolve(typeof out.slice === 'function' ? out.slice() : out),
      reject,
    )
    try {
      native.redisCall(nativeStore, code, text, nums, nowUs, lane, slot)
    } catch (err) {
      release(slot)
      reject(err)
    }
  })
}

module.exports = { OUT, input, take, release, announced, call }
