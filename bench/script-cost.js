'use strict'
// What one script call costs Redis, at 1 call in flight (the server pattern's usual batch of
// one): Redis CPU (INFO cpu) per call of sluice's limit.lua (a bucket take) and pacer.lua
// (a pace), beside a GET, an empty script and a script shaped like rate-limiter-flexible's
// (INCRBY, PEXPIRE on the first, PTTL), all sent by one ioredis client, each call in its own
// event-loop turn, alternated rounds. It separates the script's own work from what every
// command costs the server (reading, parsing, replying, the event loop).
// Usage: SLUICE_REDIS_URL=redis://... node bench/script-cost.js [calls per round]
const fs = require('node:fs')
const path = require('node:path')
const Redis = require('ioredis')

const N = Number(process.argv[2] || 10000)
const ROUNDS = 3
const lua = (name) => fs.readFileSync(path.join(__dirname, '..', 'lua', name), 'utf8')

async function cpuUs(client) {
  const info = await client.info('cpu')
  const get = (k) => Number(new RegExp(`${k}:([0-9.]+)`).exec(info)[1])
  return (get('used_cpu_user') + get('used_cpu_sys')) * 1e6
}

async function main() {
  const url = process.env.SLUICE_REDIS_URL
  if (!url) throw new Error('SLUICE_REDIS_URL is required')
  const meter = new Redis(url)
  const c = new Redis(url)
  const load = (text) => meter.script('load', text)
  const limiter = await load(lua('limit.lua'))
  const pacer = await load(lua('pacer.lua'))
  const empty = await load('return {1, 2, 3, 4}')
  const rlf = await load(
    "local v = redis.call('incrby', KEYS[1], ARGV[1]) " +
      "if v == tonumber(ARGV[1]) then redis.call('pexpire', KEYS[1], ARGV[2]) end " +
      "return {v, redis.call('pttl', KEYS[1])}",
  )
  const k = (i) => `script-cost:{k${i % 10000}}`
  const cases = {
    GET: (i) => c.get(k(i)),
    'empty script': (i) => c.evalsha(empty, 1, k(i)),
    'rate-limiter-flexible-like script': (i) => c.evalsha(rlf, 1, `rlf:${k(i)}`, 1, 60000),
    'limit.lua (bucket take)': (i) => c.evalsha(limiter, 1, `lim:${k(i)}`, '', 4, 1, 1e9, 60000000, 0),
    'pacer.lua (pace)': (i) => c.evalsha(pacer, 1, `pac:${k(i)}`, '', 1, 1e6, 1e6, 1, 1, (1 * 1048576 + 1) * 4 + 1),
  }
  const got = {}
  for (let r = 0; r < ROUNDS; r++) {
    for (const [name, call] of Object.entries(cases)) {
      const before = await cpuUs(meter)
      for (let i = 0; i < N; i++) {
        await call(i)
        await new Promise((resolve) => setImmediate(resolve))
      }
      ;(got[name] ??= []).push(((await cpuUs(meter)) - before) / N)
    }
  }
  const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]
  const base = median(got['empty script'])
  console.log(`Redis CPU per call, µs, 1 in flight, median of ${ROUNDS} rounds of ${N}:`)
  for (const [name, xs] of Object.entries(got)) {
    const m = median(xs)
    console.log(`${name.padEnd(36)} ${m.toFixed(1).padStart(6)}  (over an empty script: ${(m - base).toFixed(1)})`)
  }
  await Promise.all([meter.quit(), c.quit()])
}

main().catch((err) => {
  console.error(err)
  process.exit(1)
})
