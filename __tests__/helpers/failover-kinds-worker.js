'use strict'
// One process of the per-kind failover sweep (failover.test.ts): every kind at once, each on
// its own names (spread over the cluster's slots), as fast as a few loops per kind go until
// told to stop, recording every decision per name: admitted, refused, or failed with a store
// code, and how long it took. Each loop calls `group` names at once (one batch holding calls
// for several masters), then pauses `pauseMs`. argv[2] = JSON { cluster, prefix, kinds, names,
// limit, commandTimeoutMs, loops, group, pauseMs }: `names` per kind, `limit` what each name of a counting kind admits (its
// limiter's limit), for a run far shorter than any of their intervals.
const lib = require('../../lib/index.js')
const { pacedFetch } = require('../../lib/fetch.js')

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
  // calendar windows of 10 days: a run crosses a window's edge about once in 10 years of runs
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

async function main() {
  const cfg = JSON.parse(process.argv[2])
  const store = await lib.RedisStore.connect({
    cluster: cfg.cluster,
    keyPrefix: cfg.prefix,
    commandTimeoutMs: cfg.commandTimeoutMs,
    connectTimeoutMs: 5000,
    statsFlushMs: 600_000,
  })
  const per = {}
  for (const kind of cfg.kinds) {
    const names = cfg.names[kind]
    per[kind] = {
      calls: names.map((n) => KINDS[kind](store, n, cfg.limit)),
      admitted: Object.fromEntries(names.map((n) => [n, 0])),
      // when each name last got an answer from Redis (admitted or refused), ms since the epoch
      answeredAt: Object.fromEntries(names.map((n) => [n, 0])),
      // decisions that failed with a code, per name
      failed: Object.fromEntries(names.map((n) => [n, 0])),
      codes: {},
      messages: {},
      // [name, when (ms since the epoch), code and message] of the first failures
      failures: [],
      decisions: 0,
      slowest: 0,
    }
  }
  let stopping = false
  process.on('message', (m) => {
    if (m === 'stop') stopping = true
  })
  process.send('ready')
  // one call, counted
  const call = async (r, n, decide) => {
    const t0 = performance.now()
    try {
      if (await decide()) r.admitted[n]++
      r.answeredAt[n] = Date.now()
    } catch (err) {
      const code = err.code || 'uncoded'
      r.codes[code] = (r.codes[code] || 0) + 1
      r.failed[n]++
      const text = `${code}: ${String(err.message).slice(0, 120)}`
      r.messages[text] = (r.messages[text] || 0) + 1
      if (r.failures.length < 2000) r.failures.push([n, Date.now(), text])
    }
    r.decisions++
    r.slowest = Math.max(r.slowest, performance.now() - t0)
  }
  // rounds of `group` names at once (a batch of calls for several masters), `pauseMs` apart
  const loop = async (kind, k) => {
    const r = per[kind]
    const names = cfg.names[kind]
    for (let i = k * cfg.group; !stopping; i += cfg.group * cfg.loops) {
      const round = []
      for (let j = i; j < i + cfg.group; j++) round.push(call(r, names[j % names.length], r.calls[j % names.length]))
      await Promise.all(round)
      await new Promise((res) => setTimeout(res, cfg.pauseMs))
    }
  }
  const loops = []
  for (const kind of cfg.kinds) for (let k = 0; k < cfg.loops; k++) loops.push(loop(kind, k))
  await Promise.all(loops)
  await store.close()
  process.send(per, () => process.exit(0))
}

main().catch((err) => {
  process.send({ crashed: String(err && err.stack) })
})
