// sluice/metrics: prom-client metrics scraped and checked against the text format, and the same
// numbers through OpenTelemetry (a MeterProvider with an in-process reader).
import { Registry } from 'prom-client'
import { MeterProvider, MetricReader } from '@opentelemetry/sdk-metrics'
import { describe, expect, it } from 'vitest'
import { BucketLimiter, ConcurrentLimiter, DistributedPacer, MemoryStore, RedisStore } from '../lib/entries/index.js'
import { collectMetrics } from '../lib/entries/metrics.js'
import { freshPrefix, redisUrl } from './helpers/stores.js'

interface Sample {
  name: string
  labels: Record<string, string>
  value: number
}

/** A strict reading of the Prometheus text format: HELP and TYPE before samples, valid names, labels and values. */
function parse(text: string) {
  const types = new Map<string, string>()
  const helps = new Set<string>()
  const samples: Sample[] = []
  const NAME = '[a-zA-Z_:][a-zA-Z0-9_:]*'
  for (const line of text.split('\n')) {
    if (line === '') continue
    let m = new RegExp(`^# HELP (${NAME}) (.+)$`).exec(line)
    if (m) {
      helps.add(m[1])
      continue
    }
    m = new RegExp(`^# TYPE (${NAME}) (counter|gauge|histogram|summary|untyped)$`).exec(line)
    if (m) {
      expect(helps.has(m[1]), `HELP before TYPE for ${m[1]}`).toBe(true)
      types.set(m[1], m[2])
      continue
    }
    m = new RegExp(`^(${NAME})(?:\\{(.*)\\})? (-?[0-9.e+-]+|\\+Inf|NaN)$`).exec(line)
    expect(m, `a sample line: ${line}`).not.toBeNull()
    const labels: Record<string, string> = {}
    if (m![2]) {
      for (const pair of m![2].split(/,(?=[a-zA-Z_])/)) {
        const lm = /^([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"$/.exec(pair)
        expect(lm, `a label: ${pair}`).not.toBeNull()
        labels[lm![1]] = lm![2]
      }
    }
    const family = m![1].replace(/_(bucket|sum|count)$/, '')
    expect(types.has(m![1]) || types.get(family) === 'histogram', `TYPE declared for ${m![1]}`).toBe(true)
    samples.push({ name: m![1], labels, value: Number(m![3]) })
  }
  return { types, samples }
}

const value = (samples: Sample[], name: string, labels: Record<string, string>) =>
  samples.find((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v))?.value

describe.each(['memory', 'redis'] as const)('sluice/metrics on %s', (kind) => {
  it('exports decisions, weights, waits, leases held, waiters and store status with Prometheus names and types', async () => {
    const store =
      kind === 'memory' ? new MemoryStore() : await RedisStore.connect({ url: redisUrl(), keyPrefix: freshPrefix() })
    const registry = new Registry()
    // per-user names reported under their family: no label holds a user
    const metrics = collectMetrics(store, {
      registry,
      limiterLabel: (name) => name.replace(/^user-.*/, 'per-user'),
    })
    try {
      for (const user of ['a', 'b', 'c']) {
        const l = new BucketLimiter(store, { name: `user-${user}`, limit: 2, interval: 'hour' })
        for (let i = 0; i < 3; i++) await l.check()
      }
      const pacer = new DistributedPacer(store, { key: 'partner', qps: 50, maxBurst: 0 })
      await pacer.pace()
      const waited = await pacer.pace() // waits 20 ms: one wait observed
      expect(waited.delayMs).toBeGreaterThan(0)
      const mutex = new ConcurrentLimiter(store, { name: 'mutex', limit: 2 })
      const lease = await mutex.acquire()

      const { types, samples } = parse(await registry.metrics())
      expect(Object.fromEntries(types)).toMatchObject({
        sluice_decisions_total: 'counter',
        sluice_decision_weight_total: 'counter',
        sluice_near_limit_total: 'counter',
        sluice_degraded_total: 'counter',
        sluice_rescheduled_total: 'counter',
        sluice_wait_seconds: 'histogram',
        sluice_leases_held: 'gauge',
        sluice_waiters: 'gauge',
        sluice_store_up: 'gauge',
      })
      expect(
        value(samples, 'sluice_decisions_total', { limiter: 'per-user', kind: 'bucket', result: 'admitted' }),
      ).toBe(6)
      expect(value(samples, 'sluice_decisions_total', { limiter: 'per-user', kind: 'bucket', result: 'refused' })).toBe(
        3,
      )
      expect(value(samples, 'sluice_decisions_total', { limiter: 'partner', kind: 'pacer', result: 'admitted' })).toBe(
        2,
      )
      expect(value(samples, 'sluice_wait_seconds_count', { limiter: 'partner', kind: 'pacer' })).toBe(1)
      expect(value(samples, 'sluice_wait_seconds_bucket', { limiter: 'partner', kind: 'pacer', le: '+Inf' })).toBe(1)
      expect(value(samples, 'sluice_leases_held', { limiter: 'mutex' })).toBe(1)
      expect(value(samples, 'sluice_store_up', {})).toBe(1)
      expect(value(samples, 'sluice_waiters', {})).toBe(0)
      // only these labels, and no user in any of them
      for (const s of samples) {
        for (const k of Object.keys(s.labels)) expect(['limiter', 'kind', 'result', 'le']).toContain(k)
        expect(JSON.stringify(s.labels)).not.toMatch(/user-/)
      }
      // counters only grow between scrapes
      await new BucketLimiter(store, { name: 'user-d', limit: 2, interval: 'hour' }).check()
      const again = parse(await registry.metrics()).samples
      expect(value(again, 'sluice_decisions_total', { limiter: 'per-user', kind: 'bucket', result: 'admitted' })).toBe(
        7,
      )
      await lease.release()
    } finally {
      metrics.close()
      await store.close()
    }
  })
})

class TestReader extends MetricReader {
  protected async onForceFlush() {}
  protected async onShutdown() {}
}

describe('sluice/metrics through OpenTelemetry', () => {
  it('observes decisions and waits on a given meter', async () => {
    const reader = new TestReader()
    const provider = new MeterProvider({ readers: [reader] })
    const store = new MemoryStore()
    const metrics = collectMetrics(store, { registry: new Registry(), meter: provider.getMeter('test') })
    try {
      const l = new BucketLimiter(store, { name: 'api', limit: 1, interval: 'hour' })
      await l.check()
      await l.check()
      const pacer = new DistributedPacer(store, { key: 'p', qps: 100, maxBurst: 0 })
      await pacer.pace()
      await pacer.pace()
      const { resourceMetrics } = await reader.collect()
      const all = resourceMetrics.scopeMetrics.flatMap((s) => s.metrics)
      const decisions = all.find((m) => m.descriptor.name === 'sluice.decisions')!
      const point = (attrs: Record<string, string>) =>
        decisions.dataPoints.find((d) => Object.entries(attrs).every(([k, v]) => d.attributes[k] === v))?.value
      expect(point({ limiter: 'api', kind: 'bucket', result: 'admitted' })).toBe(1)
      expect(point({ limiter: 'api', kind: 'bucket', result: 'refused' })).toBe(1)
      const waits = all.find((m) => m.descriptor.name === 'sluice.wait')!
      expect((waits.dataPoints[0].value as { count: number }).count).toBe(1)
      expect(all.find((m) => m.descriptor.name === 'sluice.store.up')!.dataPoints[0].value).toBe(1)
    } finally {
      metrics.close()
      await provider.shutdown()
      await store.close()
    }
  })

  it('bad options throw ERR_INVALID_CONFIG', () => {
    const store = new MemoryStore()
    for (const o of [
      { prefix: 'bad-prefix' },
      { limiterLabel: 'x' },
      { buckets: [] },
      { registry: {} },
      { meter: {} },
      { unknown: 1 },
    ] as any[]) {
      expect(() => collectMetrics(store, { registry: new Registry(), ...o })).toThrow(
        expect.objectContaining({ code: 'ERR_INVALID_CONFIG' }),
      )
    }
    expect(() => collectMetrics(new MemoryStore({ stats: false }))).toThrow(
      expect.objectContaining({ code: 'ERR_INVALID_CONFIG' }),
    )
    expect(() => collectMetrics({} as any)).toThrow(expect.objectContaining({ code: 'ERR_INVALID_CONFIG' }))
  })
})
