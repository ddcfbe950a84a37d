// close() ends everything at once: queued concurrent-limiter waiters settle with ERR_CLOSED
// right away (not at their deadlines), on every store.
import { describe, expect, it } from 'vitest'
import { ConcurrentLimiter } from '../lib/index.js'
import { STORE_KINDS, makeStore } from './helpers/stores.js'

describe.each(STORE_KINDS)('close() on %s', (kind) => {
  it('settles 1,000 queued waiters at once with ERR_CLOSED', async () => {
    const store = await makeStore(kind)
    const mutex = new ConcurrentLimiter(store, { name: 'm', limit: 1, waitTimeoutMs: 60_000 })
    const held = await mutex.acquire()
    expect(held).toBeTruthy()
    const settled: string[] = []
    const waiters = Array.from({ length: 1000 }, () =>
      mutex.acquire().then(
        () => settled.push('granted'),
        (err) => settled.push(err.code),
      ),
    )
    await new Promise((r) => setTimeout(r, 300)) // queued
    expect(settled).toEqual([])
    const start = Date.now()
    await store.close()
    await Promise.all(waiters)
    expect(Date.now() - start).toBeLessThan(2000)
    expect(new Set(settled)).toEqual(new Set(['ERR_CLOSED']))
    expect(settled.length).toBe(1000)
    await expect(mutex.tryAcquire()).rejects.toMatchObject({ code: 'ERR_CLOSED' })
  }, 20_000)
})
