#!/usr/bin/env node
'use strict'
// What store.rules (issue 39, DESIGN §9) costs and how fast a change reaches the fleet, on one
// local Redis (SLUICE_REDIS_URL, else a redis-server this starts):
//   1. the lookup a decision makes, ns, at 0, 1, 1,000 and 100,000 rules (names of 12 and 200
//      characters; exact and prefix rules), in this process;
//   2. commands per decision (INFO commandstats around 20,000 BucketLimiter checks on 1,000
//      keys, 64 in flight, one per event-loop turn) with 1, 1,000 and 100,000 rules in the
//      table, and decisions/s against the same run with no rule;
//   3. propagation: 1,000 changes made by one process, the time until each of PROCESSES other
//      processes (forked, each deciding at 64 in flight meanwhile) applies it: p50, p99, max.
// RULES_BENCH_PARTS=1,2,3  RULES_BENCH_PROCESSES=4  RULES_BENCH_CHANGES=1000
// SLUICE_REDIS_CLUSTER=url,url,...: part 3 on that Redis Cluster too (the writer and the
// readers connect to it; `eval "$(node scripts/redis-servers.js start)"` starts one)
const { fork, spawn } = require('node:child_process')
const net = require('node:net')
const os = require('node:os')
const Redis = require('ioredis')
const { RedisStore, BucketLimiter } = require('../lib/entries/index.js')
const { RuleTable } = require('../lib/store/rules/table.js')
const { checkTarget, checkRule } = require('../lib/store/rules/check.js')

const PARTS = (process.env.RULES_BENCH_PARTS || '1,2,3').split(',')
const PROCESSES = Number(process.env.RULES_BENCH_PROCESSES || 4)
const CHANGES = Number(process.env.RULES_BENCH_CHANGES || 1000)
const IN_FLIGHT = 64
const turn = () => new Promise((r) => setImmediate(r))
const load = () =>
  os
    .loadavg()
    .map((x) => x.toFixed(2))
    .join(' ')

const put = (table, target, rule) => table.put(checkTarget(target), checkRule(checkTarget(target), rule))

function lookups() {
  const names = [12, 200].map((n) => Array.from({ length: 1000 }, (_, i) => `user-${i}-`.padEnd(n, 'x')))
  const rows = []
  for (const size of [0, 1, 1_000, 100_000]) {
    const t = new RuleTable()
    for (let i = 0; i < size; i++) put(t, { kind: 'bucket', name: `rule-${i}` }, { limit: 1 + (i % 100) })
    if (size > 0) put(t, { kind: 'bucket', prefix: 'user-' }, { limit: 7 })
    if (size >= 1000) put(t, { kind: 'bucket', prefix: 'user-99' }, { limit: 8 })
    for (const list of names) {
      let found = 0
      const n = 2_000_000
      for (let i = 0; i < 100_000; i++) if (t.forName('bucket', list[i % 1000], 0)) found++ // warm
      const start = process.hrtime.bigint()
      for (let i = 0; i < n; i++) if (t.forName('bucket', list[i % 1000], 0)) found++
      const ns = Number(process.hrtime.bigint() - start) / n
      rows.push(`| ${size.toLocaleString('en')} | ${list[0].length} | ${ns.toFixed(1)} | ${found > 0 ? 'yes' : 'no'} |`)
    }
  }
  console.log('\n#### The lookup a decision makes (this process)\n')
  console.log('| rules | name length | ns per lookup | a rule found |\n| ---: | ---: | ---: | --- |')
  for (const r of rows) console.log(r)
}

async function commandStats(raw) {
  const text = await raw.info('commandstats')
  const out = {}
  for (const m of text.matchAll(/cmdstat_([a-z|]+):calls=(\d+)/g)) out[m[1]] = Number(m[2])
  return out
}

