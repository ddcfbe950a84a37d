// Issue 24, item 2: bytes that arrive while no command waits for them are not a reply to
// anything. Kept, they were framed as the next command's reply: that call failed, and every
// later call silently got the previous call's decision (another user's "allowed"). Now they
// drop the connection (a protocol error, like any framing error) and the lane is redialled.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { BucketLimiter, RedisStore } from '../lib/entries/index.js'
import { HostileProxy } from './helpers/hostile-proxy.js'
import { freshPrefix, redisUrl } from './helpers/stores.js'

let proxy: HostileProxy

beforeAll(async () => {
  const u = new URL(redisUrl())
  proxy = new HostileProxy({ host: u.hostname, port: Number(u.port) })
  await proxy.listen()
})
afterAll(() => proxy.close())

// an "allowed, 99 left" decision, and a bare integer: what a stray reply could look like
const STRAY = {
  decision: Buffer.from('*4\r\n:1\r\n:99\r\n:0\r\n:0\r\n'),
  integer: Buffer.from(':1\r\n'),
  several: Buffer.from('*4\r\n:1\r\n:99\r\n:0\r\n:0\r\n'.repeat(3) + '+OK\r\n'),
}

describe.each([
  ['direct lane', true],
  ['pool', false],
] as const)('issue-24-stray-reply: unsolicited bytes on the %s', (_lane, direct) => {
  for (const [name, payload] of Object.entries(STRAY)) {
    it(`${name}: no call ever gets another call's decision; the store recovers`, async () => {
      const store = await RedisStore.connect({
        url: `redis://127.0.0.1:${proxy.port}`,
        keyPrefix: freshPrefix(),
        directConnection: direct,
        commandTimeoutMs: 500,
        statsFlushMs: 600_000,
      })
      try {
        // one limiter always refuses (used up), one always admits (a large limit)
        const full = new BucketLimiter(store, { name: 'full', limit: 1, interval: 'hour' })
        const open = new BucketLimiter(store, { name: 'open', limit: 1_000_000, interval: 'hour' })
        expect((await full.check()).allowed).toBe(true)
        expect((await full.check()).allowed).toBe(false)
        expect((await open.check()).allowed).toBe(true)
        // idle now: nothing waits for a reply on any connection
        expect(proxy.inject(payload)).toBeGreaterThan(0)
        await new Promise((r) => setTimeout(r, 50))
        let answered = 0
        let failed = 0
        for (let i = 0; i < 200; i++) {
          for (const [limiter, expected] of [
            [full, false],
            [open, true],
          ] as const) {
            try {
              const d = await limiter.check()
              expect(d.allowed, `call ${i}: a decision of another call`).toBe(expected)
              answered++
            } catch (err) {
              expect(['ERR_STORE_UNAVAILABLE', 'ERR_TIMEOUT']).toContain((err as { code: string }).code)
              failed++
            }
          }
        }
        // at most the calls under way when the connection dropped failed; the rest were answered
        expect(failed).toBeLessThanOrEqual(2)
        expect(answered).toBeGreaterThanOrEqual(398)
      } finally {
        await store.close()
      }
    })
  }
})
