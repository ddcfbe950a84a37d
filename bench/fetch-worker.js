'use strict'
// One process of the sluice/fetch benchmark and multi-process test (bench/fetch.js,
// __tests__/fetch-multiprocess.test.ts): `concurrency` callers call the upstream until `endAt`
// (or `calls` calls in all), by `mode`: 'none' (concurrency only, Retry-After honoured per call),
// 'bottleneck' (a reservoir of `reservoir` per second in this process), 'sluice-qps' (pacedFetch,
// qps), 'sluice-learn' (pacedFetch, no rate given: learned from headers), 'sluice-adaptive'
// (pacedFetch, adaptive with startQps = maxQps), 'bare' (fetch alone) and 'sluice-unpaced'
// (pacedFetch with no limit, for the overhead). Prints one JSON line: its counts and CPU.
const { RedisStore } = require('../lib/entries/index.js')
const { pacedFetch } = require('../lib/entries/fetch.js')

const cfg = JSON.parse(process.argv[2])
const sleep = (ms) => new Promise((r) => setTimeout(r, ms))

async function main() {
  const store =
    cfg.mode.startsWith('sluice') &&
    (await RedisStore.connect(
      cfg.cluster ? { cluster: cfg.cluster, keyPrefix: cfg.prefix } : { url: cfg.redis, keyPrefix: cfg.prefix },
    ))
  let send
  const counts = { calls: 0, ok: 0, failed: 0, status429: 0 }
  // the peers' way: a 429 waits its Retry-After in this caller, then tries again (3 retries)
  const byHand = (go) => async () => {
    for (let attempt = 0; ; attempt++) {
      const res = await go()
      await res.arrayBuffer()
      if (res.status !== 429 || attempt === 3) return res
      counts.status429++
      await sleep(Number(res.headers.get('retry-after') || 1) * 1000)
    }
  }
  if (cfg.mode === 'none' || cfg.mode === 'bare') {
    send =
      cfg.mode === 'bare'
        ? () => fetch(cfg.url).then(async (r) => (await r.arrayBuffer(), r))
        : byHand(() => fetch(cfg.url))
  } else if (cfg.mode === 'bottleneck') {
    const Bottleneck = require('bottleneck')
    const r = Math.max(1, Math.floor(cfg.reservoir))
    const limiter = new Bottleneck({
      reservoir: r,
      reservoirRefreshAmount: r,
      reservoirRefreshInterval: 1000,
      maxConcurrent: cfg.concurrency,
    })
    send = byHand(() => limiter.schedule(() => fetch(cfg.url)))
  } else {
    const options = { store, retry: { maxRetries: 3 } }
    if (cfg.mode === 'sluice-qps') options.qps = cfg.limit
    if (cfg.mode === 'sluice-adaptive') options.adaptive = { maxQps: cfg.limit * 10, startQps: cfg.limit * 10 }
    const f = pacedFetch(options)
    send = async () => {
      const res = await f(cfg.url)
      await res.arrayBuffer()
      return res
    }
    counts.paced = f
  }
  // ready: the orchestrator says go once every process is (all start at one moment)
  if (process.send) {
    await new Promise((r) => {
      process.once('message', r)
      process.send('ready')
    })
    process.disconnect()
  }
  // the upstream counts from startAt: the calls begin there, not when the last process was ready
  if (cfg.startAt !== undefined && cfg.startAt > Date.now()) await sleep(cfg.startAt - Date.now())
  const cpu0 = process.cpuUsage()
  const t0 = performance.now()
  let left = cfg.calls ?? Infinity
  const caller = async () => {
    while (left > 0 && (cfg.endAt === undefined || Date.now() < cfg.endAt)) {
      left--
      counts.calls++
      try {
        const res = await send()
        if (res.status === 200) counts.ok++
        else counts.failed++
      } catch {
        counts.failed++
      }
    }
  }
  await Promise.all(Array.from({ length: cfg.concurrency }, caller))
  const elapsedMs = performance.now() - t0
  const cpu = process.cpuUsage(cpu0)
  const stats = counts.paced ? await counts.paced.stats() : []
  delete counts.paced
  if (store) await store.close()
  process.stdout.write(JSON.stringify({ ...counts, elapsedMs, cpuUs: cpu.user + cpu.system, stats }) + '\n')
}

main().catch((err) => {
  console.error(err)
  process.exit(1)
})
