'use strict'
// Issue 25 item 3: what a decision costs Node at the native boundary, measured the way a
// server calls (one decision per event-loop turn, a limiter object per request, statistics
// on, deny cache off, every decision reaching Redis, 10,000 keys), on the pool and the direct
// lane, at 1 and 256 in flight, against rate-limiter-flexible on ioredis (in-memory block
// off). Node CPU per decision is process.cpuUsage() (all threads) minus a no-op loop's;
// Redis CPU per decision is INFO cpu over the measured window. Every configuration runs in a
// fresh process; rounds interleave every configuration (and both trees: BOUNDARY_BEFORE names
// a copy of another tree's lib/ + index.js + .node, e.g. the commit before a change, and
// BOUNDARY_AFTER one of this tree, default this checkout); the
// table gives medians of BOUNDARY_ROUNDS (5).
//
//   source /tmp/redis-env.sh; BOUNDARY_BEFORE=/tmp/boundary/before node bench/boundary.js
//
// Env: SLUICE_REDIS_URL (default redis://127.0.0.1:6379), BOUNDARY_ROUNDS, BOUNDARY_KINDS
// (bucket,pacer), BOUNDARY_INFLIGHT (1,256), BOUNDARY_COUNT (decisions at 256 in flight;
// a tenth of it at 1).
const { fork } = require('node:child_process')
const path = require('node:path')

const KEYS = 10_000
const BIG = 1e9

function list(name, fallback) {
  return (process.env[name] || fallback).split(',').filter(Boolean)
}

// --- child: one configuration -------------------------------------------------------------

async function redisCpuUs(redis) {
  const info = await redis.info('cpu')
  const f = (k) => Number(new RegExp(`${k}:([0-9.]+)`).exec(info)[1])
  return (f('used_cpu_sys') + f('used_cpu_user')) * 1e6
}

async function makeDecide(cfg) {
  if (cfg.impl === 'noop') return { decide: () => Promise.resolve(true), close: async () => {} }
  if (cfg.impl === 'rate-limiter-flexible') {
    const Redis = require('ioredis')
    const { RateLimiterRedis } = require('rate-limiter-flexible')
    const redis = new Redis(cfg.url)
    const points = BIG
    const rl = new RateLimiterRedis({ storeClient: redis, points, duration: 60, keyPrefix: `${cfg.prefix}rlf` })
    return { decide: (key) => rl.consume(key), close: () => redis.quit() }
  }
  // the package entry of the tree, as lib/ is laid out now or was before its layers
  const entry = path.join(cfg.root, 'lib/entries/index.js')
  const sluice = require(require('node:fs').existsSync(entry) ? entry : path.join(cfg.root, 'lib/index.js'))
  const store = await sluice.RedisStore.connect({
    url: cfg.url,
    keyPrefix: cfg.prefix,
    directConnection: cfg.lane === 'direct',
  })
  const close = () => store.close()
  // a limiter object per decision, as a request handler makes it
  if (cfg.kind === 'pacer') {
    return {
      decide: (key) => new sluice.DistributedPacer(store, { key, qps: BIG, maxBurst: BIG }).rateLimit(),
      close,
    }
  }
  return {
    decide: (key) => new sluice.BucketLimiter(store, { name: key, limit: BIG, interval: 60_000 }).check(),
    close,
  }
}

const turn = () => new Promise((resolve) => setImmediate(resolve))

async function child(cfg) {
  const Redis = require('ioredis')
  const { decide, close } = await makeDecide(cfg)
  const info = new Redis(cfg.url)
  const keyOf = (i) => `k${(i * 7919) % KEYS}`
  for (let i = 0; i < Math.min(3000, cfg.count); i++) await decide(keyOf(i))
  const redis0 = await redisCpuUs(info)
  let next = 0
  const cpu0 = process.cpuUsage()
  const t0 = performance.now()
  async function loop() {
    for (;;) {
      const i = next++
      if (i >= cfg.count) return
      await turn()
      await decide(keyOf(i))
    }
  }
  await Promise.all(Array.from({ length: cfg.inflight }, loop))
  const seconds = (performance.now() - t0) / 1000
  const cpu = process.cpuUsage(cpu0)
  const redisUs = (await redisCpuUs(info)) - redis0
  await close()
  info.disconnect()
  process.send({
    perSecond: cfg.count / seconds,
    nodeUs: (cpu.user + cpu.system) / cfg.count,
    redisUs: cfg.impl === 'noop' ? 0 : redisUs / cfg.count,
  })
}

