'use strict'
// The end-to-end scenario's server: a node:http server making one rate-limit decision per
// request (the key is the path: /k123), 200 when admitted, 429 when not. argv[2] = JSON
// { impl: 'none' | 'sluice' | 'rate-limiter-flexible', url, prefix }. Tells the parent its port
// over IPC; on 'start' and 'stop' it measures its own CPU and, for sluice, native calls.
const http = require('node:http')

const cfg = JSON.parse(process.argv[2])
const BIG = 1e9 // a limit nobody reaches: every request is admitted and writes

async function makeDecide() {
  if (cfg.impl === 'none') return { decide: null, close: () => {} }
  if (cfg.impl === 'sluice') {
    const { RedisStore, BucketLimiter } = require('../lib/entries/index.js')
    const store = await RedisStore.connect({ url: cfg.url, keyPrefix: cfg.prefix })
    return {
      // a limiter object per request, as a handler would create it for a per-client name
      decide: (key) =>
        new BucketLimiter(store, { name: key, limit: BIG, interval: 60_000 }).check().then((d) => d.allowed),
      close: () => store.close(),
      batching: () => store.batching,
    }
  }
  if (cfg.impl === 'rate-limiter-flexible') {
    const Redis = require('ioredis')
    const { RateLimiterRedis } = require('rate-limiter-flexible')
    const redis = new Redis(cfg.url)
    const limiter = new RateLimiterRedis({ storeClient: redis, points: BIG, duration: 60, keyPrefix: cfg.prefix })
    return {
      // consume() rejects with a RateLimiterRes when refused, with an Error when Redis fails
      decide: (key) =>
        limiter.consume(key).then(
          () => true,
          (r) => (r instanceof Error ? Promise.reject(r) : false),
        ),
      close: () => redis.quit(),
    }
  }
  throw new Error(`unknown impl ${cfg.impl}`)
}

function reply(res, status) {
  res.writeHead(status, { 'content-type': 'text/plain', 'content-length': 2 })
  res.end(status === 200 ? 'ok' : 'no')
}

makeDecide().then(({ decide, close, batching }) => {
  let requests = 0
  let errors = 0
  const server = http.createServer((req, res) => {
    requests++
    if (!decide) return reply(res, 200)
    decide(req.url.slice(1)).then(
      (allowed) => reply(res, allowed ? 200 : 429),
      () => {
        errors++
        reply(res, 500)
      },
    )
  })
  let cpu0, requests0, batches0
  process.on('message', async (msg) => {
    if (msg === 'start') {
      cpu0 = process.cpuUsage()
      requests0 = requests
      batches0 = batching ? batching().batches : NaN
    } else if (msg === 'stop') {
      const cpu = process.cpuUsage(cpu0)
      const handled = requests - requests0
      process.send({
        handled,
        errors,
        cpuUs: cpu.user + cpu.system,
        nativeCalls: batching ? batching().batches - batches0 : NaN,
      })
      server.closeAllConnections()
      server.close()
      await close()
      process.exit(0)
    }
  })
  server.listen(0, '127.0.0.1', () => process.send({ port: server.address().port }))
})
