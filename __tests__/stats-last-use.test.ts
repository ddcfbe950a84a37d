// A limiter's last use as the registry holds it (store.limiters(), the CLI, the dashboard): each
// process writes it at every statistics flush that finds the limiter used, so it is within one
// flush period of the truth, whatever the gap between uses.
import { afterEach, describe, expect, it } from 'vitest'
import { BucketLimiter, ManualClock, RedisStore, type Store } from '../lib/entries/index.js'
import { STORE_KINDS, clusterNodes, freshPrefix, redisUrl } from './helpers/stores.js'

const T0 = 1_800_000_000_000
const REDIS = STORE_KINDS.filter((k) => k !== 'memory')

describe.each(REDIS)('issue-38-last-use on %s', (kind) => {
  const open: Store[] = []
  afterEach(async () => {
    await Promise.all(open.splice(0).map((s) => s.close()))
  })

  it('the last use read back is the flush that followed it, for gaps of 1 s to 10 min between uses', async () => {
    const clock = new ManualClock(T0)
    const target = kind === 'redis' ? { url: redisUrl() } : { cluster: clusterNodes() }
    const keyPrefix = freshPrefix()
    // two processes: one uses the limiter, the other reads (a CLI, a dashboard)
    const user = await RedisStore.connect({ ...target, keyPrefix, clock, statsFlushMs: 600_000 })
    const reader = await RedisStore.connect({ ...target, keyPrefix, clock, statsFlushMs: 600_000 })
    open.push(user, reader)
    const limiter = new BucketLimiter(user, { name: 'user@example.com', limit: 1000, interval: 'hour' })
    const flush = () => (user as unknown as { _flushStats(): Promise<void> })._flushStats()
    const lastUse = async () => (await reader.limiters()).find((l) => l.name === 'user@example.com')?.lastUse
    for (const gapMs of [1_000, 5_000, 20_000, 59_000, 61_000, 600_000, 2_000, 1_000]) {
      clock.advance(gapMs)
      await limiter.check()
      await flush()
      // the flush is at the use's time here: the last use read is the flush's
      expect(await lastUse(), `after a gap of ${gapMs} ms`).toBe(clock.now())
    }
    // a flush that finds the limiter unused leaves its last use where it was
    const used = clock.now()
    clock.advance(30_000)
    await flush()
    expect(await lastUse()).toBe(used)
  })
})
