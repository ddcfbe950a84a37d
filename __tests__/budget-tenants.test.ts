// Budget tenants over their space (issue 36, item 5): a greedy tenant's callers are held in
// the process while its committed queue is past its borrow horizon, so a deep queue borrows
// what idle tenants leave. Deterministic: a ManualClock moved 2 ms at a time, callers that
// reserve, wait their turn and settle at once; on the memory store (1 and 3 budgets standing
// for processes, the whole grid) and on a RedisStore, standalone and cluster (3 stores on one
// key prefix standing for 3 processes, each with its own holds; a reduced grid, so each test
// stays under ~30 s on 2 cores). The clock moves only once every store call has been answered.
import { describe, expect, it } from 'vitest'
import { Budget, ManualClock, SluiceError, type Store } from '../lib/entries/index.js'
import { STORE_KINDS, type StoreKind, makeStores } from './helpers/stores.js'
import { tracked } from './helpers/clock.js'

const T0 = 1_800_000_000_000
const L = 6000 // tokens per second

const FULL = process.env.SLUICE_BUDGET_SWEEP === 'full'

/** The sweep per store: the memory store takes the whole grid (1 and 3 processes), Redis a reduced one (3 processes). */
const GRID: Record<
  'memory' | 'redis',
  {
    procs: number[]
    deep: { callers: number[]; amounts: number[]; maxShares: number[] }
    back: { callers: number[]; amounts: number[]; shares: number[] }
    light: { callers: number[]; amounts: number[]; asks: number[][] }
  }
> = {
  memory: {
    procs: [1, 3],
    deep: { callers: [1, 4, 32, 256], amounts: [1, 60, 600], maxShares: [1, 0.6] },
    back: { callers: [4, 32, 256], amounts: [1, 60, 600], shares: [0.2, 0.5] },
    light: {
      callers: [4, 32, 256],
      amounts: [1, 60, 600],
      asks: [
        [120, 50],
        [12, 5],
        [600, 250],
      ],
    },
  },
  // amounts of 1 (6,000 reservations a second) take ~60 s a test here: SLUICE_BUDGET_SWEEP=full
  redis: {
    procs: [3],
    deep: { callers: [4, 32, 192], amounts: FULL ? [1, 60, 600] : [60, 600], maxShares: [1, 0.6] },
    back: { callers: [6, 32, 192], amounts: FULL ? [1, 60, 600] : [60, 600], shares: [0.2, 0.5] },
    light: {
      callers: [32, 192],
      amounts: FULL ? [1, 60, 600] : [60, 600],
      asks: [
        [120, 50],
        [12, 5],
        [600, 250],
      ],
    },
  },
}
const grid = (kind: StoreKind) => GRID[kind === 'memory' ? 'memory' : 'redis']

/**
 * `procs` budgets (one per store, each with its own holds: processes) on one key prefix and
 * one ManualClock; callers spread over them; `end()` aborts every caller's wait (held ones
 * were charged nothing, waiting ones are given back) and closes the stores.
 */
async function world(kind: StoreKind, procs: number) {
  const clock = new ManualClock(T0)
  const stores = await makeStores(kind, procs, clock)
  const count = { calls: 0, admitted: 0 }
  const settle = tracked(stores, count)
  const budgets = stores.map(
    (s) => new Budget(s, { name: 'tenants', dimensions: { tokens: { limit: L, intervalMs: 1000 } } }),
  )
  const stop = new AbortController()
  const running: Promise<void>[] = []
  const at = () => clock.now() - T0
  /** Resolves `ms` later on the clock, or at once when the run ends. */
  const pause = (ms: number) =>
    new Promise<void>((resolve) => {
      if (stop.signal.aborted || ms <= 0) return resolve()
      const cancel = (clock as unknown as { _schedule(ms: number, fire: () => void): () => void })._schedule(ms, () => {
        stop.signal.removeEventListener('abort', done)
        resolve()
      })
      const done = () => {
        cancel()
        resolve()
      }
      stop.signal.addEventListener('abort', done, { once: true })
    })
  return {
    at,
    /** Store calls per admitted reservation (2: its reservation and its settlement; more: sent again past its horizon). */
    callsEach: () => count.calls / count.admitted,
    /**
     * A caller in process `i % procs`: from `from` ms while `more()`, reserves `n` tokens of
     * tenant `id`, tells `started` its start (ms from T0), settles at once, pauses `gapMs`.
     */
    caller(
      i: number,
      id: string,
      options: { share: number; maxShare?: number },
      n: number,
      o: { from?: number; gapMs?: number; more?: () => boolean; started: (ms: number) => void },
    ) {
      const b = budgets[i % procs]
      const run = async () => {
        await pause((o.from ?? 0) - at())
        try {
          while (!stop.signal.aborted && (o.more?.() ?? true)) {
            const r = await b.tenant(id, options).reserve({ tokens: n }, { maxWaitMs: 600_000, signal: stop.signal })
            count.admitted++
            o.started(r.startMs - T0)
            await r.settle({ tokens: n })
            await pause(o.gapMs ?? 0)
          }
        } catch (err) {
          if (!(err instanceof SluiceError && err.code === 'ERR_ABORTED')) throw err
        }
      }
      const p = run()
      running.push(p)
      return p
    },
    /** Moves the clock 2 ms at a time for `ms`, every store call answered after each move. */
    async drive(ms: number) {
      await settle()
      for (let t = 0; t < ms; t += 2) {
        clock.advance(2)
        await settle()
      }
    },
    async end() {
      stop.abort()
      await Promise.all(running)
      await settle()
      await Promise.all([...new Set(stores)].map((s) => s.close()))
    },
  }
}