// --- parent: rounds of every configuration -------------------------------------------------

function run(cfg) {
  return new Promise((resolve, reject) => {
    const p = fork(__filename, ['--child', JSON.stringify(cfg)], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] })
    let result = null
    p.on('message', (m) => (result = m))
    p.on('exit', (code) => (result ? resolve(result) : reject(new Error(`${cfg.impl} exited ${code}`))))
  })
}

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b)
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2
}

async function parent() {
  const url = process.env.SLUICE_REDIS_URL || 'redis://127.0.0.1:6379'
  const rounds = Number(process.env.BOUNDARY_ROUNDS) || 5
  const count = Number(process.env.BOUNDARY_COUNT) || 60_000
  const trees = [['after', process.env.BOUNDARY_AFTER || path.join(__dirname, '..')]]
  if (process.env.BOUNDARY_BEFORE) trees.unshift(['before', process.env.BOUNDARY_BEFORE])
  const configs = []
  for (const inflight of list('BOUNDARY_INFLIGHT', '1,256').map(Number)) {
    const n = inflight === 1 ? Math.ceil(count / 10) : count
    configs.push({ name: `noop ${inflight}`, impl: 'noop', inflight, count: n })
    configs.push({ name: `rate-limiter-flexible ${inflight}`, impl: 'rate-limiter-flexible', inflight, count: n })
    for (const kind of list('BOUNDARY_KINDS', 'bucket,pacer')) {
      for (const lane of ['pool', 'direct']) {
        for (const [tree, root] of trees) {
          configs.push({
            name: `${kind} ${lane} ${inflight} ${tree}`,
            impl: 'sluice',
            kind,
            lane,
            tree,
            root,
            inflight,
            count: n,
          })
        }
      }
    }
  }
  const results = new Map(configs.map((c) => [c.name, []]))
  for (let r = 0; r < rounds; r++) {
    // interleaved: every configuration once per round, the trees' order alternating
    const order = r % 2 ? [...configs].reverse() : configs
    for (const c of order) {
      const res = await run({ ...c, url, prefix: `bnd${process.pid}r${r}` })
      results.get(c.name).push(res)
      console.error(
        `round ${r + 1} ${c.name}: ${res.nodeUs.toFixed(2)} µs Node, ${res.redisUs.toFixed(2)} µs Redis, ${Math.round(res.perSecond)}/s`,
      )
    }
  }
  const noop = (inflight) => median(results.get(`noop ${inflight}`).map((x) => x.nodeUs))
  console.log('| configuration | decisions/s | Node CPU µs/decision | minus no-op | Redis CPU µs/decision |')
  console.log('| --- | --- | --- | --- | --- |')
  for (const c of configs) {
    const xs = results.get(c.name)
    const node = median(xs.map((x) => x.nodeUs))
    const cells = [
      c.name,
      Math.round(median(xs.map((x) => x.perSecond))).toLocaleString('en-US'),
      node.toFixed(2),
      c.impl === 'noop' ? '-' : (node - noop(c.inflight)).toFixed(2),
      c.impl === 'noop' ? '-' : median(xs.map((x) => x.redisUs)).toFixed(2),
    ]
    console.log(`| ${cells.join(' | ')} |`)
  }
}

if (process.argv[2] === '--child') {
  child(JSON.parse(process.argv[3])).catch((err) => {
    console.error(err)
    process.exit(1)
  })
} else {
  parent().catch((err) => {
    console.error(err)
    process.exit(1)
  })
}
