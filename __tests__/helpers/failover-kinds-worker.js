'use strict'
// One process of the per-kind failover sweep (failover.test.ts): every kind at once (see
// every-kind.js), each on its own names (spread over the cluster's slots), until told to stop,
// recording every decision per name: admitted, refused, or failed with a store code, and how
// long it took. Each of `loops` loops per kind calls `group` names at once (one batch holding
// calls for several masters), then pauses `pauseMs`. argv[2] = JSON { cluster, prefix, kinds,
// names, limit, commandTimeoutMs, loops, group, pauseMs }: `names` per kind, `limit` what each
// name of a counting kind admits, for a run far shorter than any of their intervals.
const lib = require('../../lib/entries/index.js')
const { KINDS } = require('./every-kind.js')

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
