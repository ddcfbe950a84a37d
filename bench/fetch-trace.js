#!/usr/bin/env node
'use strict'
// Issue 36 item 4: bench/fetch.js's fleet (4 processes x 16 callers, sluice-adaptive, no rate
// headers, a token bucket of FETCH_TRACE_LIMIT per second with a burst of FETCH_TRACE_BURST) with
// the key's record on Redis read every 50 ms: each time it changes (the count of the cycle's
// successes aside), the rate, the mark, the burst estimate `be`, whether the last fit read a
// bucket, and the cycles kept (S, f in s): what the rule read from each throttled answer. Then
// served/429 per second as the upstream saw them.
//   eval "$(node scripts/redis-servers.js start)"; FETCH_TRACE_LIMIT=100 node bench/fetch-trace.js
// (FETCH_TRACE_SECONDS, 12). The record's layout is src/core/adaptive (59 doubles).
const path = require('node:path')
const { fork } = require('node:child_process')
const Redis = require('ioredis')
const { startUpstream } = require('../__tests__/helpers/upstream.js')

const LIMIT = Number(process.env.FETCH_TRACE_LIMIT || 100)
const BURST = Number(process.env.FETCH_TRACE_BURST || 20)
const SECONDS = Number(process.env.FETCH_TRACE_SECONDS || 12)
const PROCS = 4
const RECORD = 59

async function main() {
  const redis = process.env.SLUICE_REDIS_URL
  if (!redis) throw new Error('SLUICE_REDIS_URL: start a server with scripts/redis-servers.js')
  const up = await startUpstream({ limit: LIMIT, burst: BURST, shape: 'bucket', dialect: 'none', reset: 'epoch' })
  const prefix = `ft${Date.now().toString(36)}`
  const startAt = Date.now() + 1500
  const cfg = { url: up.url + '/api', redis, prefix, mode: 'sluice-adaptive', limit: LIMIT, concurrency: 16 }
  Object.assign(cfg, { reservoir: LIMIT / PROCS, startAt, endAt: startAt + SECONDS * 1000 })
  const worker = path.join(__dirname, 'fetch-worker.js')
  const kids = Array.from({ length: PROCS }, () =>
    fork(worker, [JSON.stringify(cfg)], { stdio: ['ignore', 'ignore', 'inherit', 'ipc'] }),
  )
  await Promise.all(kids.map((c) => new Promise((r) => c.once('message', r))))
  kids.forEach((c) => c.send('go'))
  const done = Promise.all(kids.map((c) => new Promise((r) => c.once('exit', r))))
  await new Promise((r) => setTimeout(r, Math.max(0, startAt - Date.now())))
  up.reset()
  const cli = new Redis(redis)
  let key = null
  let last = ''
  while (Date.now() < startAt + SECONDS * 1000) {
    if (key === null) key = (await cli.keys(`${prefix}:adaptive:v2:*`))[0] ?? null
    const buf = key === null ? null : await cli.getBuffer(key)
    if (buf && buf.length === 8 * RECORD) {
      const d = Array.from({ length: RECORD }, (_, i) => buf.readDoubleLE(8 * i))
      const [rate, mark, be, bucketFit, cycN] = [d[0], d[11], d[14], d[16], d[25]]
      const cycles = []
      for (let i = 0; i < cycN; i++) cycles.push(`${d[17 + 2 * i]}/${(d[18 + 2 * i] / 1e6).toFixed(3)}`)
      const line = `mark ${mark.toFixed(1)} be ${be.toFixed(1)} bucketFit ${bucketFit} cycles ${cycles.join(' ')}`
      if (line !== last) console.log(`${((Date.now() - startAt) / 1000).toFixed(2)} s: rate ${rate.toFixed(1)} ${line}`)
      last = line
    }
    await new Promise((r) => setTimeout(r, 50))
  }
  await done
  const c = up.counts
  const row = (s) => (c.perSecond.get(s) || [0, 0, 0]).slice(1).join('/')
  console.log(`served/429 per second: ${Array.from({ length: SECONDS }, (_, s) => row(s)).join(' ')}`)
  await cli.quit()
  await up.close()
}

main().catch((err) => {
  console.error(err)
  process.exit(1)
})
