'use strict'
// Every kind of limiter the stores run, as the failover tests call it (failover.test.ts through
// failover-kinds-worker.js, whendown.test.ts): per kind, a call on a name that answers whether
// it was admitted, and the hash tag of the name's keys (what decides its cluster slot).
const lib = require('../../lib/entries/index.js')
const { pacedFetch } = require('../../lib/entries/fetch.js')

const HOUR_MS = 3_600_000

/**
 * Per kind: `make(store, name, limit)` answers a call `() => Promise<boolean>`, true when
 * admitted (the counting kinds: at most `limit` per name in the run, plus what the kind
 * refills in it, see BOUND in failover.test.ts), false when refused; a failed call rejects.
 */
const KINDS = {
  window: (store, name, limit) => {
    const l = new lib.WindowLimiter(store, { name, limit, interval: HOUR_MS })
    return async () => (await l.check()).allowed
  },
  leaky: (store, name, limit) => {
    const l = new lib.LeakyLimiter(store, { name, limit, interval: HOUR_MS })
    return async () => (await l.check()).allowed
  },
  sliding: (store, name, limit) => {
    const l = new lib.SlidingWindowLimiter(store, { name, windows: [{ limit, intervalMs: HOUR_MS }] })
    return async () => (await l.check()).allowed
  },
  // calendar windows of 10 days: a run of seconds crosses a window's edge once in about 70,000
  'sliding-counter': (store, name, limit) => {
    const l = new lib.SlidingCounterLimiter(store, { name, windows: [{ limit, intervalMs: 864_000_000 }] })
    return async () => (await l.check()).allowed
  },
  // maxBurst the limit, refilled at 1 per 100 s
  pacer: (store, name, limit) => {
    const p = new lib.DistributedPacer(store, { key: name, qps: 0.01, maxBurst: limit })
    return async () => (await p.rateLimit()).delayMs === 0
  },
  quota: (store, name, limit) => {
    const q = new lib.QuotaLimiter(store)
    const requests = [{ prefix: name, requested: 1, quotas: [{ windowSeconds: 3600, granularitySeconds: 60, limit }] }]
    return async () => (await q.checkAndUseQuotas(requests))[0].granted === 1
  },
  // leases never released: at most `limit` granted
  concurrent: (store, name, limit) => {
    const l = new lib.ConcurrentLimiter(store, { name, limit, lockTimeoutMs: HOUR_MS })
    return async () => (await l.tryAcquire()) !== null
  },
  // reservations left open (they count as spent): a burst of `limit`, then `limit` per hour;
  // no wait
  budget: (store, name, limit) => {
    const b = new lib.Budget(store, { name, dimensions: { calls: { limit, intervalMs: HOUR_MS, maxBurst: limit } } })
    return async () => {
      try {
        await b.reserve({ calls: 1 }, { maxWaitMs: 0 })
        return true
      } catch (err) {
        if (err.code === 'ERR_OVER_LIMIT') return false
        throw err
      }
    }
  },
  // a job per call: a tenant over `limit` jobs in the hour goes to the 'slow' queue
  fair: (store, name, limit) => {
    const f = new lib.FairTenant(store, { name, rules: [{ queue: 'slow', threshold: limit, perMs: HOUR_MS }] })
    let job = 0
    const self = `${process.pid}`
    return async () => (await f.route('t', `${self}-${job++}`, 'default')).queue === 'default'
  },
  // sluice/fetch's record of a key (the adaptive kind): a call is let out (true) or fails
  adaptive: (store, name) => {
    const paced = pacedFetch({
      store,
      key: () => name,
      adaptive: { minQps: 100_000, startQps: 100_000, maxQps: 100_000 },
      fetch: async () => new Response('ok'),
    })
    return async () => (await paced(`http://${name}.example/`)).ok
  },
}

/** The hash tag of the keys of `kind`'s name `name` (the fair tenant's: its name and tenant 't'). */
const hashTag = (kind, name) => (kind === 'fair' ? `${name}:t` : name)

module.exports = { KINDS, hashTag }
