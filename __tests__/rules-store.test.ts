// store.rules (DESIGN §9) on every store: written, listed, deleted, in the history; in force in
// the writing process at once and in every other within a second; loaded by connect().
import { afterEach, describe, expect, it } from 'vitest'
import { ManualClock, RedisStore, type Store } from '../lib/entries/index.js'
import { STORE_KINDS, makeStore, makeStores, rawClient } from './helpers/stores.js'

const T0 = 1_800_000_000_000
type Rules = {
  set(target: object, rule: object, o?: object): Promise<void>
  delete(target: object): Promise<boolean>
  list(): Promise<any[]>
  history(): Promise<any[]>
  _forName(kind: string, name: string): any
  _forDoorKey(door: string, key: string): any
  reads?: number
}
const rulesOf = (s: Store) => (s as unknown as { rules: Rules }).rules

/** Milliseconds until `predicate` holds, polling each ms; fails past `withinMs`. */
async function until(predicate: () => boolean, withinMs: number): Promise<number> {
  const start = performance.now()
  while (!predicate()) {
    if (performance.now() - start > withinMs) throw new Error(`not within ${withinMs} ms`)
    await new Promise((r) => setTimeout(r, 1))
  }
  return performance.now() - start
}

describe.each(STORE_KINDS)('issue-39-rules-store on %s', (kind) => {
  const open: Store[] = []
  afterEach(async () => {
    await Promise.all(open.splice(0).map((s) => s.close()))
  })

  it('set, list, delete and history; in force in the writing process at once', async () => {
    const clock = new ManualClock(T0)
    const store = await makeStore(kind, { clock })
    open.push(store)
    const rules = rulesOf(store)
    const target = { kind: 'bucket', name: 'user@example.com' }
    await rules.set(target, { limit: 5, intervalMs: 60_000, note: 'ticket 7' })
    expect(rules._forName('bucket', 'user@example.com')?.rule).toEqual({
      limit: 5,
      intervalMs: 60_000,
      note: 'ticket 7',
    })
    await rules.set({ door: 'api', keyPrefix: '10.' }, { access: 'deny' }, { ttlMs: 60_000 })
    expect(rules._forDoorKey('api', '10.1.2.3')?.rule.access).toBe('deny')
    expect(await rules.list()).toEqual([
      { target, limit: 5, intervalMs: 60_000, note: 'ticket 7' },
      { target: { door: 'api', keyPrefix: '10.' }, access: 'deny', expiresAt: T0 + 60_000 },
    ])
    // a rule's TTL is on the store's clock
    clock.advance(60_000)
    expect(rules._forDoorKey('api', '10.1.2.3')).toBeUndefined()
    expect(await rules.list()).toHaveLength(1)
    expect(await rules.delete(target)).toBe(true)
    expect(await rules.delete(target)).toBe(false)
    expect(rules._forName('bucket', 'user@example.com')).toBeUndefined()
    const history = await rules.history()
    expect(history.map((h) => [h.at, h.rule === null ? null : Object.keys(h.rule)])).toEqual([
      [T0 + 60_000, null],
      [T0, ['target', 'access', 'expiresAt']],
      [T0, ['target', 'limit', 'intervalMs', 'note']],
    ])
    expect(history[2].note).toBe('ticket 7')
    // bad input: refused before anything is written
    await expect(rules.set({ kind: 'bucket', name: 'x' }, { qps: 5 })).rejects.toMatchObject({
      code: 'ERR_INVALID_ARGUMENT',
    })
    await expect(rules.set('bucket:x' as never, { limit: 1 })).rejects.toMatchObject({ code: 'ERR_INVALID_ARGUMENT' })
    expect(await rules.history()).toHaveLength(3)
  })

  it.skipIf(kind === 'memory')(
    'in force in every other process within a second, by message; a new process loads the table',
    async () => {
      const clock = new ManualClock(T0)
      const [a, b, c] = await makeStores(kind, 3, clock)
      open.push(a, b, c)
      const times: number[] = []
      for (let i = 1; i <= 20; i++) {
        await rulesOf(a).set({ kind: 'pacer', prefix: 'github' }, { qps: i })
        times.push(
          await until(
            () =>
              rulesOf(b)._forName('pacer', 'github-api')?.rule.qps === i &&
              rulesOf(c)._forName('pacer', 'github')?.rule.qps === i,
            1000,
          ),
        )
      }
      // by message, not by the 500 ms poll: most changes arrive within a few ms
      times.sort((x, y) => x - y)
      expect(times[10]).toBeLessThan(100)
      // at most 2 background reads a second per process, whatever the rate of changes
      const keyPrefix = (a as unknown as { keyPrefix: string }).keyPrefix
      const target =
        kind === 'redis'
          ? { url: process.env.SLUICE_REDIS_URL! }
          : { cluster: process.env.SLUICE_REDIS_CLUSTER!.split(',') }
      const d = await RedisStore.connect({ ...target, keyPrefix, clock })
      open.push(d)
      expect(rulesOf(d)._forName('pacer', 'github')?.rule.qps).toBe(20)
      expect(await rulesOf(d).list()).toEqual([{ target: { kind: 'pacer', prefix: 'github' }, qps: 20 }])
    },
  )

  it.skipIf(kind === 'memory')(
    'with its subscription killed, a process still applies changes within a second',
    async () => {
      const clock = new ManualClock(T0)
      const [a, b] = await makeStores(kind, 2, clock)
      open.push(a, b)
      await rulesOf(a).set({ kind: 'window', name: 'w' }, { limit: 1 })
      await until(() => rulesOf(b)._forName('window', 'w')?.rule.limit === 1, 1000)
      const admin = rawClient(kind as 'redis' | 'cluster')
      try {
        const nodes = 'nodes' in admin ? admin.nodes('master') : [admin]
        for (const n of nodes) await n.call('CLIENT', 'KILL', 'TYPE', 'pubsub')
      } finally {
        admin.disconnect()
      }
      for (let i = 2; i <= 5; i++) {
        await rulesOf(a).set({ kind: 'window', name: 'w' }, { limit: i })
        await until(() => rulesOf(b)._forName('window', 'w')?.rule.limit === i, 1000)
      }
    },
  )
})
