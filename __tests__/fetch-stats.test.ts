// sluice/fetch's statistics per key (issue 26 item 5) on every store: calls, waits, 429/503
// seen, blocks, maxWaitMs refusals, the current and the learned rate, in the door's stats(), in
// the store's statistics (store.limiters(), every process), in sluice/metrics (Prometheus and
// OpenTelemetry) and in the dashboard's API; a key made of hostile bytes is escaped in the
// exposition and read back whole.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Registry } from 'prom-client'
import { ManualClock, type Store } from '../lib/entries/index.js'
import { pacedFetch } from '../lib/entries/fetch.js'
import { collectMetrics } from '../lib/entries/metrics.js'
import { STORE_KINDS, type StoreKind, makeStores } from './helpers/stores.js'
import { timerArmed } from './helpers/clock.js'
// eslint-disable-next-line @typescript-eslint/no-require-imports
const { startUpstream } = require('./helpers/upstream.js')
// eslint-disable-next-line @typescript-eslint/no-require-imports
const { createApi } = require('../lib/doors/dashboard/api.js')

const T0 = 1_800_000_000_000
/** A key of hostile bytes: quotes, a backslash, a newline, braces, %, HTML, a NUL, non-ASCII. */
const HOSTILE = 'evil"\\\n{x}%41<img src=x onerror=alert(1)>\u0000é'

type Answer = { status: number; headers?: Record<string, string | undefined> }

/** Writes a RedisStore's counts now (a MemoryStore's are exact at once). */
async function flushed(store: Store) {
  const s = store as unknown as { _flushStats?: () => Promise<void> }
  if (s._flushStats) await s._flushStats()
}