describe.each(STORE_KINDS)('Budget tenants: held callers on %s', (kind) => {
  const g = grid(kind)

  it(`issue-36-budget-deep-queue-borrows: a tenant of maxShare m whose callers (${g.deep.callers.join(', ')}, over ${g.procs.join(' or ')} processes) offer at least m uses >= 0.8 m from 1 s after the others went idle (amounts ${g.deep.amounts.join(', ')} of ${L}/s)`, async () => {
    const rows: string[] = []
    for (const procs of g.procs) {
      for (const callers of g.deep.callers) {
        for (const amount of g.deep.amounts) {
          for (const m of g.deep.maxShares) {
            // the callers can offer m: one reservation per caller per 2 ms step at most
            if (callers * amount * 500 < 1.5 * m * L) continue
            const w = await world(kind, procs)
            const starts: number[] = []
            let bLast = 0
            let bDone = 0
            // b: busy for 2 s (8 callers of 300), then idle
            for (let i = 0; i < 8; i++) {
              void w
                .caller(i, 'b', { share: 0.5, maxShare: 0.5 }, 300, {
                  more: () => w.at() < 2000,
                  started: (s) => (bLast = Math.max(bLast, s)),
                })
                .then(() => bDone++)
            }
            for (let i = 0; i < callers; i++) {
              w.caller(i, 'a', { share: 0.5, maxShare: m }, amount, { started: (s) => starts.push(s) })
            }
            while (bDone < 8) await w.drive(100)
            // b is idle a second after its latest reservation; measure a over the second after that
            const idle = bLast + 1000
            await w.drive(idle + 2000 - w.at())
            const calls = w.callsEach()
            await w.end()
            const used = starts.filter((s) => s >= idle + 1000 && s < idle + 2000).length * amount
            rows.push(`${procs}p ${callers}x${amount} m=${m}: ${(used / L).toFixed(3)} (${calls.toFixed(2)} calls)`)
            expect(used, `${procs} processes, ${callers} callers of ${amount}, maxShare ${m}`).toBeGreaterThanOrEqual(
              0.8 * m * L,
            )
            // and never more than the budget
            expect(used).toBeLessThanOrEqual(L + amount)
          }
        }
      }
    }
    console.info(`${kind}: deep queue after the others went idle (share of L): ${rows.join(', ')}`)
  }, 120_000)

  it(`issue-36-budget-tenant-comes-back: a tenant idle while a greedy one (${g.back.callers.join(', ')} callers over ${g.procs.join(' or ')} processes, amounts ${g.back.amounts.join(', ')}) borrowed everything gets >= 0.9 of its share within 1 s of coming back`, async () => {
    const rows: string[] = []
    for (const procs of g.procs) {
      for (const callers of g.back.callers) {
        for (const amount of g.back.amounts) {
          for (const share of g.back.shares) {
            if (callers * amount * 500 < 1.5 * L) continue
            const w = await world(kind, procs)
            const got: number[] = []
            // greedy (share 1 - share, maxShare 1) from the start; small (8 callers of 60) from 3 s
            for (let i = 0; i < callers; i++) w.caller(i, 'greedy', { share: 1 - share }, amount, { started: () => {} })
            for (let i = 0; i < 8; i++) w.caller(i, 'small', { share }, 60, { from: 3000, started: (s) => got.push(s) })
            await w.drive(6000)
            const calls = w.callsEach()
            await w.end()
            // from 1 s after it came back, over 2 s (a reservation at each end of a 1 s window is 5 % of a 0.2 share)
            const used = got.filter((t) => t >= 4000 && t < 6000).length * 60
            const of = used / (2 * share * L)
            rows.push(`${procs}p ${callers}x${amount} share ${share}: ${of.toFixed(3)} (${calls.toFixed(2)} calls)`)
            expect(
              of,
              `${procs} processes, ${callers} greedy callers of ${amount}, share ${share}`,
            ).toBeGreaterThanOrEqual(0.9)
          }
        }
      }
    }
    console.info(`${kind}: a tenant coming back, from 1 s after over 2 s (of its share): ${rows.join(', ')}`)
  }, 120_000)

  it(`issue-36-budget-light-tenant-beside-greedy: a tenant asking within its share one reservation at a time reaches >= 0.9 of its throughput alone beside a greedy one (${g.light.callers.join(', ')} callers over ${g.procs.join(' or ')} processes, amounts ${g.light.amounts.join(', ')})`, async () => {
    const rows: string[] = []
    // light: one caller, a reservation of `each` every `gapMs` after the previous completed (0.4 of L, within its share 0.5)
    const light = async (procs: number, greedyCallers: number, amount: number, each: number, gapMs: number) => {
      const w = await world(kind, procs)
      let tokens = 0
      w.caller(0, 'light', { share: 0.5 }, each, {
        gapMs,
        started: (s) => {
          if (s >= 1000 && s < 4000) tokens += each
        },
      })
      for (let i = 0; i < greedyCallers; i++) w.caller(i, 'greedy', { share: 0.5 }, amount, { started: () => {} })
      await w.drive(4000)
      await w.end()
      return tokens
    }
    for (const procs of g.procs) {
      for (const [each, gapMs] of g.light.asks) {
        const alone = await light(procs, 0, 1, each, gapMs)
        for (const callers of g.light.callers) {
          for (const amount of g.light.amounts) {
            if (callers * amount * 500 < 1.5 * L) continue
            const beside = await light(procs, callers, amount, each, gapMs)
            rows.push(`${procs}p ${each}/${gapMs}ms beside ${callers}x${amount}: ${(beside / alone).toFixed(3)}`)
            expect(
              beside,
              `${procs} processes, ${each} every ${gapMs} ms beside ${callers} callers of ${amount}`,
            ).toBeGreaterThanOrEqual(0.9 * alone)
          }
        }
      }
    }
    console.info(`${kind}: a light tenant beside a greedy one (of its throughput alone): ${rows.join(', ')}`)
  }, 120_000)

  it('a held caller is refused early past maxWaitMs, leaves on abort (nothing charged either way), and holds leave with their callers', async () => {
    const clock = new ManualClock(T0)
    const [store] = await makeStores(kind, 1, clock)
    const settle = tracked([store], { calls: 0 })
    const drive = async (ms: number) => {
      for (let t = 0; t < ms; t += 2) {
        clock.advance(2)
        await settle()
      }
    }
    try {
      const b = new Budget(store, { name: 'held', dimensions: { tokens: { limit: L, intervalMs: 1000 } } })
      const view = () => b.tenant('a', { share: 0.5, maxShare: 0.5 })
      // 3 s of its share committed or held: 30 callers of 300 at 3000/s
      const queued = Array.from({ length: 30 }, () => view().reserve({ tokens: 300 }, { maxWaitMs: 600_000 }))
      await settle()
      const before = await b.stats()
      const code = async (p: Promise<unknown>) => {
        try {
          await p
        } catch (err) {
          expect(err).toBeInstanceOf(SluiceError)
          return (err as SluiceError).code
        }
        return 'resolved'
      }
      // its earliest send is past 100 ms: refused at once, nothing charged
      expect(await code(view().reserve({ tokens: 1 }, { maxWaitMs: 100 }))).toBe('ERR_OVER_LIMIT')
      const ac = new AbortController()
      const aborted = view().reserve({ tokens: 1 }, { signal: ac.signal })
      await settle()
      ac.abort()
      expect(await code(aborted)).toBe('ERR_ABORTED')
      const after = await b.stats()
      expect([after.reservations, after.dimensions.tokens.reserved]).toEqual([
        before.reservations,
        before.dimensions.tokens.reserved,
      ])
      // fewer than the 30 were sent: the rest wait in this process
      expect(before.reservations).toBeLessThan(30)
      while ((b as unknown as { _holds: { size: number } })._holds.size > 0) await drive(100)
      const all = await Promise.all(queued)
      expect(all.map((r) => r.startMs)).toEqual(all.map((r) => r.startMs).sort((x, y) => x - y))
      await Promise.all(all.map((r) => r.settle({ tokens: 300 })))
    } finally {
      await store.close()
    }
  })
})
