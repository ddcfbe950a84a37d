// Issue 25 item 4: a door's several windows are decided all or nothing in one store call, proven
// by counting on memory, Redis and the cluster: under contention each second admits exactly its
// limit and the minute window holds exactly the admitted count, at every read (a charge that a
// refusal would refund was visible, and could refuse others); the keys of one door key share a
// hash slot (fixed, window, leaky and gcra), one-window doors keep their key.
import { createRequire } from 'node:module'
import { describe, expect, it } from 'vitest'
import { ManualClock, type Store } from '../lib/entries/index.js'
import { STORE_KINDS, keysUnder, useStore } from './helpers/stores.js'

const internal = createRequire(__filename)
const { Door } = internal('../lib/doors/http/door.js') as { Door: any }
const { doorConfig } = internal('../lib/doors/http/options.js') as { doorConfig: (options: object) => any }
const { keyId } = internal('../lib/doors/http/key.js') as { keyId: (key: string) => string }
const { stateOf } = internal('../lib/doors/inspect.js') as { stateOf: (store: Store, info: object) => Promise<any> }

const T0 = 1_800_000_000_000 // a whole second (and minute)

const door = (store: Store, options: object) =>
  new Door(doorConfig({ store, keyGenerator: (req: any) => req.key, cost: (req: any) => req.cost ?? 1, ...options }))

/** Units charged on window `i` of `key`: a peek's room (nothing charged, nothing counted). */
async function used(d: any, key: string, i: number): Promise<number> {
  const made = d._limiterFor(keyId(key), null)
  const l = (made.members ?? made)[i]
  return l.limit - (await l.peek()).remaining
}

/** After `n` microtask hops (n < 40), or `n - 39` turns of the event loop. */
async function later(n: number): Promise<void> {
  for (let i = 0; i < Math.min(n, 40); i++) await null
  for (let i = 40; i <= n; i++) await new Promise((r) => setImmediate(r))
}

