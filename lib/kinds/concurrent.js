// @ts-check
'use strict'
// The concurrent limiters' kind (ConcurrentLimiter): leases and their waiters. Call: `{ key,
// op, id, nums }`, `nums` = `[limit, lockUs, waitUs, ttlMs]`. Result: per operation, its
// group of the kind's fields (`RESULT`, named in src/store/kinds/concurrent.rs: `lease` for
// acquire, poll and cancel, `done` for release and extend, `stats`), zero-padded to the widest,
// the marker in the first; grants for this process's waiters come back with the reply and wake
// them.

const native = require('../native')
const { encodeParts, appendPart, decodeParts } = require('../base/codec')
const { OPS, WRONG_TYPE, numbers, wrongType, degraded, resultFields } = require('./kind')

const { acquire, release, extend, poll, cancel, stats } = OPS.concurrent
const OP = { acquire, release, extend, poll, cancel, stats }
/** Each operation's result fields (offsets), as Rust names them. */
const RESULT = {
  lease: resultFields('concurrent', 'lease'),
  done: resultFields('concurrent', 'done'),
  stats: resultFields('concurrent', 'stats'),
}
const { status: STATUS, earliest_expiry_us: EARLIEST_US, now_us: NOW_US } = RESULT.lease
/** Numbers per operation: the widest group's (every result is zero-padded to it). */
const WIDTH = Math.max(RESULT.lease.size, RESULT.done.size, RESULT.stats.size)

class ConcurrentCall {
  constructor(key, op, id, nums) {
    this.key = key
    this.op = op
    this.id = id
    this.nums = nums
  }
}

/** The numbers of `calls`: 5 per operation, `[op, limit, lockUs, waitUs, ttlMs]`. */
function put(calls) {
  const nums = new Float64Array(calls.length * 5)
  for (let e = 0; e < calls.length; e++) {
    const c = calls[e]
    nums.set([c.op, c.nums[0], c.nums[1], c.nums[2], c.nums[3]], 5 * e)
  }
  return nums
}

// --- How the sites above the stores see a concurrent limiter (lib/kinds/contract.d.ts)

/** @satisfies {import('./contract').InspectSection} */
const inspectSection = {
  limiter: (classes, store, { name, options: o }) =>
    new classes.ConcurrentLimiter(store, { name, limit: o.limit, lockTimeoutMs: o.lockTimeoutMs }),
  async state(limiter, info) {
    const s = await limiter.stats()
    const limit = info.options.limit
    return { held: s.current, waiting: s.waiting, limit, fill: limit > 0 ? Math.min(1, s.current / limit) : 1 }
  },
  limitText: (o) => `${o.limit} at once`,
  words: (st, f) => `${f.count(st.held)} of ${f.count(st.limit)} held, ${f.count(st.waiting)} waiting`,
  /** Leases held now (sluice/metrics' `sluice_leases_held`). */
  leasesHeld: async (limiter) => (await limiter.stats()).current,
}

/** sluice/bullmq: a lease per job (Sidekiq's backoff when none is free, no early delivery). */
/** @satisfies {import('./contract').Kind['bullmq']} */
const bullmqSection = { ConcurrentLimiter: { role: 'concurrent' } }

/** @satisfies {import('./contract').Kind<ConcurrentCall> & import('./contract').Own<'RESULT'>} */
const concurrent = {
  code: 5,
  name: 'concurrent',
  lane: 2,
  OP,
  RESULT,
  Call: ConcurrentCall,
  statsKinds: ['concurrent'],
  statsFields: ['shadowRefused', 'denied'],
  lifetimeMs: (o) => Number(o.lockTimeoutMs) || 0,

  /** Grants go to the waiters of this process (the store's, shared by a RedisStore's 'local'). */
  memory(store, c) {
    const nowUs = store._begin()
    const reply = /** @type {import('../native').MemoryReply} */ (
      native.memoryCall(store._handle, concurrent.code, encodeParts([c.key, c.id]), put([c]), nowUs)
    )
    for (const grant of decodeParts(reply.text)) store._waiters.wake(grant)
    return reply.values
  },

  encode(calls, nowUs) {
    let keys = ''
    for (const c of calls) keys = appendPart(appendPart(keys, c.key), c.id)
    return { keys, nums: put(calls), nowUs }
  },
  keyOf: (c) => c.key,

  settle(store, { values, text }, calls, resolve, reject) {
    // this process's own waiters are woken from the reply, before the published message
    for (const grant of decodeParts(text)) store._waiters.wake(grant)
    for (let e = 0; e < calls.length; e++) {
      if (values[WIDTH * e] === WRONG_TYPE) reject[e](wrongType('concurrent limiter', store.keyPrefix))
      else resolve[e](numbers(values, WIDTH * e, WIDTH * (e + 1)))
    }
  },

  /**
   * Flagged `degraded`: 'local' runs on the embedded store; 'allow' grants every lease, 'deny'
   * none (a waiter gives up); releasing or extending a lease Redis holds cannot be confirmed
   * (false: it is reclaimed after its lock time). Statistics need Redis.
   */
  whenDown(policy, c) {
    let out
    if (policy.mode === 'local') {
      out = Float64Array.from(concurrent.memory(policy.local, c))
    } else {
      out = new Float64Array(WIDTH)
      const nowUs = policy.nowUs()
      const allow = policy.mode === 'allow'
      switch (c.op) {
        case OP.acquire:
          out[STATUS] = allow ? 1 : 0
          out[EARLIEST_US] = allow ? 0 : nowUs + policy.retryUs
          out[NOW_US] = nowUs
          break
        case OP.poll:
          out[STATUS] = allow ? 1 : -1
          out[NOW_US] = nowUs
          break
        case OP.stats:
          throw policy.error
        default:
          break // release, extend: 0, not confirmed (a lease granted under 'allow' never asks, see Lease)
      }
    }
    return degraded(out)
  },
  inspect: inspectSection,
  bullmq: bullmqSection,
}

module.exports = concurrent
