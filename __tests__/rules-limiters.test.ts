// store.rules applied to the rate limiters (DESIGN §9): an override is the call's limit, a deny
// or an allow answers with no round trip, shadow mode decides as if enforced and admits.
import { afterEach, describe, expect, it } from 'vitest'
import {
  BucketLimiter,
  LeakyLimiter,
  ManualClock,
  PointsLimiter,
  WindowLimiter,
  type Store,
} from '../lib/entries/index.js'
import { STORE_KINDS, makeStores } from './helpers/stores.js'

const T0 = 1_800_000_000_000
type Rules = {
  set(target: object, rule: object, o?: object): Promise<void>
  delete(target: object): Promise<boolean>
}
const rulesOf = (s: Store) => (s as unknown as { rules: Rules }).rules
const CLASSES = [
  ['bucket', BucketLimiter, 'limit'],
  ['window', WindowLimiter, 'limit'],
  ['leaky', LeakyLimiter, 'limit'],
  ['points', PointsLimiter, 'points'],
] as const

describe.each(STORE_KINDS)('issue-39-rules-limiters on %s', (kind) => {
  const open: Store[] = []
  afterEach(async () => {
    await Promise.all(open.splice(0).map((s) => s.close()))
  })

  it.each(CLASSES)(
    '%s: lowered, raised, denied, allowed, shadowed: admitted counted against the rule in force',
    async (segment, Class, limitName) => {
      const clock = new ManualClock(T0)
      const [a, b] = await makeStores(kind, 2, clock)
      if (kind !== 'memory') open.push(a, b)
      else open.push(a)
      const name = `user@example.com/${segment}`
      const make = (s: Store, o: object = {}) =>
        new (Class as any)(s, { name, [limitName]: 10, interval: 'hour', waitTimeoutMs: 0, ...o })
      const la = make(a)
      const lb = make(b)
      const admitted = async (n: number) => {
        let ok = 0
        for (let i = 0; i < n; i++) if ((await (i % 2 ? la : lb).check()).allowed) ok++
        return ok
      }
      const target = { kind: segment, name }
      // lowered to 4: 4 of 20 (both processes), the decision shows the rule's limit
      await rulesOf(a).set(target, { limit: 4 })
      await eventually(() => (b as any).rules._forName(segment, name)?.rule.limit === 4)
      expect(await admitted(20)).toBe(4)
      expect((await la.check()).limit).toBe(4)
      // raised to 12: the state kept. A counter's 4 count against 12: 8 more. A leaky bucket's
      // state is time: 4 calls at 4 an hour filled the hour, which is what 12 an hour fill too
      await rulesOf(a).set(target, { limit: 12 })
      await eventually(() => (b as any).rules._forName(segment, name)?.rule.limit === 12)
      expect(await admitted(20)).toBe(segment === 'bucket' || segment === 'window' ? 8 : 0)
      // denied: no round trip, reason 'denied'; withinLimit rejects with that reason
      await rulesOf(a).set(target, { access: 'deny' })
      await eventually(() => (b as any).rules._forName(segment, name)?.rule.access === 'deny')
      // counted by the store's batcher (a MemoryStore has none: no round trip to count)
      const batching = (a as unknown as { batching?: { calls: number } }).batching
      const calls = batching?.calls
      const d = await la.check()
      expect(d).toMatchObject({ allowed: false, reason: 'denied' })
      expect(batching?.calls).toBe(calls)
      await expect(la.withinLimit(() => 1)).rejects.toMatchObject({ code: 'ERR_OVER_LIMIT', reason: 'denied' })
      // allowed: admitted, nothing charged
      await rulesOf(a).set(target, { access: 'allow' })
      await eventually(() => (b as any).rules._forName(segment, name)?.rule.access === 'allow')
      expect(await admitted(50)).toBe(50)
      expect(batching?.calls).toBe(calls)
      // shadow at 12 (all 12 charged already): every call admitted at once, none charged
      await rulesOf(a).set(target, { limit: 12, mode: 'shadow' })
      await eventually(() => (b as any).rules._forName(segment, name)?.rule.mode === 'shadow')
      const s = await la.check()
      expect(s).toMatchObject({ allowed: true, reason: 'shadow', retryAfterMs: 0 })
      expect(await admitted(9)).toBe(9)
      // rule gone: the limiter's own 10, its state kept (12 charged): refused
      await rulesOf(a).delete(target)
      await eventually(() => (b as any).rules._forName(segment, name) === undefined)
      expect(await admitted(5)).toBe(0)
      await (a as any)._flushStats?.()
      await (b as any)._flushStats?.()
      const stats = await la.stats()
      expect(stats.denied).toBe(2)
      expect(stats.shadowRefused).toBe(10)
    },
  )

  it("the constructor's mode: 'shadow' counts what enforcing would refuse and admits it", async () => {
    const clock = new ManualClock(T0)
    const [a] = await makeStores(kind, 1, clock)
    open.push(a)
    const enforced = new BucketLimiter(a, { name: 'e', limit: 3, interval: 'minute' })
    const shadow = new BucketLimiter(a, { name: 's', limit: 3, interval: 'minute', mode: 'shadow' })
    let refused = 0
    let shadowed = 0
    for (let i = 0; i < 10; i++) {
      if (!(await enforced.check()).allowed) refused++
      const d = await shadow.check()
      expect(d.allowed).toBe(true)
      if (d.reason === 'shadow') shadowed++
    }
    expect(shadowed).toBe(refused)
    expect(refused).toBe(7)
    expect(() => new BucketLimiter(a, { name: 'x', limit: 1, interval: 'minute', mode: 'dry' as never })).toThrow(
      /mode must be 'enforce' or 'shadow'/,
    )
  })
})

async function eventually(predicate: () => boolean) {
  const start = Date.now()
  while (!predicate()) {
    if (Date.now() - start > 2000) throw new Error('the rule never arrived')
    await new Promise((r) => setTimeout(r, 1))
  }
}
