// ConcurrentLimiter: the distributed semaphore, each scenario run on every store with a
// ManualClock (lock and wait timeouts move with the clock; wake-ups are pushed, not timed).
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { ConcurrentLimiter, ManualClock, OverLimitError, type Lease, type Store } from '../lib/entries/index.js'
import { STORE_KINDS, freshPrefix, keysUnder, makeStore, rawClient } from './helpers/stores.js'
import { eventually, flush, timerArmed } from './helpers/clock.js'

const T0 = 1_800_000_000_000

describe.each(STORE_KINDS)('ConcurrentLimiter on %s', (kind) => {
  let clock: ManualClock
  let store: Store
  const prefix = freshPrefix()
  const raw = kind === 'memory' ? null : rawClient(kind)

  beforeAll(async () => {
    clock = new ManualClock(T0)
    store = await makeStore(kind, { clock, keyPrefix: prefix })
  })
  afterAll(async () => {
    // every key the scenarios left behind expires (zsets emptied and refilled included)
    if (raw) {
      const keys = await keysUnder(raw, prefix)
      expect(keys.length).toBeGreaterThan(0)
      for (const key of keys) expect(`${key} ${await raw.pttl(key)}`).not.toMatch(/ -\d+$/)
      raw.disconnect()
    }
    await store.close()
  })

  let n = 0
  const limiter = (o: { limit: number; lockTimeoutMs?: number; waitTimeoutMs?: number; policy?: 'raise' | 'skip' }) =>
    new ConcurrentLimiter(store, { name: `c${n++}`, ...o })

  it('hands out at most limit leases, with strictly increasing fencing tokens', async () => {
    const c = limiter({ limit: 2 })
    const a = await c.tryAcquire()
    const b = await c.tryAcquire()
    expect(await c.tryAcquire()).toBeNull()
    expect([a?.token, b?.token]).toEqual([1, 2])
    expect(await a!.release()).toBe(true)
    expect(await a!.release()).toBe(false)
    const d = await c.tryAcquire()
    expect(d?.token).toBe(3)
    expect((await c.stats()).current).toBe(2)
  })

  it('a release wakes the next waiter at once, without moving the clock', async () => {
    const c = limiter({ limit: 1 })
    const held = (await c.acquire())!
    const waiting = c.acquire()
    await eventually(async () => (await c.stats()).waiting === 1)
    await held.release()
    const next = await waiting
    expect(next.token).toBe(2)
    expect(await c.stats()).toMatchObject({ held: 2, immediate: 1, waited: 1, current: 1, waiting: 0 })
  })

  it('maxWaiters: beyond the bound, an acquire is refused at once with a code; the queue then moves', async () => {
    const c = new ConcurrentLimiter(store, { name: `c${n++}`, limit: 1, maxWaiters: 2 })
    const held = (await c.acquire())!
    const first = c.acquire()
    const second = c.acquire()
    await eventually(async () => (await c.stats()).waiting === 2)
    // the third neither waits nor queues: refused on the spot, the clock not moved
    const third = await c.acquire().catch((e) => e)
    expect(third).toBeInstanceOf(OverLimitError)
    expect(third.code).toBe('ERR_OVER_LIMIT')
    expect((await c.stats()).waiting).toBe(2)
    // a slot free at once is still granted when the queue is full (tryAcquire is unaffected)
    await held.release()
    const a = await first
    expect(a.token).toBe(2)
    const queued = c.acquire() // room again: it queues behind the second
    await eventually(async () => (await c.stats()).waiting === 2)
    await a.release()
    await (await second).release()
    expect((await queued).token).toBe(4)
    expect(() => new ConcurrentLimiter(store, { name: 'x', limit: 1, maxWaiters: -1 })).toThrow(
      expect.objectContaining({ code: 'ERR_INVALID_CONFIG' }),
    )
  })

  it('serves waiters first come, first served, and a newcomer never overtakes them', async () => {
    const c = limiter({ limit: 1 })
    let lease: Lease = await c.acquire()
    const order: string[] = []
    const waiters = ['a', 'b', 'c'].map(async (id, i) => {
      await eventually(async () => (await c.stats()).waiting === i)
      const l = await c.acquire()
      order.push(id)
      return l
    })
    await eventually(async () => (await c.stats()).waiting === 3)
    expect(await c.tryAcquire()).toBeNull()
    for (const w of waiters) {
      await lease.release()
      lease = await w
    }
    expect(order).toEqual(['a', 'b', 'c'])
    await lease.release()
  })

  it('withinLimit releases the slot when fn throws, and returns what fn returns', async () => {
    const c = limiter({ limit: 1 })
    await expect(c.withinLimit(() => Promise.reject(new Error('boom')))).rejects.toThrow('boom')
    expect(await c.withinLimit((lease) => lease.token)).toBe(2)
    expect((await c.stats()).current).toBe(0)
  })

  it('a waiter gives up after waitTimeoutMs with OverLimitError (or skips under policy skip)', async () => {
    const c = limiter({ limit: 1, waitTimeoutMs: 1000, lockTimeoutMs: 60_000 })
    await c.acquire()
    const waiting = c.acquire().catch((e) => e)
    await timerArmed(clock)
    clock.advance(1000)
    const err = await waiting
    expect(err).toBeInstanceOf(OverLimitError)
    expect(err).toMatchObject({ code: 'ERR_OVER_LIMIT', limiter: c.name })
    expect(err.retryAfterMs).toBe(59_000)
    expect((await c.stats()).waiting).toBe(0)
    const skip = limiter({ limit: 1, waitTimeoutMs: 0, policy: 'skip' })
    await skip.acquire()
    let ran = false
    expect(await skip.withinLimit(() => (ran = true))).toBeUndefined()
    expect(ran).toBe(false)
    await expect(skip.acquire()).rejects.toMatchObject({ code: 'ERR_OVER_LIMIT' })
  })

  it("reclaims a crashed holder's slot after lockTimeoutMs and counts it", async () => {
    const c = limiter({ limit: 1, lockTimeoutMs: 1000, waitTimeoutMs: 0 })
    const lost = await c.acquire() // its holder "crashes": never released
    clock.advance(999)
    expect(await c.tryAcquire()).toBeNull()
    clock.advance(1)
    const next = await c.tryAcquire()
    expect(next?.token).toBe(2)
    expect(await lost.release()).toBe(false)
    expect(await lost.extend()).toBe(false)
    expect(await c.stats()).toMatchObject({ reclaimed: 1, overages: 1, heldTimeMs: 1000, current: 1 })
  })

  it("a queued waiter gets an expired lease's slot when the lock time passes", async () => {
    const c = limiter({ limit: 1, lockTimeoutMs: 1000, waitTimeoutMs: 5000 })
    await c.acquire()
    const waiting = c.acquire()
    await timerArmed(clock, 2) // the deadline, and a poll when the lease expires
    clock.advance(1001)
    expect((await waiting).token).toBe(2)
  })

  it('extend keeps a lease alive past its lock time', async () => {
    const c = limiter({ limit: 1, lockTimeoutMs: 1000, waitTimeoutMs: 0 })
    const lease = await c.acquire()
    clock.advance(900)
    expect(await lease.extend(5000)).toBe(true)
    clock.advance(4000)
    expect(await c.tryAcquire()).toBeNull()
    expect(await lease.release()).toBe(true)
  })

  it('an aborted wait rejects with ERR_ABORTED and leaves the queue', async () => {
    const c = limiter({ limit: 1 })
    const held = await c.acquire()
    const abort = new AbortController()
    const waiting = c.acquire({ signal: abort.signal }).catch((e) => e)
    await eventually(async () => (await c.stats()).waiting === 1)
    abort.abort()
    expect(await waiting).toMatchObject({ code: 'ERR_ABORTED' })
    expect((await c.stats()).waiting).toBe(0)
    await held.release()
    expect((await c.stats()).current).toBe(0)
  })

  it('stats count waits and holding time on the store clock', async () => {
    const c = limiter({ limit: 1 })
    const first = await c.acquire()
    const waiting = c.acquire()
    await eventually(async () => (await c.stats()).waiting === 1)
    clock.advance(250)
    await first.release()
    const second = await waiting
    clock.advance(100)
    await second.release()
    await flush()
    expect(await c.stats()).toMatchObject({
      held: 2,
      heldTimeMs: 350,
      immediate: 1,
      waited: 1,
      waitTimeMs: 250,
      overages: 0,
      reclaimed: 0,
      current: 0,
      waiting: 0,
    })
  })
})
