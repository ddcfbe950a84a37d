// Issue 25 item 4, counted across processes: a door's several windows are decided all or
// nothing on Redis and the cluster while 4 processes × 8 loops hammer one client key with
// weights 1..3. The binding window admits its limit and no more, every window holds exactly
// the weight admitted (no charge a refusal left behind), and since a refused charge is never
// made, nothing is admitted beyond what the tightest window allows.
import { fork } from 'node:child_process'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { clusterNodes, freshPrefix, redisUrl, REDIS_KINDS } from './helpers/stores.js'

interface Result {
  admitted: number[]
  refused: number
  used: number[]
}

describe.each(REDIS_KINDS)('a door of several windows across 4 processes on %s', (kind) => {
  it('admits exactly the tightest window, and every window holds exactly what was admitted', async () => {
    // window 2 binds (30 per 2 minutes), window 1 would allow more (40 per minute): the
    // test runs for 2 s, inside both windows
    const limits = [
      { limit: 40, windowMs: 60_000 },
      { limit: 30, windowMs: 120_000 },
    ]
    const cfg = {
      ...(kind === 'redis' ? { url: redisUrl() } : { cluster: clusterNodes() }),
      prefix: freshPrefix(),
      algorithm: 'window',
      limits,
      startAt: Date.now() + 1500,
      durationMs: 2000,
      inflight: 8,
    }
    const worker = join(__dirname, 'helpers', 'door-windows-worker.js')
    const results = await Promise.all(
      Array.from({ length: 4 }, (_, i) => {
        const child = fork(worker, [JSON.stringify({ ...cfg, seed: 7 + i })])
        return new Promise<Result>((resolve, reject) => {
          child.once('message', (m) => resolve(m as Result))
          child.once('exit', (code) => code !== 0 && reject(new Error(`worker exited with ${code}`)))
        })
      }),
    )
    const admittedWeight = results.reduce((s, r) => s + r.admitted.reduce((a, b) => a + b, 0), 0)
    const calls = results.reduce((s, r) => s + r.admitted.length + r.refused, 0)
    console.info(`${kind}: ${calls} decisions, admitted weight ${admittedWeight} (tightest window 30)`)
    expect(calls).toBeGreaterThan(200) // the limit was contended, not just reached
    // never over the tightest window; and filled to within one call's weight (a weight of at
    // most 3 that did not fit leaves at most 2 units unused while calls of weight 1 keep coming)
    expect(admittedWeight).toBeLessThanOrEqual(30)
    expect(admittedWeight).toBeGreaterThanOrEqual(28)
    // every process reads the same windows after its loops; each holds exactly the admitted
    // weight: nothing was charged for a refused call, nothing lost
    for (const r of results) expect(r.used).toEqual([admittedWeight, admittedWeight])
  })
})