for (const kind of STORE_KINDS) {
  describe(`several windows, all or nothing, on ${kind}`, () => {
    const clock = new ManualClock(T0)
    const ctx = useStore(kind, { clock })

    it('under contention each second admits exactly 5, and the minute holds exactly the admitted count at every read', async () => {
      const d = door(ctx.store, {
        identifier: 'contended',
        limits: [
          { limit: 5, windowMs: 1000 },
          { limit: 1000, windowMs: 60_000 },
        ],
      })
      let admitted = 0
      for (let second = 0; second < 4; second++) {
        const burst = Promise.all(Array.from({ length: 40 }, () => d.decide({ key: 'k' }, {})))
        // reads of the minute window all through the burst (after 0..39 microtask hops, then
        // 1..8 event-loop turns): a charge that a refusal takes back would be seen by one
        const reads = Array.from({ length: 48 }, (_, n) => later(n).then(() => used(d, 'k', 1)))
        const outcomes = await burst
        const now = outcomes.filter((o: any) => o.allowed).length
        expect(now, `second ${second}`).toBe(5)
        admitted += now
        for (const r of await Promise.all(reads)) expect(r).toBeLessThanOrEqual(admitted)
        expect(await used(d, 'k', 1)).toBe(admitted)
        expect(await used(d, 'k', 0)).toBe(5)
        // a refused request reports each window as the store saw it: the minute's room uncharged
        const refused = outcomes.find((o: any) => !o.allowed)
        expect(refused.windows.map((w: any) => w.remaining)).toEqual([0, 1000 - admitted])
        clock.advance(1000)
      }
    })

    it('a request the first window refuses never takes room another request needs from the second', async () => {
      // window s: 5 per second, window m: 6 per minute; a request of cost 3 takes 3 of each
      const d = door(ctx.store, {
        identifier: 'costs',
        limits: [
          { limit: 5, windowMs: 1000 },
          { limit: 6, windowMs: 60_000 },
        ],
      })
      expect((await d.decide({ key: 'k', cost: 3 }, {})).allowed).toBe(true)
      // s has 2 left, m 3: the cost-3 request does not fit s; the cost-1 request fits both.
      // Charged one window at a time, the first would hold m's last 3 until its refund, and the
      // second would be refused for it.
      const [big, small] = await Promise.all([d.decide({ key: 'k', cost: 3 }, {}), d.decide({ key: 'k', cost: 1 }, {})])
      expect([big.allowed, small.allowed]).toEqual([false, true])
      expect([await used(d, 'k', 0), await used(d, 'k', 1)]).toEqual([4, 4])
      clock.advance(1000)
    })

    it("inspect (CLI, dashboard) reads a window of several at its key under the door key's tag", async () => {
      const d = door(ctx.store, {
        identifier: 'seen',
        limits: [
          { limit: 5, windowMs: 1000 },
          { limit: 9, windowMs: 60_000 },
        ],
      })
      for (let i = 0; i < 3; i++) await d.decide({ key: 'k' }, {})
      const made = d._limiterFor(keyId('k'), null)
      const left = []
      for (const [i, m] of made.members.entries()) {
        // what store.limiters() lists for it: kind, name and options (through JSON, as Redis keeps them)
        const info = { kind: m._statsKind, name: m._statsName, options: JSON.parse(JSON.stringify(m._statsOptions())) }
        left.push((await stateOf(ctx.store, info)).remaining)
        expect(info.options.window).toEqual({ group: m._statsName.slice(0, -2), index: i })
      }
      expect(left).toEqual([2, 6])
      clock.advance(1000)
    })

    it('skipFailedRequests gives a group back in one call; a refused group charged nothing to give back', async () => {
      const d = door(ctx.store, {
        identifier: 'refunds',
        skipFailedRequests: true,
        limits: [
          { limit: 2, windowMs: 1000 },
          { limit: 10, windowMs: 60_000 },
        ],
      })
      const ok = await d.decide({ key: 'k' }, {})
      expect(ok.refund).not.toBeNull()
      await ok.refund()
      expect([await used(d, 'k', 0), await used(d, 'k', 1)]).toEqual([0, 0])
      await d.decide({ key: 'k' }, {})
      await d.decide({ key: 'k' }, {})
      const refused = await d.decide({ key: 'k' }, {})
      expect([refused.allowed, refused.refund]).toEqual([false, null])
      expect([await used(d, 'k', 0), await used(d, 'k', 1)]).toEqual([2, 2])
      await d.resetKey('k')
      expect([await used(d, 'k', 0), await used(d, 'k', 1)]).toEqual([0, 0])
    })

    if (kind !== 'memory') {
      it("one door key's windows share a hash slot (v2 layout); one window keeps its key", async () => {
        const raw = ctx.raw!
        const limits = [
          { limit: 5, windowMs: 1000 },
          { limit: 50, windowMs: 60_000 },
          { limit: 500, windowMs: 3_600_000 },
        ]
        for (const algorithm of ['fixed', 'window', 'leaky', 'gcra']) {
          const d = door(ctx.store, { identifier: `slots${algorithm}`, algorithm, limits })
          for (const key of ['a', 'ключ/{x}:y', 'b'.repeat(300)]) {
            expect((await d.decide({ key }, {})).allowed).toBe(true)
          }
        }
        // 'fixed' (the default before issue 29): the bucket segment below
        const one = door(ctx.store, { identifier: 'one', algorithm: 'fixed', limit: 5, windowMs: 1000 })
        expect((await one.decide({ key: 'a' }, {})).allowed).toBe(true)
        const keys = await keysUnder(raw, ctx.prefix)
        const byTag = new Map<string, string[]>()
        for (const key of keys.filter((k) => k.includes('{slots'))) {
          const m = /^[^:]+:(bucket|window|leaky|pacer):v2:\{([^}]+)\}:(\d)$/.exec(key)
          expect(m, key).not.toBeNull()
          byTag.set(m![2], [...(byTag.get(m![2]) ?? []), key])
        }
        // 4 algorithms x 3 keys, 3 windows each
        expect(byTag.size).toBe(12)
        for (const [tag, group] of byTag) {
          expect(group.length, tag).toBe(3)
          const slots = await Promise.all(group.map((k) => raw.call('CLUSTER', 'KEYSLOT', k).catch(() => null)))
          if (kind === 'cluster') expect(new Set(slots).size, tag).toBe(1)
        }
        expect(keys).toContain(`${ctx.prefix}:bucket:{one_a}`)
      })
    }
  })
}
