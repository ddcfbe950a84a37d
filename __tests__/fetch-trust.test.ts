// Issue 36, sluice/fetch away from the point it was tuned at: a hostile upstream's stated
// policy cannot stall a key past maxBlockMs; Retry-After blocks the fleet only on a blocking
// status; a wait that gives up gives its slot back (pacedFetch, DistributedPacer's
// outcome.cancel()), swept over rates, timeouts, offered loads and processes, on a
// ManualClock (several doors on one store prefix stand for several processes).
import { describe, expect, it } from 'vitest'
import { DistributedPacer, ManualClock, type Store } from '../lib/entries/index.js'
import { pacedFetch } from '../lib/entries/fetch.js'
import { REDIS_KINDS, STORE_KINDS, type StoreKind, makeStores } from './helpers/stores.js'

const T0 = 1_800_000_000_000
const URL_ = 'https://api.example.test/v1/items'

const closeAll = (stores: Store[]) => Promise.all([...new Set(stores)].map((s) => s.close()))

/** Counts the store calls under way, so a test waits for them (I/O) before it moves the clock. */
function tracked(stores: Store[]) {
  let pending = 0
  for (const s of new Set(stores)) {
    const any = s as unknown as { _call: (...a: unknown[]) => Promise<unknown> }
    const call = any._call.bind(s)
    any._call = (...a: unknown[]) => {
      pending++
      return call(...a).finally(() => pending--)
    }
  }
  return async () => {
    for (let i = 0; i < 100_000; i++) {
      await new Promise((r) => setImmediate(r))
      if (pending === 0) {
        await new Promise((r) => setImmediate(r))
        if (pending === 0) return
      }
    }
    throw new Error('store calls never settled')
  }
}

/** A fetch that answers `answer(n)` and records each send, with whether its signal had aborted. */
function upstream(clock: ManualClock, answer: (n: number) => { status: number; headers?: Record<string, string> }) {
  const sends: number[] = []
  let late = 0
  const fetch = async (_input: unknown, init?: { signal?: AbortSignal }) => {
    if (init?.signal?.aborted) late++
    sends.push(clock.now())
    const a = answer(sends.length - 1)
    return new Response(null, { status: a.status, headers: a.headers })
  }
  return { fetch, sends, late: () => late }
}

describe.each(STORE_KINDS)('issue-36 sluice/fetch on %s', (kind) => {
  // (1) a stated policy of one call a year, or a reset a year ahead, with qps 10
  it.each([1_000, 60_000, 3_600_000])(
    'issue-36-learned-floor: a learned rate is clamped to one call per maxBlockMs (%i ms) and counted',
    async (maxBlockMs) => {
      const clock = new ManualClock(T0)
      const stores = await makeStores(kind, 2, clock)
      const yearS = 31_536_000
      const hostile: Record<string, string>[] = [
        { 'ratelimit-policy': `"p";q=1;w=${yearS}` },
        { 'x-ratelimit-limit': '1', 'x-ratelimit-remaining': '1', 'x-ratelimit-reset': String(T0 / 1000 + yearS) },
      ]
      const settle = tracked(stores)
      try {
        for (const [i, headers] of hostile.entries()) {
          const up = upstream(clock, () => ({ status: 200, headers }))
          const key = () => `k${i}`
          const o = { key, qps: 10, maxBlockMs, fetch: up.fetch }
          const a = pacedFetch({ store: stores[0], ...o })
          const b = pacedFetch({ store: stores[1], ...o })
          const c = pacedFetch({ store: stores[1], ...o, maxWaitMs: 0 })
          await a(URL_) // its answer states the policy: learned, shared through the record
          // another process's call takes the next slot (100 ms away at qps 10) ...
          const second = b(URL_)
          await settle()
          clock.advance(200)
          await settle()
          expect((await second).status).toBe(200)
          // ... and the one after it is at most one call per maxBlockMs away, never a year
          const err = await c(URL_).then(
            () => null,
            (e) => e,
          )
          expect(err?.code).toBe('ERR_OVER_LIMIT')
          expect(err.retryAfterMs).toBeLessThanOrEqual(maxBlockMs)
          const [st] = await a.stats(`k${i}`)
          expect(st.hostile).toBeGreaterThanOrEqual(1)
          clock.advance(2 * maxBlockMs)
        }
      } finally {
        await closeAll(stores)
      }
    },
  )

  // (3) a polling hint on a 2xx never blocks the fleet; a blocking status does
  it.each([
    [200, undefined, false],
    [202, undefined, false],
    [204, undefined, false],
    [429, undefined, true],
    [503, undefined, true],
    [503, [429], false],
    [202, [202, 429], true],
  ] as const)(
    'issue-36-retry-after-2xx: status %i with Retry-After 30 (blockStatuses %j) blocks the fleet: %s',
    async (status, blockStatuses, blocks) => {
      const clock = new ManualClock(T0)
      const stores = await makeStores(kind, 2, clock)
      try {
        const up = upstream(clock, (n) => (n === 0 ? { status, headers: { 'retry-after': '30' } } : { status: 200 }))
        const o = { key: () => 'k', qps: 1000, maxBurst: 5, retry: false as const, fetch: up.fetch, blockStatuses }
        const a = pacedFetch({ store: stores[0], ...o } as Parameters<typeof pacedFetch>[0])
        const b = pacedFetch({ store: stores[1], ...o, maxWaitMs: 0 } as Parameters<typeof pacedFetch>[0])
        expect((await a(URL_)).status).toBe(status)
        const second = await b(URL_).then(
          (r) => r.status,
          (e) => e.code,
        )
        expect(second).toBe(blocks ? 'ERR_OVER_LIMIT' : 200)
      } finally {
        await closeAll(stores)
      }
    },
  )
})

