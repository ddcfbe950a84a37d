// sluice/fetch across processes: 4 processes x 16 callers make a fixed number of calls to a fake
// upstream with a hidden limit (a token bucket of 100/s, burst 5) answering 429 + Retry-After,
// in three dialects (no rate headers, with qps given or the adaptive rate from 10 x L; IETF
// draft-10 and X-RateLimit-* learned), on Redis and on a cluster. Counted, never timed: every call is served in the end, and the
// 429s the fleet drew stay a bounded share of what it sent (the counts are printed).
import { fork } from 'node:child_process'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { REDIS_KINDS, clusterNodes, freshPrefix, redisUrl } from './helpers/stores.js'
// eslint-disable-next-line @typescript-eslint/no-require-imports
const { startUpstream } = require('./helpers/upstream.js')

const WORKER = join(__dirname, '..', 'bench', 'fetch-worker.js')
const PROCS = 4
const CALLS = 100 // per process
const LIMIT = 100

interface Report {
  calls: number
  ok: number
  failed: number
  stats: { throttled: number; blocks: number; retries: number }[]
}

async function fleet(cfg: object): Promise<Report[]> {
  const children = Array.from({ length: PROCS }, () =>
    fork(WORKER, [JSON.stringify(cfg)], { stdio: ['ignore', 'pipe', 'inherit', 'ipc'] }),
  )
  const reports = children.map(
    (c) =>
      new Promise<Report>((resolve, reject) => {
        let out = ''
        c.stdout!.on('data', (d) => (out += d))
        c.once('exit', (code) =>
          code === 0 ? resolve(JSON.parse(out.trim().split('\n').pop()!)) : reject(new Error(`worker exited ${code}`)),
        )
      }),
  )
  await Promise.all(children.map((c) => new Promise((r) => c.once('message', r))))
  children.forEach((c) => c.send('go'))
  return Promise.all(reports)
}

const DIALECTS = [
  ['none', 'sluice-qps'],
  ['none', 'sluice-adaptive'],
  ['draft10', 'sluice-learn'],
  ['xrl', 'sluice-learn'],
] as const

describe.each(REDIS_KINDS)('sluice/fetch, 4 processes x 16 callers on %s', (topology) => {
  it.each(DIALECTS)(
    'dialect %s (%s): every call served, few 429s',
    async (dialect, mode) => {
      const up = await startUpstream({ limit: LIMIT, burst: 5, dialect })
      try {
        const store = topology === 'redis' ? { redis: redisUrl() } : { cluster: clusterNodes() }
        const reports = await fleet({
          ...store,
          url: up.url + '/api',
          prefix: freshPrefix(),
          mode,
          limit: LIMIT,
          concurrency: 16,
          calls: CALLS,
        })
        const c = up.counts
        const served = reports.reduce((a, r) => a + r.ok, 0)
        const throttled = reports.reduce((a, r) => a + r.stats.reduce((b, s) => b + s.throttled, 0), 0)
        const blocks = reports.reduce((a, r) => a + r.stats.reduce((b, s) => b + s.blocks, 0), 0)
        const seconds = [...c.perSecond.keys()].length
        console.log(
          `fetch ${topology} ${dialect} ${mode}: ${served}/${PROCS * CALLS} served, ${c.requests} sent, ` +
            `${c.refused} answered 429 (${((100 * c.refused) / c.requests).toFixed(1)} %), ${blocks} blocks recorded, ` +
            `${(c.served / seconds).toFixed(0)} served/s over ${seconds} s (L = ${LIMIT})`,
        )
        expect(reports.map((r) => r.failed)).toEqual([0, 0, 0, 0])
        expect(served).toBe(PROCS * CALLS)
        expect(c.served).toBe(PROCS * CALLS)
        expect(throttled).toBe(c.refused) // every 429 was seen by the process that drew it
        // counts under real time: bounds a loaded 2-core machine keeps (the goals are the
        // benchmark's, bench/fetch.js); 64 callers with no pacing draw 30-60 % of 429s there
        if (mode === 'sluice-qps') expect(c.refused).toBeLessThan(0.15 * c.requests)
        // learning, and the adaptive rate from 10 x L: most 429s are the first wave (one call per
        // caller, 64, before any answer taught or the shared rate came down)
        else expect(c.refused).toBeLessThan(0.3 * c.requests)
      } finally {
        await up.close()
      }
    },
    60_000,
  )
})
