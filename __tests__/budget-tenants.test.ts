// Budget tenants over their space (issue 36, item 5): a greedy tenant's callers are held in
// the process while its committed queue is past its borrow horizon, so a deep queue borrows
// what idle tenants leave. Deterministic: a MemoryStore on a ManualClock, callers that reserve,
// wait their turn and settle at once, the clock moved 1 ms at a time.
import { describe, expect, it } from 'vitest'
import { Budget, ManualClock, MemoryStore, SluiceError } from '../lib/entries/index.js'

const T0 = 1_800_000_000_000
const L = 6000 // tokens per second

/** Calls `fire` when the ManualClock has moved `ms` on. */
const later = (clock: ManualClock, fire: () => void, ms: number) =>
  (clock as unknown as { _schedule(ms: number, fire: () => void): void })._schedule(ms, fire)

/** Lets the callers run (a memory store answers within a turn of the event loop). */
async function settle() {
  for (let k = 0; k < 4; k++) await new Promise((r) => setImmediate(r))
}

/** Moves the clock 2 ms at a time for `ms`, letting the callers run after each move. */
async function drive(clock: ManualClock, ms: number) {
  for (let t = 0; t < ms; t += 2) {
    clock.advance(2)
    await settle()
  }
}

describe('Budget tenants: held callers', () => {
  it('issue-36-budget-deep-queue-borrows: a tenant of maxShare m whose 1-256 callers offer at least m uses >= 0.8 m from 1 s after the others went idle (amounts 1 to L/10)', async () => {
    const rows: string[] = []
    for (const callers of [1, 4, 32, 256]) {
      for (const amount of [1, 60, 600]) {
        for (const m of [1, 0.6]) {
          // the callers can offer m: one reservation per caller per 2 ms step at most
          if (callers * amount * 500 < 1.5 * m * L) continue
          const clock = new ManualClock(T0)
          const store = new MemoryStore({ clock })
          const b = new Budget(store, { name: 'deep', dimensions: { tokens: { limit: L, intervalMs: 1000 } } })
          const starts: number[] = []
          let stop = false
          let bLast = 0
          const loop = async (id: string, share: number, maxShare: number, n: number, until: () => boolean) => {
            for (;;) {
              if (until()) return
              const r = await b.tenant(id, { share, maxShare }).reserve({ tokens: n }, { maxWaitMs: 600_000 })
              if (id === 'a') starts.push(r.startMs - T0)
              else bLast = Math.max(bLast, r.startMs - T0)
              await r.settle({ tokens: n })
            }
          }
          // b: busy for 2 s (8 callers of 300), then idle
          let running = 8 + callers
          const bs = Array.from({ length: 8 }, () => loop('b', 0.5, 0.5, 300, () => clock.now() - T0 >= 2000))
          const as = Array.from({ length: callers }, () => loop('a', 0.5, m, amount, () => stop))
          for (const p of [...bs, ...as]) p.then(() => running--)
          while (running > callers) await drive(clock, 100)
          // b is idle a second after its latest reservation; measure a over the second after that
          const idle = bLast + 1000
          await drive(clock, idle + 2000 - (clock.now() - T0))
          stop = true
          while (running > 0) await drive(clock, 100)
          const used = starts.filter((s) => s >= idle + 1000 && s < idle + 2000).length * amount
          rows.push(`${callers}x${amount} m=${m}: ${(used / L).toFixed(3)}`)
          expect(used, `${callers} callers of ${amount}, maxShare ${m}`).toBeGreaterThanOrEqual(0.8 * m * L)
          // and never more than the budget
          expect(used).toBeLessThanOrEqual(L + amount)
        }
      }
    }
    console.info(`deep queue after the others went idle (share of L): ${rows.join(', ')}`)
  }, 120_000)

  it('issue-36-budget-tenant-comes-back: a tenant idle while a greedy one (1-256 callers, amounts 1 to L/10) borrowed everything gets >= 0.9 of its share within 1 s of coming back', async () => {
    const rows: string[] = []
    for (const callers of [4, 32, 256]) {
      for (const amount of [1, 60, 600]) {
        for (const share of [0.2, 0.5]) {
          if (callers * amount * 500 < 1.5 * L) continue
          const clock = new ManualClock(T0)
          const store = new MemoryStore({ clock })
          const b = new Budget(store, { name: 'back', dimensions: { tokens: { limit: L, intervalMs: 1000 } } })
          const got: number[] = []
          let stop = false
          const loop = async (id: string, s: number, n: number, from: number) => {
            for (;;) {
              if (stop) return
              if (clock.now() - T0 < from) {
                await new Promise<void>((r) => later(clock, r, from - (clock.now() - T0)))
                continue
              }
              const r = await b.tenant(id, { share: s }).reserve({ tokens: n }, { maxWaitMs: 600_000 })
              if (id === 'small') got.push(r.startMs - T0)
              await r.settle({ tokens: n })
            }
          }
          let running = callers + 8
          // greedy (share 1 - share, maxShare 1) from the start; small (8 callers of 60) from 3 s
          const all = [
            ...Array.from({ length: callers }, () => loop('greedy', 1 - share, amount, 0)),
            ...Array.from({ length: 8 }, () => loop('small', share, 60, 3000)),
          ]
          for (const p of all) p.then(() => running--)
          await drive(clock, 6000)
          stop = true
          while (running > 0) await drive(clock, 100)
          // from 1 s after it came back, over 2 s (a reservation at each end of a 1 s window is 5 % of a 0.2 share)
          const used = got.filter((t) => t >= 4000 && t < 6000).length * 60
          const of = used / (2 * share * L)
          rows.push(`${callers}x${amount} share ${share}: ${of.toFixed(3)}`)
          expect(of, `${callers} greedy callers of ${amount}, share ${share}`).toBeGreaterThanOrEqual(0.9)
        }
      }
    }
    console.info(`a tenant coming back, from 1 s after over 2 s (of its share): ${rows.join(', ')}`)
  }, 120_000)

  it('issue-36-budget-light-tenant-beside-greedy: a tenant asking within its share one reservation at a time reaches >= 0.9 of its throughput alone beside a greedy one (1-256 callers, amounts 1 to L/10)', async () => {
    const rows: string[] = []
    // light: one caller, a reservation of `each` every `gapMs` after the previous completed (0.4 of L, within its share 0.5)
    const light = async (greedyCallers: number, amount: number, each: number, gapMs: number) => {
      const clock = new ManualClock(T0)
      const store = new MemoryStore({ clock })
      const b = new Budget(store, { name: 'light', dimensions: { tokens: { limit: L, intervalMs: 1000 } } })
      let stop = false
      let tokens = 0
      let running = greedyCallers + 1
      const greedy = async () => {
        while (!stop) {
          const r = await b.tenant('greedy', { share: 0.5 }).reserve({ tokens: amount }, { maxWaitMs: 600_000 })
          await r.settle({ tokens: amount })
        }
      }
      const lone = async () => {
        while (!stop) {
          const r = await b.tenant('light', { share: 0.5 }).reserve({ tokens: each }, { maxWaitMs: 600_000 })
          await r.settle({ tokens: each })
          if (r.startMs - T0 >= 1000 && r.startMs - T0 < 4000) tokens += each
          await new Promise<void>((res) => later(clock, res, gapMs))
        }
      }
      const all = [lone(), ...Array.from({ length: greedyCallers }, greedy)]
      for (const p of all) p.then(() => running--)
      await drive(clock, 4000)
      stop = true
      while (running > 0) await drive(clock, 100)
      return tokens
    }
    for (const [each, gapMs] of [
      [120, 50],
      [12, 5],
      [600, 250],
    ]) {
      const alone = await light(0, 1, each, gapMs)
      for (const callers of [4, 32, 256]) {
        for (const amount of [1, 60, 600]) {
          if (callers * amount * 500 < 1.5 * L) continue
          const beside = await light(callers, amount, each, gapMs)
          rows.push(`${each}/${gapMs}ms beside ${callers}x${amount}: ${(beside / alone).toFixed(3)}`)
          expect(beside, `${each} every ${gapMs} ms beside ${callers} callers of ${amount}`).toBeGreaterThanOrEqual(
            0.9 * alone,
          )
        }
      }
    }
    console.info(`a light tenant beside a greedy one (of its throughput alone): ${rows.join(', ')}`)
  }, 120_000)

  it('a held caller is refused early past maxWaitMs, leaves on abort (nothing charged either way), and holds leave with their callers', async () => {
    const clock = new ManualClock(T0)
    const store = new MemoryStore({ clock })
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
    while ((b as unknown as { _holds: { size: number } })._holds.size > 0) await drive(clock, 100)
    const all = await Promise.all(queued)
    expect(all.map((r) => r.startMs)).toEqual(all.map((r) => r.startMs).sort((x, y) => x - y))
    await Promise.all(all.map((r) => r.settle({ tokens: 300 })))
  })
})