async function decide(store, keys, total) {
  const limiters = Array.from(
    { length: keys },
    (_, i) => new BucketLimiter(store, { name: `k${i}`, limit: 1e9, interval: 'hour' }),
  )
  let next = 0
  const start = performance.now()
  await Promise.all(
    Array.from({ length: IN_FLIGHT }, async () => {
      while (next < total) {
        const i = next++
        await limiters[i % keys].check()
        await turn()
      }
    }),
  )
  return total / ((performance.now() - start) / 1000)
}

async function roundTrips(url) {
  console.log('\n#### Commands per decision with rules in the table (INFO commandstats)\n')
  console.log(
    '| rules | decisions/s | EVALSHA per decision | all commands per decision | load |\n| ---: | ---: | ---: | ---: | --- |',
  )
  const raw = new Redis(url)
  for (const size of [0, 1, 1_000, 100_000]) {
    const keyPrefix = `rb${size}-${process.pid}`
    const store = await RedisStore.connect({ url, keyPrefix, statsFlushMs: 600_000 })
    // the rules written straight to the table's hash (the store reads them all at connect):
    // 100,000 set() calls would take minutes; the hash is what set() writes
    if (size > 0) {
      const table = `${keyPrefix}:rules:{rules}`
      for (let from = 0; from < size; from += 1000) {
        const args = []
        for (let i = from; i < Math.min(size, from + 1000); i++) {
          args.push(JSON.stringify(['n', 'bucket', `rule-${i}`]), JSON.stringify({ rule: { limit: 5 } }))
        }
        await raw.hset(table, ...args)
      }
      await raw.set(`${keyPrefix}:rules:{rules}:version`, '1')
      await raw.pexpire(table, 600_000)
      await raw.pexpire(`${keyPrefix}:rules:{rules}:version`, 600_000)
      await store.close()
    }
    const s = size > 0 ? await RedisStore.connect({ url, keyPrefix, statsFlushMs: 600_000 }) : store
    if (s.rules._table.size !== size) throw new Error(`loaded ${s.rules._table.size} rules, not ${size}`)
    await decide(s, 1000, 2000) // warm
    const before = await commandStats(raw)
    const total = 20_000
    const rate = await decide(s, 1000, total)
    const after = await commandStats(raw)
    const delta = (k) => (after[k] ?? 0) - (before[k] ?? 0)
    const all = Object.keys(after).reduce((n, k) => n + delta(k), 0) - 2 // the two INFO calls
    console.log(
      `| ${size.toLocaleString('en')} | ${Math.round(rate).toLocaleString('en')} | ${(delta('evalsha') / total).toFixed(4)} | ${(all / total).toFixed(4)} | ${load()} |`,
    )
    await s.close()
  }
  raw.disconnect()
}

/** A reader process: decides at 64 in flight, reports each rule version it applies, with when. */
async function reader(connection, keyPrefix) {
  const store = await RedisStore.connect({ ...JSON.parse(connection), keyPrefix, statsFlushMs: 600_000 })
  const rules = store.rules
  let seen = rules._forName('bucket', 'probe')?.rule.limit ?? 0
  let stop = false
  process.on('message', (m) => {
    if (m === 'stop') stop = true
  })
  const limiters = Array.from(
    { length: 100 },
    (_, i) => new BucketLimiter(store, { name: `r${i}`, limit: 1e9, interval: 'hour' }),
  )
  let n = 0
  const work = Array.from({ length: IN_FLIGHT }, async () => {
    while (!stop) {
      await limiters[n++ % 100].check()
      const limit = rules._forName('bucket', 'probe')?.rule.limit ?? 0
      if (limit !== seen) {
        seen = limit
        process.send({ limit, at: Date.now() })
      }
      await turn()
    }
  })
  process.send('ready')
  await Promise.all(work)
  process.send({ decisions: n })
  await store.close()
  process.exit(0)
}

