// Several Node processes share one limit through Redis: admissions are counted, never
// above the bound; pace() keeps the achieved rate at qps.
import { fork } from 'node:child_process'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { clusterNodes, freshPrefix, redisUrl, REDIS_KINDS } from './helpers/stores.js'

interface WorkerResult {
  firstSend: number
  lastReceive: number
  admittedWeight: number
  admittedCalls: number
  refused: number
  maxWeight: number
  executions: number[]
  error?: string
}

const PROCESSES = 4

function runWorkers(config: Record<string, unknown>): Promise<WorkerResult[]> {
  const startAt = Date.now() + 1500 // time for every process to load and connect
  return Promise.all(
    Array.from({ length: PROCESSES }, (_, i) => {
      const child = fork(join(__dirname, 'helpers', 'worker.js'), [
        JSON.stringify({ ...config, startAt, seed: 17 + i }),
      ])
      return new Promise<WorkerResult>((resolve, reject) => {
        child.once('message', (m) => resolve(m as WorkerResult))
        child.once('exit', (code) => code !== 0 && reject(new Error(`worker exited with ${code}`)))
      })
    }),
  )
}

describe.each(REDIS_KINDS)(`${PROCESSES} processes on %s`, (kind) => {
  const target = kind === 'redis' ? { url: redisUrl() } : { cluster: clusterNodes() }

  it('rateLimit never admits more than maxBurst + qps*T + one call, counted', async () => {
    const qps = 400
    const maxBurst = 50
    const results = await runWorkers({
      ...target,
      prefix: freshPrefix(),
      key: 'hammered',
      mode: 'rateLimit',
      qps,
      maxBurst,
      durationMs: 2000,
      inflight: 32,
      maxRandomWeight: 3,
    })
    for (const r of results) expect(r.error).toBeUndefined()
    const admitted = results.reduce((s, r) => s + r.admittedWeight, 0)
    const refused = results.reduce((s, r) => s + r.refused, 0)
    const spanS = (Math.max(...results.map((r) => r.lastReceive)) - Math.min(...results.map((r) => r.firstSend))) / 1000
    const maxWeight = Math.max(...results.map((r) => r.maxWeight))
    const bound = maxBurst + qps * spanS + maxWeight
    console.info(
      `${kind}: admitted weight ${admitted} (bound ${bound.toFixed(1)} over ${spanS.toFixed(3)} s), refused ${refused}`,
    )
    // every decision was made inside [first send, last receive]
    expect(admitted).toBeLessThanOrEqual(maxBurst + qps * spanS + maxWeight)
    // and the limit is used, not just enforced: the run spans ~2 s of refusals
    expect(refused).toBeGreaterThan(admitted)
    expect(admitted).toBeGreaterThanOrEqual(qps * 2 * 0.9)
  })

  it('pace keeps the achieved rate within 1% of qps', async () => {
    const qps = 200
    const results = await runWorkers({
      ...target,
      prefix: freshPrefix(),
      key: 'paced',
      mode: 'pace',
      qps,
      maxBurst: 0,
      durationMs: 3000,
      inflight: 8,
      maxRandomWeight: 1,
    })
    for (const r of results) expect(r.error).toBeUndefined()
    const executions = results.flatMap((r) => r.executions).sort((a, b) => a - b)
    expect(executions.length).toBeGreaterThan(500)
    const achieved = (executions.length - 1) / ((executions[executions.length - 1] - executions[0]) / 1000)
    console.info(`${kind}: ${executions.length} paced calls, achieved ${achieved.toFixed(2)}/s for qps ${qps}`)
    expect(Math.abs(achieved - qps) / qps).toBeLessThan(0.01)
  })
})