/**
 * The most calls any pacer could send, spaced `spacingMs` apart with no burst, to callers that
 * arrive at `arrivals` and each wait at most `timeoutMs` (greedy by arrival: optimal when every
 * caller waits as long).
 */
function ideal(arrivals: number[], spacingMs: number, timeoutMs: number, from: number, to: number) {
  let next = -Infinity
  let n = 0
  for (const a of arrivals) {
    const at = Math.max(a, next)
    if (at > a + timeoutMs) continue
    next = at + spacingMs
    if (at >= from && at < to) n++
  }
  return n
}

/**
 * Callers arrive evenly at `offered` times `qps` over `processes` doors, each aborting its call
 * after `timeoutMs`; the clock moves in steps. Answers the sends in the measured span (after the
 * queue has filled), what an ideal pacer would have sent to the same callers, and the calls sent
 * after their signal aborted.
 */
async function overload(kind: StoreKind, qps: number, timeoutMs: number, offered: number, processes: number) {
  const clock = new ManualClock(T0)
  const stores = await makeStores(kind, processes, clock)
  const settle = tracked(stores)
  try {
    const up = upstream(clock, () => ({ status: 200 }))
    const doors = stores.map((store) =>
      pacedFetch({ store, key: () => 'k', qps, retry: false, maxWaitMs: Infinity, fetch: up.fetch }),
    )
    const gapMs = 1000 / (qps * offered)
    const stepMs = Math.max(1, Math.min(10, 1000 / qps / 4))
    const spanMs = Math.max(2000, 40_000 / qps)
    const endMs = timeoutMs + 1000 + spanMs
    const arrivals: number[] = []
    const open: { at: number; abort: AbortController }[] = []
    let aborted = 0
    let nextArrival = 0
    for (let t = 0; t <= endMs; t += stepMs) {
      while (nextArrival <= t) {
        const abort = new AbortController()
        arrivals.push(T0 + nextArrival)
        open.push({ at: nextArrival + timeoutMs, abort })
        doors[arrivals.length % processes](URL_, { signal: abort.signal }).catch(() => aborted++)
        nextArrival += gapMs
      }
      await settle()
      while (open.length > 0 && open[0].at <= t) open.shift()!.abort.abort()
      await settle()
      clock.advance(stepMs)
      await settle()
    }
    for (const o of open) o.abort.abort()
    await settle()
    const from = T0 + timeoutMs + 1000
    const to = T0 + endMs
    const sent = up.sends.filter((s) => s >= from && s < to).length
    return { sent, ideal: ideal(arrivals, 1000 / qps, timeoutMs, from, to), late: up.late(), spanMs: to - from }
  } finally {
    await closeAll(stores)
  }
}

