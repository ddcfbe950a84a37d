// Issue 36 item 4, the gate's horizon (lib/doors/fetch/horizon.js): an adaptive key's callers
// of one process ask the key's record for slots in turn, while the latest slot the process
// holds starts within 100 ms of now, so the record's queue is 100 ms deep (plus a slot per
// process), not every caller's slot; the wait for a turn counts against maxWaitMs and the
// caller's signal (a caller that leaves gives its place to the next), and a spare slot is taken
// without a turn. On a ManualClock; several doors on one store stand for processes.
import { describe, expect, it } from 'vitest'
import { ManualClock, type Store } from '../lib/entries/index.js'
import { pacedFetch } from '../lib/entries/fetch.js'
import { STORE_KINDS, type StoreKind, makeStores } from './helpers/stores.js'
// eslint-disable-next-line @typescript-eslint/no-require-imports
const { storeKey } = require('../lib/store/keys.js')

const T0 = 1_800_000_000_000
const URL_ = 'https://api.example.test/v1/items'
const KEY = 'k'

/** Wraps the stores' calls: counts those under way (settle() waits for them) and records each pace's answer. */
function tracked(stores: Store[]) {
  let pending = 0
  const paces: { delayMs: number; weight: number }[] = []
  for (const s of new Set(stores)) {
    const any = s as unknown as { _call: (kind: unknown, c: { nums: Float64Array }) => Promise<number[]> }
    const call = any._call.bind(s)
    any._call = (kind, c) => {
      pending++
      return call(kind, c)
        .then((out) => {
          if (c.nums && c.nums[0] === 0) paces.push({ delayMs: out[0] / 1000, weight: c.nums[1] })
          return out
        })
        .finally(() => pending--)
    }
  }
  const settle = async () => {
    for (let i = 0; i < 100_000; i++) {
      await new Promise((r) => setImmediate(r))
      if (pending === 0) {
        await new Promise((r) => setImmediate(r))
        if (pending === 0) return
      }
    }
    throw new Error('store calls never settled')
  }
  return { settle, paces }
}

/** An upstream that answers 200 at once and records each send (and whether its signal had aborted). */
function upstream(clock: ManualClock) {
  const sends: number[] = []
  let late = 0
  const fetch = async (_input: unknown, init?: { signal?: AbortSignal }) => {
    if (init?.signal?.aborted) late++
    sends.push(clock.now())
    return new Response(null, { status: 200 })
  }
  return { fetch, sends, late: () => late }
}

/** A rate that stays at `qps` (adaptive, min = max = start): the horizon, not the rule, is under test. */
const fixed = (qps: number) => ({ maxQps: qps, minQps: qps, startQps: qps })

async function run(kind: StoreKind, processes: number, qps: number, maxWaitMs: number) {
  const clock = new ManualClock(T0)
  const stores = await makeStores(kind, processes, clock)
  const t = tracked(stores)
  const up = upstream(clock)
  const doors = stores.map((store) =>
    pacedFetch({ store, key: () => KEY, adaptive: fixed(qps), retry: false, maxWaitMs, fetch: up.fetch }),
  )
  return { clock, stores, doors, up, ...t }
}

const closeAll = (stores: Store[]) => Promise.all([...new Set(stores)].map((s) => s.close()))