async function propagation(connection, where) {
  const keyPrefix = `rp-${process.pid}`
  const writer = await RedisStore.connect({ ...connection, keyPrefix })
  const children = []
  const applied = new Map() // limit -> [at per child]
  let decisions = 0
  for (let i = 0; i < PROCESSES; i++) {
    const child = fork(__filename, ['reader', JSON.stringify(connection), keyPrefix])
    await new Promise((resolve) =>
      child.on('message', (m) => {
        if (m === 'ready') resolve()
        else if (m.decisions !== undefined) decisions += m.decisions
        else {
          if (!applied.has(m.limit)) applied.set(m.limit, [])
          applied.get(m.limit).push(m.at)
        }
      }),
    )
    children.push(child)
  }
  const sent = new Map()
  const start = Date.now()
  for (let i = 1; i <= CHANGES; i++) {
    sent.set(i, Date.now())
    await writer.rules.set({ kind: 'bucket', name: 'probe' }, { limit: i })
    // one change every 2-12 ms, so each reaches the readers before the next (most of the time)
    await new Promise((r) => setTimeout(r, 2 + (i % 11)))
  }
  await new Promise((r) => setTimeout(r, 1500))
  const seconds = (Date.now() - start) / 1000
  for (const c of children) c.send('stop')
  await Promise.all(children.map((c) => new Promise((r) => c.on('exit', r))))
  const lags = []
  let missed = 0
  for (const [limit, at] of sent) {
    const got = applied.get(limit) ?? []
    missed += PROCESSES - got.length // overtaken by the next change before a reader looked
    for (const t of got) lags.push(t - at)
  }
  lags.sort((a, b) => a - b)
  const q = (p) => lags[Math.min(lags.length - 1, Math.floor(p * lags.length))]
  console.log(
    `\n#### Propagation (${where}): ${CHANGES} changes by one process, ${PROCESSES} others deciding at ${IN_FLIGHT} in flight\n`,
  )
  console.log(
    '| applied | p50 ms | p99 ms | max ms | versions overtaken | decisions/s (all readers) | load |\n| ---: | ---: | ---: | ---: | ---: | ---: | --- |',
  )
  console.log(
    `| ${lags.length} | ${q(0.5)} | ${q(0.99)} | ${lags.at(-1)} | ${missed} | ${Math.round(decisions / seconds).toLocaleString('en')} | ${load()} |`,
  )
  await writer.close()
}

async function withRedis(fn) {
  if (process.env.SLUICE_REDIS_URL) return fn(process.env.SLUICE_REDIS_URL)
  const port = await new Promise((resolve) => {
    const s = net.createServer().listen(0, '127.0.0.1', () => {
      const p = s.address().port
      s.close(() => resolve(p))
    })
  })
  const server = spawn('redis-server', ['--port', String(port), '--save', '', '--appendonly', 'no'], {
    stdio: 'ignore',
  })
  const raw = new Redis(port, { lazyConnect: true, retryStrategy: () => null, maxRetriesPerRequest: 0 })
  raw.on('error', () => {}) // refused until the server listens
  for (let i = 0; i < 100; i++) {
    try {
      await raw.connect()
      break
    } catch {
      await new Promise((r) => setTimeout(r, 50))
    }
  }
  raw.disconnect()
  try {
    await fn(`redis://127.0.0.1:${port}`)
  } finally {
    server.kill()
  }
}

async function main() {
  console.log(`rules bench, ${new Date().toISOString()}, ${os.cpus().length} cores, load ${load()}`)
  if (PARTS.includes('1')) lookups()
  if (!PARTS.includes('2') && !PARTS.includes('3')) return
  await withRedis(async (url) => {
    if (PARTS.includes('2')) await roundTrips(url)
    if (PARTS.includes('3')) await propagation({ url }, 'one Redis')
  })
  const cluster = process.env.SLUICE_REDIS_CLUSTER
  if (PARTS.includes('3') && cluster) await propagation({ cluster: cluster.split(',') }, 'a 3-master Redis Cluster')
}

if (process.argv[2] === 'reader') reader(process.argv[3], process.argv[4])
else main()
