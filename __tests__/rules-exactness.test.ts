// store.rules while limits change under load (DESIGN §9): 4 stores stand for 4 processes, each
// with 32 callers on one limiter; a limit lowered and raised mid-flight. Each decision follows
// the old or the new limit, so the admitted never pass the larger of the two while a change
// propagates, and never the new one after it: counted.
import { afterEach, describe, expect, it } from 'vitest'
import { BucketLimiter, ManualClock, type Store, WindowLimiter } from '../lib/entries/index.js'
import { STORE_KINDS, makeStores } from './helpers/stores.js'

const T0 = 1_800_000_000_000
const PROCESSES = 4
const CALLERS = 32

describe.each(STORE_KINDS)('issue-39-rules-exactness on %s', (kind) => {
  const open: Store[] = []
  afterEach(async () => {
    await Promise.all([...new Set(open.splice(0))].map((s) => s.close()))
  })

  it.each([
    ['bucket', BucketLimiter],
    ['window', WindowLimiter],
  ] as const)(
    '%s: 100, lowered to 40 mid-flight, raised to 120: admitted <= the larger limit, then exactly the new one',
    async (segment, Class) => {
      const clock = new ManualClock(T0)
      const stores = await makeStores(kind, PROCESSES, clock)
      open.push(...stores)
      const name = `exact:${segment}@example.com`
      const limiters = stores.map((s) => new Class(s, { name, limit: 100, interval: 'hour' }))
      const rules = (stores[0] as any).rules
      const sees = (limit: number) =>
        stores.every((s) => (s as any).rules._forName(segment, name)?.rule.limit === limit)
      const until = async (p: () => boolean) => {
        while (!p()) await new Promise((r) => setTimeout(r, 1))
      }
      /** `calls` decisions from every process's callers at once; how many were admitted. */
      const hammer = async (calls: number, during?: () => Promise<void>) => {
        let next = 0
        let admitted = 0
        const work = limiters.flatMap((l) =>
          Array.from({ length: CALLERS }, async () => {
            while (next < calls) {
              next++
              if ((await l.check()).allowed) admitted++
            }
          }),
        )
        await Promise.all([...work, during?.()])
        return admitted
      }
      // lowered while 200 calls are under way: each decision against 100 or 40
      const first = await hammer(200, async () => {
        await new Promise((r) => setTimeout(r, 2))
        await rules.set({ kind: segment, name }, { limit: 40 })
      })
      expect(first).toBeLessThanOrEqual(100)
      expect(first).toBeGreaterThanOrEqual(40)
      await until(() => sees(40))
      // after it: 40 or more counted already, nothing more
      expect(await hammer(100)).toBe(0)
      // raised to 120: exactly 120 admitted in all
      await rules.set({ kind: segment, name }, { limit: 120 })
      await until(() => sees(120))
      const second = await hammer(300)
      expect(first + second).toBe(120)
    },
  )
})