describe.each(STORE_KINDS)('issue-36-adaptive-horizon on %s', (kind) => {
  it.each([
    [10, 1, 64],
    [10, 4, 16],
    [150, 1, 64],
    [150, 4, 64],
  ])(
    'qps %i, %i process(es) x %i callers: the record hands out slots at most a horizon (100 ms) and a slot per process ahead, and every caller is served at the rate',
    async (qps, processes, callers) => {
      const { clock, stores, doors, up, settle, paces } = await run(kind, processes, qps, 60_000)
      try {
        const done: number[] = []
        for (const door of doors) for (let i = 0; i < callers; i++) void door(URL_).then(() => done.push(clock.now()))
        const total = processes * callers
        const endMs = Math.ceil(((total + 2) * 1000) / qps) + 200
        for (let ms = 0; ms < endMs; ms += 5) {
          await settle()
          clock.advance(5)
        }
        await settle()
        expect(done.length).toBe(total)
        const asks = paces.filter((p) => p.weight === 1)
        expect(asks.length).toBe(total)
        // without the horizon the last caller's slot is handed out (total - 1) / qps ahead
        // (6.3 s at 10/s and 64 callers, 1.7 s at 150/s and 256); each process knows only its
        // own slots, so the record's queue is a horizon and a slot per process deep at most
        const slotMs = 1000 / qps
        const depthMs = processes * (100 + slotMs) + slotMs
        expect(depthMs).toBeLessThan(((total - 1) * 1000) / qps)
        expect(Math.max(...asks.map((p) => p.delayMs))).toBeLessThanOrEqual(depthMs + 5)
        // the upstream got the calls at the rate (a slot per caller, none lost to the turns)
        const spanMs = up.sends[up.sends.length - 1] - up.sends[0]
        expect(spanMs).toBeLessThanOrEqual(((total - 1) * 1000) / qps + 25 + slotMs)
        expect(spanMs).toBeGreaterThanOrEqual(((total - 1) * 1000) / qps - 10 - slotMs)
      } finally {
        await closeAll(stores)
      }
    },
    60_000,
  )

  it('a turn that would come past maxWaitMs is refused at once (ERR_OVER_LIMIT, nothing taken), and no caller waits past it', async () => {
    const qps = 10
    const { clock, stores, doors, up, settle } = await run(kind, 1, qps, 1000)
    try {
      const settled: { ms: number; code: string | null }[] = []
      for (let i = 0; i < 40; i++) {
        doors[0](URL_).then(
          () => settled.push({ ms: clock.now() - T0, code: null }),
          (err: { code: string }) => settled.push({ ms: clock.now() - T0, code: err.code }),
        )
      }
      await settle()
      // refused before any time passed: those whose slot would start more than 1 s ahead
      const refusedAtOnce = settled.filter((s) => s.code === 'ERR_OVER_LIMIT' && s.ms === 0).length
      expect(refusedAtOnce).toBeGreaterThanOrEqual(40 - 12)
      for (let ms = 0; ms < 3000; ms += 5) {
        await settle()
        clock.advance(5)
      }
      await settle()
      expect(settled.length).toBe(40)
      for (const s of settled) expect(s.ms).toBeLessThanOrEqual(1000 + 5)
      const served = settled.filter((s) => s.code === null).length
      expect(served).toBe(up.sends.length)
      // within a second at 10/s (a burst of 1 at the start): 10 or 11
      expect(served).toBeGreaterThanOrEqual(10)
      // a refusal took nothing: the next caller, later, is served at once
      const later = doors[0](URL_)
      await settle()
      expect(await later).toBeInstanceOf(Response)
      expect(clock.now() - T0).toBeLessThanOrEqual(3000)
    } finally {
      await closeAll(stores)
    }
  }, 60_000)

  it('callers aborted while waiting their turn leave the queue: the others move up, none is sent after its abort', async () => {
    const qps = 20
    const { clock, stores, doors, up, settle } = await run(kind, 2, qps, 60_000)
    try {
      const aborts: AbortController[] = []
      let abortedN = 0
      let servedN = 0
      for (let i = 0; i < 60; i++) {
        const abort = new AbortController()
        aborts.push(abort)
        doors[i % 2](URL_, { signal: abort.signal }).then(
          () => servedN++,
          (err: { code: string }) => {
            expect(err.code).toBe('ERR_ABORTED')
            abortedN++
          },
        )
      }
      await settle()
      // every other caller gives up after 0.5 s (most are waiting their turn then)
      for (let ms = 0; ms < 500; ms += 5) {
        await settle()
        clock.advance(5)
      }
      aborts.forEach((a, i) => i % 2 === 1 && a.abort())
      for (let ms = 500; ms < 2500; ms += 5) {
        await settle()
        clock.advance(5)
      }
      await settle()
      expect(up.late()).toBe(0)
      expect(abortedN + servedN).toBe(60)
      // the 30 that stayed were all served by 0.5 s + 30 slots at most (the aborted ones'
      // places went to them), and the upstream never got more than the rate
      expect(servedN).toBeGreaterThanOrEqual(30)
      const last = up.sends[up.sends.length - 1] - T0
      expect(last).toBeLessThanOrEqual(500 + (30 * 1000) / qps + 60)
      for (let i = 1; i < up.sends.length; i++) {
        const window = up.sends.filter((s) => s >= up.sends[i] - 1000 && s <= up.sends[i]).length
        expect(window).toBeLessThanOrEqual(qps + 2)
      }
    } finally {
      await closeAll(stores)
    }
  }, 60_000)

  it('a spare slot is taken without a turn', async () => {
    const qps = 10
    const { clock, stores, doors, up, settle, paces } = await run(kind, 1, qps, 60_000)
    try {
      for (let i = 0; i < 20; i++) void doors[0](URL_)
      await settle()
      clock.advance(10)
      await settle()
      const before = up.sends.length
      // a slot given back in this process 50 ms from now (as an abort leaves it)
      const spares = (stores[0] as unknown as { _spares: { put: (k: string, at: number, w: number) => boolean } })
        ._spares
      expect(spares.put(storeKey(stores[0], 'adaptive', KEY, 2), clock.now() + 50, 1)).toBe(true)
      const asksBefore = paces.filter((p) => p.weight === 1).length
      let sentAt = -1
      void doors[0](URL_).then(() => (sentAt = clock.now()))
      await settle()
      // no ask of the record for it (the queued callers ask only as the horizon lets them)
      expect(paces.filter((p) => p.weight === 1).length).toBe(asksBefore)
      for (let ms = 0; ms < 300; ms += 5) {
        await settle()
        clock.advance(5)
      }
      await settle()
      // the newcomer went at the spare's time (or the process's next spacing turn after it:
      // 100 ms apart at 10/s), not behind the 20 callers queued before it (1.9 s)
      expect(sentAt).toBeGreaterThan(0)
      expect(sentAt - T0).toBeLessThanOrEqual(10 + 50 + 100 + 5)
      expect(up.sends.length - before).toBeLessThanOrEqual(4)
    } finally {
      await closeAll(stores)
    }
  }, 60_000)
})