/** Prometheus' escaping of a label value (exposition format 0.0.4). */
const promEscape = (v: string) => v.replace(/\\/g, '\\\\').replace(/\n/g, '\\n').replace(/"/g, '\\"')

describe.each(STORE_KINDS)('sluice/fetch statistics on %s', (kind) => {
  const clock = new ManualClock(T0)
  let stores: Store[] = []
  let up: { url: string; close(): Promise<void> }
  // call n gets script[n]: a success stating a limit, a 429 without headers, a 503 with
  // Retry-After (a block), then successes
  const script: Answer[] = [
    {
      status: 200,
      headers: { 'X-RateLimit-Limit': '50000', 'X-RateLimit-Remaining': '40000', 'X-RateLimit-Reset': '10' },
    },
    { status: 429 },
    { status: 503, headers: { 'Retry-After': '2' } },
  ]
  beforeAll(async () => {
    stores = await makeStores(kind, 2, clock)
    up = await startUpstream({
      fixed: (_req: unknown, counts: { requests: number }) => script[counts.requests - 1] ?? { status: 200 },
    })
  })
  afterAll(async () => {
    await Promise.all([...new Set(stores)].map((s) => s.close()))
    await up.close()
  })

  it('counts calls, 429/503, blocks, refusals and waits per key, in stats(), the store, metrics and the dashboard', async () => {
    clock.set(T0)
    const key = () => HOSTILE
    const a = pacedFetch({ store: stores[0], key, qps: 1e6, retry: false })
    const b = pacedFetch({ store: stores[1], key, qps: 1e6, retry: false, maxWaitMs: 0 })
    expect((await a(up.url)).status).toBe(200)
    expect((await a(up.url)).status).toBe(429)
    expect((await a(up.url)).status).toBe(503) // blocks the key for 2 s, in every process
    // the other process: the block is 2 s away, over maxWaitMs 0: refused, nothing sent
    await expect(b(up.url)).rejects.toMatchObject({ code: 'ERR_OVER_LIMIT' })
    // this process waits the block out
    const late = a(up.url)
    await timerArmed(clock)
    clock.advance(2_000)
    expect((await late).status).toBe(200)

    const [own] = await a.stats(HOSTILE)
    expect(own).toMatchObject({ key: HOSTILE, calls: 4, throttled: 2, blocks: 1, refused: 0, qps: 4900 }) // the learned ceiling: 0.98 x 50,000 / 10 s
    expect(own.waited).toBeGreaterThanOrEqual(1)
    expect(own.waitTimeMs).toBeGreaterThanOrEqual(1900)
    expect(own.learned).toEqual({ limit: 50_000, windowMs: 10_000 })
    expect((await b.stats(HOSTILE))[0]).toMatchObject({ calls: 1, refused: 1, throttled: 0 })

    // the store's statistics: every process's counts under kind 'adaptive' and the key's name
    await Promise.all(stores.map(flushed))
    const infos = await stores[0].limiters()
    const info = infos.find((l) => l.kind === 'adaptive' && l.name === HOSTILE)
    expect(info).toBeDefined()
    expect(info!.options).toMatchObject({ qps: 1e6, adaptive: false })
    const api = createApi(stores[0], (name: string) => name)
    const page = await api.limiterPage('adaptive', HOSTILE)
    expect(page.name).toBe(HOSTILE)
    expect(page.stats).toMatchObject({ admitted: 4, refused: 1, throttled: 2, blocks: 1, degraded: 0 })
    expect(page.stats.waited).toBe(own.waited)
    // its live state, read without charging: the rate the record holds now
    expect(page.state).toMatchObject({ qps: 4900 })
    expect(page.state.fill).toBeLessThan(0.01) // one call's slot (0.2 ms) queued
    expect(page.limit).toBe('1000000/s, burst 0')
    // other kinds do not grow the fetch counters
    for (const l of infos.filter((x) => x.kind !== 'adaptive')) {
      expect(Object.keys((await api.limiterPage(l.kind, l.name)).stats)).not.toContain('throttled')
    }

    // sluice/metrics: the key's counters and rates; the label escaped, never split
    const registry = new Registry()
    const seen: { name: string; value: number; attrs: Record<string, unknown> }[] = []
    const meter = {
      createObservableCounter: (name: string) => ({ name }),
      createObservableGauge: (name: string) => ({ name }),
      createHistogram: () => ({ record() {} }),
      addBatchObservableCallback(cb: (r: unknown) => void) {
        cb({
          observe: (inst: { name: string }, value: number, attrs: Record<string, unknown> = {}) =>
            seen.push({ name: inst.name, value, attrs }),
        })
      },
      removeBatchObservableCallback() {},
    }
    const m = collectMetrics(stores[0], { registry, meter })
    try {
      const text = await registry.metrics()
      const label = `limiter="${promEscape(HOSTILE)}"`
      const line = (name: string, extra = '') => {
        const found = text
          .split('\n')
          .find((l) => l.startsWith(`sluice_${name}{`) && l.includes(label) && l.includes(extra))
        expect(found, `${name} ${extra}`).toBeDefined()
        return Number(found!.slice(found!.lastIndexOf(' ') + 1))
      }
      expect(line('throttled_total', 'kind="adaptive"')).toBe(2)
      expect(line('blocks_total', 'kind="adaptive"')).toBe(1)
      expect(line('decisions_total', 'result="admitted"')).toBe(4)
      expect(line('paced_rate')).toBe(4900)
      expect(line('paced_learned_rate')).toBe(5000) // 50,000 per 10 s
      // the raw key never appears unescaped (a newline would split the line)
      expect(text.includes(HOSTILE)).toBe(false)
      // other kinds' limiters get no fetch series
      expect(text.split('\n').filter((l) => l.startsWith('sluice_throttled_total{')).length).toBe(1)
      // OpenTelemetry: the same numbers, the key as an attribute value (never parsed)
      const otel = (name: string) => seen.find((s) => s.name === name && s.attrs.limiter === HOSTILE)?.value
      expect(otel('sluice.fetch.throttled')).toBe(2)
      expect(otel('sluice.fetch.blocks')).toBe(1)
      expect(otel('sluice.fetch.rate')).toBe(4900)
      expect(otel('sluice.fetch.learned_rate')).toBe(5000)
    } finally {
      m.close()
    }
  })

  it('an adaptive key: its shared rate in the store and in every process', async () => {
    clock.set(T0 + 60_000)
    const key = () => 'adaptive-key'
    const f = pacedFetch({ store: stores[0], key, adaptive: { maxQps: 500, startQps: 400 }, retry: false })
    expect((await f(up.url)).status).toBe(200)
    await flushed(stores[0])
    const api = createApi(stores[1], (name: string) => name)
    const page = await api.limiterPage('adaptive', 'adaptive-key')
    expect(page.options).toMatchObject({ qps: 500, adaptive: true })
    expect(page.limit).toBe('adaptive 1..500/s')
    expect(page.state.qps).toBe(400)
    expect(page.state.text).toBe('400/s now') // the one call's slot (2.5 ms) is no backlog
    expect(page.stats).toMatchObject({ admitted: 1, throttled: 0, blocks: 0 })
  })
})
