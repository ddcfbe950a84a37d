// store.rules on sluice/fetch keys (kind 'adaptive', the key's name; DESIGN §9): a deny refuses
// with no store call and no upstream call, an allow sends at once, an override is the key's rate
// and burst, shadow sends at once what would have waited and counts it.
import { afterEach, describe, expect, it } from 'vitest'
import { ManualClock, type Store } from '../lib/entries/index.js'
import { pacedFetch } from '../lib/entries/fetch.js'
import { STORE_KINDS, makeStore } from './helpers/stores.js'

const T0 = 1_800_000_000_000
type Rules = { set(target: object, rule: object): Promise<void>; delete(target: object): Promise<boolean> }
const rulesOf = (s: Store) => (s as unknown as { rules: Rules }).rules

describe.each(STORE_KINDS)('issue-39-rules-fetch on %s', (kind) => {
  const open: Store[] = []
  afterEach(async () => {
    await Promise.all(open.splice(0).map((s) => s.close()))
  })

  it('deny, allow, a rate raised, shadow: counted at the upstream', async () => {
    const clock = new ManualClock(T0)
    const store = await makeStore(kind, { clock })
    open.push(store)
    let upstream = 0
    const key = 'api.example.com:443'
    const f = pacedFetch({
      store,
      key: () => key,
      qps: 1,
      maxBurst: 0,
      maxWaitMs: 0,
      retry: false,
      fetch: async () => {
        upstream++
        return new Response('ok')
      },
    })
    /** `n` calls, one after another: [sent, refused over the limit, denied] */
    const calls = async (n: number) => {
      const out = [0, 0, 0]
      for (let i = 0; i < n; i++) {
        try {
          await f('https://api.example.com/v1')
          out[0]++
        } catch (e) {
          out[(e as { reason?: string }).reason === 'denied' ? 2 : 1]++
        }
      }
      return out
    }
    // 1 a second, no wait: 1 of 3
    expect(await calls(3)).toEqual([1, 2, 0])
    clock.advance(1000)
    // denied: no store call, no upstream call
    await rulesOf(store).set({ kind: 'adaptive', name: key }, { access: 'deny' })
    const batching = (store as unknown as { batching?: { calls: number } }).batching
    const before = [batching?.calls, upstream]
    expect(await calls(3)).toEqual([0, 0, 3])
    expect([batching?.calls, upstream]).toEqual(before)
    // allowed: every call sent at once
    await rulesOf(store).set({ kind: 'adaptive', name: key }, { access: 'allow' })
    expect(await calls(5)).toEqual([5, 0, 0])
    // raised to 100 a second: a call every 10 ms goes (at the key's own 1 a second, 1 of 5)
    clock.advance(1000)
    await rulesOf(store).set({ kind: 'adaptive', name: key }, { qps: 100 })
    const every10ms = async () => {
      const out = [0, 0, 0]
      for (let i = 0; i < 5; i++) {
        const r = await calls(1)
        r.forEach((v, j) => (out[j] += v))
        clock.advance(10)
      }
      return out
    }
    expect(await every10ms()).toEqual([5, 0, 0])
    // shadow at the key's own rate: every call goes, the would-be waits counted
    clock.advance(1000)
    await rulesOf(store).set({ kind: 'adaptive', name: key }, { mode: 'shadow' })
    expect(await calls(4)).toEqual([4, 0, 0])
    const [s] = await f.stats(key)
    expect(s).toMatchObject({ shadowRefused: 3 })
    // gone: the key's own rate again
    await rulesOf(store).delete({ kind: 'adaptive', name: key })
    clock.advance(1000)
    expect(await every10ms()).toEqual([1, 4, 0])
  })
})
