'use strict'
// One limiter benchmark run in a fresh process: argv[2] = JSON { impl, keys, inflight, count,
// url, prefix, limit }. A decision is one check() (rate limiters; `-cached`: a limiter object
// per key, kept), one rateLimit() (`sluice-pacer-cached`), one acquire + release (semaphores),
// or one EVALSHA of a one-line script on ioredis (`ioredis-evalsha`: a JS client's floor). Sends back { decisions, seconds, p50Us, p99Us, nodeCpuUs } over IPC.
const { measure } = require('./harness')

const cfg = JSON.parse(process.argv[2])
const BIG = 1e9 // rate limits nobody reaches: every check is admitted and writes

async function makeDecide() {
  if (cfg.impl.startsWith('sluice-')) {
    const sluice = require('../lib/entries/index.js')
    // '-nostats': the same limiter on a store with statistics off (what statistics cost)
    const stats = !cfg.impl.endsWith('-nostats')
    const store = await sluice.RedisStore.connect({
      url: cfg.url,
      keyPrefix: cfg.prefix,
      stats,
      ...(cfg.statsFlushMs ? { statsFlushMs: cfg.statsFlushMs } : {}),
    })
    const close = () => store.close()
    const batching = () => store.batching
    if (cfg.impl === 'sluice-concurrent') {
      const limiters = new Map()
      const limiter = (key) => {
        let l = limiters.get(key)
        if (!l)
          limiters.set(
            key,
            (l = new sluice.ConcurrentLimiter(store, { name: key, limit: cfg.limit, waitTimeoutMs: 60_000 })),
          )
        return l
      }
      return { decide: (key) => limiter(key).withinLimit(() => undefined), close, batching }
    }
    if (cfg.impl === 'sluice-pacer-cached') {
      // a DistributedPacer per key, made once and kept (a rate nobody reaches: every call admitted at once)
      const pacers = new Map()
      const pacer = (key) => {
        let p = pacers.get(key)
        if (!p) pacers.set(key, (p = new sluice.DistributedPacer(store, { key, qps: BIG, maxBurst: 1000 })))
        return p
      }
      return { decide: (key) => pacer(key).rateLimit(), close, batching }
    }
    if (cfg.impl.endsWith('-cached')) {
      // a limiter object per key, made once and kept (as a peer's limiter is): the issue-41 shape
      const Cached = {
        'sluice-bucket-cached': sluice.BucketLimiter,
        'sluice-window-cached': sluice.WindowLimiter,
        'sluice-leaky-cached': sluice.LeakyLimiter,
      }[cfg.impl]
      const limiters = new Map()
      const limiter = (key) => {
        let l = limiters.get(key)
        if (!l) limiters.set(key, (l = new Cached(store, { name: key, limit: BIG, interval: 60_000 })))
        return l
      }
      return { decide: (key) => limiter(key).check(), close, batching }
    }
    const Limiter = {
      'sluice-bucket': sluice.BucketLimiter,
      'sluice-bucket-nostats': sluice.BucketLimiter,
      'sluice-window': sluice.WindowLimiter,
      'sluice-leaky': sluice.LeakyLimiter,
    }[cfg.impl]
    // a limiter object per decision, as a request handler would create it
    return {
      decide: (key) => new Limiter(store, { name: key, limit: BIG, interval: 60_000 }).check(),
      close,
      batching,
    }
  }
  const Redis = require('ioredis')
  const redis = new Redis(cfg.url)
  const close = () => redis.quit()
  if (cfg.impl === 'rate-limiter-flexible') {
    const { RateLimiterRedis } = require('rate-limiter-flexible')
    const limiter = new RateLimiterRedis({ storeClient: redis, points: BIG, duration: 60, keyPrefix: cfg.prefix })
    return { decide: (key) => limiter.consume(key), close }
  }
  if (cfg.impl === 'ioredis-evalsha') {
    // the floor of a JS client: ioredis and a one-line script (EVALSHA of an INCR), a round trip
    // with nothing else around it
    redis.defineCommand('oneLine', { numberOfKeys: 1, lua: "return redis.call('INCR', KEYS[1])" })
    return { decide: (key) => redis.oneLine(`${cfg.prefix}:${key}`), close }
  }
  if (cfg.impl === 'redis-semaphore') {
    const { Semaphore } = require('redis-semaphore')
    return {
      decide: async (key) => {
        const s = new Semaphore(redis, `${cfg.prefix}:${key}`, cfg.limit, {
          acquireTimeout: 60_000,
          lockTimeout: 30_000,
        })
        await s.acquire()
        await s.release()
      },
      close,
    }
  }
  throw new Error(`unknown impl ${cfg.impl}`)
}

makeDecide()
  .then((impl) => measure(cfg, impl))
  .catch((err) => {
    console.error(err)
    process.exit(1)
  })
