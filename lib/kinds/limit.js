'use strict'
// The rate limiters' kind (BucketLimiter, WindowLimiter, LeakyLimiter, PointsLimiter): one
// decision per call. Call: `{ owner, weight, maxWaitUs, count, atUs }`, where `maxWaitUs` >= 0
// is a take (waiting up to it, leaky and points) and an OP below anything else. Result:
// `[allowed, remaining, retryAfterUs, resetAfterUs]`, the marker in `remaining`.

const native = require('../native')
const { appendPart } = require('../codec')
const { OPS, WRONG_TYPE, wrongType } = require('./kind')

const { bucket, window, leaky, adjust, reset, peek, block } = OPS.limit
/** The algorithms (the owner's `_kind`); points is leaky with other names. */
const ALGORITHM = { bucket, window, leaky, points: leaky }
/** Operations other than a take, in the `maxWaitUs` field. */
const OP = { adjust, reset, peek, block }
/** Numbers per call in a batch. */
const WIDTH = 5

class LimitCall {
  /** `owner`: the limiter; `count`: count the decision in statistics (a check). */
  constructor(owner, weight, maxWaitUs, count) {
    this.owner = owner
    this.weight = weight
    this.maxWaitUs = maxWaitUs
    this.count = count
    /** when the deny cache was asked (local µs) */
    this.atUs = 0
  }
}

/** The decision of `c` at `out[o..]`, counted when `c.count`. */
function decide(c, out, o, degraded) {
  const d = c.owner._decision(out, o, degraded)
  if (c.count) c.owner._count(d, c.weight)
  return d
}

const limit = {
  code: 1,
  name: 'limit',
  lane: 1,
  OP,
  ALGORITHM,
  Call: LimitCall,
  statsKinds: ['bucket', 'window', 'leaky', 'points'],
  lifetimeMs: (o) => Number(o.intervalMs) || 0,

  memory(store, c, degraded) {
    const owner = c.owner
    const nowUs = store._begin()
    const id = store._id(owner._key, nowUs)
    const io = store._io
    io[0] = owner._kind
    io[1] = c.weight
    io[2] = owner._limit
    io[3] = owner._intervalUs
    io[4] = c.maxWaitUs
    io[5] = nowUs
    native.memoryLimitStep(store._handle, id)
    return decide(c, io, 0, degraded)
  },

  cached(cache, c, atUs) {
    c.atUs = atUs
    const key = c.owner._key
    if (c.maxWaitUs === 0) {
      const hit = cache.get(key, c.owner._sig, c.weight, atUs)
      if (hit === null) return undefined
      const v = hit.values
      const resetUs = Math.max(0, v[3] - (atUs - hit.atUs))
      return decide(c, [0, v[1], hit.untilUs - atUs, resetUs], 0, false)
    }
    if (c.maxWaitUs === OP.reset || c.maxWaitUs === OP.adjust) cache.delete(key)
    return undefined
  },

  encode(calls, nowUs) {
    const n = calls.length
    const nums = new Float64Array(n * WIDTH)
    let keys = ''
    for (let e = 0; e < n; e++) {
      const c = calls[e]
      const owner = c.owner
      keys = appendPart(keys, owner._key)
      const i = e * WIDTH
      nums[i] = owner._kind
      nums[i + 1] = c.weight
      nums[i + 2] = owner._limit
      nums[i + 3] = owner._intervalUs
      nums[i + 4] = c.maxWaitUs
    }
    return { keys, nums, nowUs }
  },
  direct: (n, b) => native.redisLimitDirect(n, b.keys, b.nums, b.nowUs),
  pooled: (n, b, lane) => native.redisLimitBatch(n, b.keys, b.nums, b.nowUs, lane),
  keyOf: (c) => c.owner._key,

  settle(store, out, calls, resolve, reject) {
    const cache = store._denyCache
    for (let e = 0; e < calls.length; e++) {
      const c = calls[e]
      const o = 4 * e
      if (out[o + 1] === WRONG_TYPE) {
        reject[e](wrongType(`${c.owner._statsKind} limiter`, store.keyPrefix))
        continue
      }
      if (cache !== null && c.maxWaitUs === 0 && out[o] === 0) {
        cache.set(c.owner._key, c.owner._sig, c.weight, c.atUs, out[o + 2], out.slice(o, o + 4))
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
    const max = c.owner._limit
    if (maxWaitUs === OP.reset || maxWaitUs === OP.block) throw policy.error
    let out
    if (maxWaitUs === OP.adjust) out = [1, max, 0, 0]
    else if (policy.mode === 'allow') out = [1, maxWaitUs === OP.peek ? max : Math.max(0, max - weight), 0, 0]
    else out = [0, 0, policy.retryUs, policy.retryUs]
    return decide(c, out, 0, true)
  },
}

module.exports = limit