describe('issue-36-abort-gives-back: qps 1-1000 x timeout 0.1-10 s x offered 1.1-10 x x 1 and 4 processes', () => {
  // qps x timeout x offered x processes on the memory store (the model), but for the four
  // cells that hold 20,000 or more callers waiting at once (qps x offered x timeout: minutes
  // of a ManualClock's timers each); the corners on Redis and the cluster. Without the
  // give-back, a queue of callers that time out keeps its slots and the upstream gets nothing
  // once the queue is longer than the timeout.
  const grid: [StoreKind, number, number, number, number][] = []
  for (const qps of [1, 5, 100, 1000]) {
    for (const timeoutMs of [100, 1000, 10_000]) {
      for (const offered of [1.1, 2, 10]) {
        for (const processes of [1, 4]) {
          if ((qps * offered * timeoutMs) / 1000 < 20_000) grid.push(['memory', qps, timeoutMs, offered, processes])
        }
      }
    }
  }
  for (const kind of REDIS_KINDS) {
    for (const [qps, timeoutMs, offered, processes] of [
      [5, 1000, 2, 4],
      [5, 1000, 10, 1],
      [100, 100, 10, 4],
    ]) {
      grid.push([kind, qps, timeoutMs, offered, processes])
    }
  }
  // The ideal pacer knows how long each caller waits; sluice does not, so a caller that will
  // give up holds its slot until it does, and its slot then goes to a caller of its own
  // process still waiting behind it, or back to the record when it is the last one queued.
  // Where each process holds fewer than 2 callers within a timeout (a caller behind it in
  // another process cannot be told in time), the bound is 0.5 (measured 0.6 at qps 1, 1 s,
  // 1.1 x, 4 processes).
  it.each(grid)(
    'on %s: qps %f, timeout %i ms, offered %f x, %i processes: >= 0.9 of what an ideal pacer sends, none after its abort',
    async (kind, qps, timeoutMs, offered, processes) => {
      const r = await overload(kind, qps, timeoutMs, offered, processes)
      expect(r.late).toBe(0)
      expect(r.ideal).toBeGreaterThan(0)
      const dense = (qps * offered * timeoutMs) / 1000 / processes >= 2
      expect(r.sent / r.ideal, JSON.stringify(r)).toBeGreaterThanOrEqual(dense ? 0.9 : 0.5)
      expect(r.sent, JSON.stringify(r)).toBeLessThanOrEqual(Math.ceil((r.spanMs * qps) / 1000) + 1)
    },
    120_000,
  )
})

describe.each(STORE_KINDS)('issue-36-pacer-cancel on %s', (kind) => {
  it.each([
    [1, 0],
    [10, 0],
    [10, 3],
    [1000, 5],
  ])('qps %i, maxBurst %i: a cancelled slot goes to the next caller; twice gives nothing', async (qps, maxBurst) => {
    const clock = new ManualClock(T0)
    const [s0, s1] = await makeStores(kind, 2, clock)
    try {
      const key = `cancel-${qps}-${maxBurst}`
      const a = new DistributedPacer(s0, { key, qps, maxBurst })
      const b = new DistributedPacer(s1, { key, qps, maxBurst })
      const spacing = 1000 / qps
      const outs = []
      for (let i = 0; i < maxBurst + 4; i++) outs.push(await a.pace())
      const last = outs[outs.length - 1]
      expect(last.delayMs).toBeGreaterThan(0)
      // the last caller gives up: another process's next call takes its slot
      expect(await last.cancel()).toBe(true)
      expect(await last.cancel()).toBe(false)
      expect((await b.pace()).delayMs).toBe(last.delayMs)
      // a slot with later ones after it: kept for this process's next call, at its own time;
      // the other process's next call queues after the last one
      const middle = outs[outs.length - 3]
      const tailDelay = (await b.pace()).delayMs
      expect(await middle.cancel()).toBe(true)
      expect((await a.pace()).delayMs).toBe(middle.delayMs)
      expect((await b.pace()).delayMs).toBe(tailDelay + spacing)
      // a refused rateLimit() took nothing; an admitted one gives its weight back to the bucket
      const refused = await b.rateLimit()
      expect(refused.delayMs).toBeGreaterThan(0)
      expect(await refused.cancel()).toBe(false)
      clock.advance(spacing * (maxBurst + 20) + 1)
      const admitted = await a.rateLimit()
      expect(admitted.delayMs).toBe(0)
      expect(await admitted.cancel()).toBe(true)
      expect((await b.rateLimit(0)).delayMs).toBe(0)
    } finally {
      await closeAll([s0, s1])
    }
  })
})

describe.each(STORE_KINDS)('issue-36-bullmq-refused-slot on %s', (kind) => {
  // sluice/bullmq's paced admission probes the queue, then takes a slot; a slot that callers of
  // other processes pushed past maxWaitMs in between was kept, spent, and the job rescheduled
  it.each([1, 3, 10])(
    'a slot pushed past maxWaitMs by %i callers in between is given back to the next caller',
    async (between) => {
      const clock = new ManualClock(T0)
      const [s0, s1] = await makeStores(kind, 2, clock)
      try {
        // eslint-disable-next-line @typescript-eslint/no-require-imports
        const { admit } = require('../lib/doors/bullmq/admit.js')
        const key = `bull-${between}`
        const mine = new DistributedPacer(s0, { key, qps: 10 })
        const other = new DistributedPacer(s1, { key, qps: 10 })
        const probe = mine.rateLimit.bind(mine)
        let last = 0
        mine.rateLimit = async (w?: number) => {
          const o = await probe(w)
          for (let i = 0; i < between; i++) last = (await other.pace()).delayMs
          return o
        }
        const maxWaitMs = 50
        const retryMs = await admit(mine, maxWaitMs, null)
        expect(retryMs).toBe(last + 100)
        // the slot it refused goes to the next caller of any process: the queue did not grow
        expect((await other.pace()).delayMs).toBe(last + 100)
      } finally {
        await closeAll([s0, s1])
      }
    },
  )
})
