// Zero extra round trips per decision with rules (issue 39, DESIGN §9), counted with MONITOR on
// a real Redis: with 3, 1,000 and 100,000 rules in the table, a decision is one script call
// (a limiter a rule overrides too), and a deny or an allow is answered with none at all.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import Redis from 'ioredis'
import { BucketLimiter, RedisStore } from '../lib/entries/index.js'
import { freshPrefix, redisUrl } from './helpers/stores.js'
import { args, monitor } from './helpers/monitor.js'

const DECISIONS = 50

describe('issue-39-rules-round-trips', () => {
  let raw: Redis
  beforeAll(() => {
    raw = new Redis(redisUrl())
  })
  afterAll(() => raw.disconnect())

  it.each([3, 1_000, 100_000])(
    '%i rules: one script call per decision, none for a deny or an allow',
    async (size) => {
      const keyPrefix = freshPrefix()
      // the rules written straight to the table's hash, as set() writes them (100,000 set() calls
      // would take minutes); a process reads the whole table at connect
      const table = `${keyPrefix}:rules:{rules}`
      // `size` rules in all: these, and a deny and an allow set below
      const fill = size - 2
      for (let from = 0; from < fill; from += 1000) {
        const fields: string[] = []
        for (let i = from; i < Math.min(fill, from + 1000); i++) {
          fields.push(JSON.stringify(['n', 'bucket', `rule-${i}`]), JSON.stringify({ rule: { limit: 5 } }))
        }
        await raw.hset(table, ...fields)
      }
      await raw.set(`${table}:version`, '1', 'PX', 600_000)
      await raw.pexpire(table, 600_000)
      const store = await RedisStore.connect({ url: redisUrl(), keyPrefix })
      try {
        expect((store as any).rules._table.size).toBe(fill)
        await store.rules.set({ kind: 'bucket', name: 'denied' }, { access: 'deny' })
        await store.rules.set({ kind: 'bucket', name: 'allowed' }, { access: 'allow' })
        expect((store as any).rules._table.size).toBe(size)
        const plain = new BucketLimiter(store, { name: 'plain', limit: 1e6, interval: 'hour' })
        const ruled = new BucketLimiter(store, { name: 'rule-0', limit: 1e6, interval: 'hour' })
        const denied = new BucketLimiter(store, { name: 'denied', limit: 1e6, interval: 'hour' })
        const allowed = new BucketLimiter(store, { name: 'allowed', limit: 1e6, interval: 'hour' })
        await plain.check() // the script loaded
        const m = await monitor(Number(new URL(redisUrl()).port))
        for (let i = 0; i < DECISIONS; i++) {
          expect((await plain.check()).allowed).toBe(true)
          expect((await ruled.check()).limit).toBe(5)
          expect(await denied.check()).toMatchObject({ allowed: false, reason: 'denied' })
          expect((await allowed.check()).allowed).toBe(true)
        }
        const lines = (await m.stop()).map(args)
        const calls = (name: string) =>
          lines.filter((a) => /^EVAL/i.test(a[0]) && a.includes(`${keyPrefix}:bucket:{${name}}`)).length
        expect([calls('plain'), calls('rule-0'), calls('denied'), calls('allowed')]).toEqual([
          DECISIONS,
          DECISIONS,
          0,
          0,
        ])
        // and nothing else of this store's on the decisions' path: no rule read per decision
        const reads = lines.filter((a) => a.some((x) => x.startsWith(`${keyPrefix}:rules:`)))
        expect(reads.length).toBeLessThanOrEqual(4) // the background version reads (every 500 ms at most)
      } finally {
        await store.close()
        await raw.del(table, `${table}:version`)
      }
    },
    60_000,
  )
})
