// issue 24 item 8: waits longer than setTimeout's 2^31-1 ms (~24.8 days). Options accept up
// to 10 years; a plain setTimeout of more fires after 1 ms, so a LeakyLimiter of 2 per 60
// days ran 4 jobs at once and a 30-day acquire gave up after a few ms. On every store, on the
// system clock (real timers: the path a ManualClock does not take), and the same scenario on
// a ManualClock.
import { afterAll, afterEach, beforeEach, describe, expect, it } from 'vitest'
import { ConcurrentLimiter, LeakyLimiter, ManualClock, WindowLimiter } from '../lib/entries/index.js'
import { STORE_KINDS, useStore } from './helpers/stores.js'
import { eventually, flush, timerArmed } from './helpers/clock.js'

const DAY = 86_400_000
const T0 = 1_800_000_000_000
const pause = (ms: number) => new Promise((r) => setTimeout(r, ms))

// Node warns (TimeoutOverflowWarning) each time a timer is asked for more than 2^31-1 ms
const warnings: string[] = []
const onWarning = (w: Error) => warnings.push(w.name)
process.on('warning', onWarning)
afterAll(() => {
  process.off('warning', onWarning)
})

describe.each(STORE_KINDS)('long waits on the system clock, %s', (kind) => {
  const s = useStore(kind)
  let n = 0
  const name = () => `long${n++}`
  beforeEach(() => {
    warnings.length = 0
  })
  afterEach(() => {
    expect(warnings).not.toContain('TimeoutOverflowWarning')
  })

  it('issue-24-long-leaky: a LeakyLimiter of 2 per 60 days runs 2 jobs, not 4', async () => {
    const l = new LeakyLimiter(s.store, { name: name(), limit: 2, interval: 60 * DAY, waitTimeoutMs: 90 * DAY })
    const abort = new AbortController()
    let ran = 0
    const calls = [1, 2, 3, 4].map(() => l.withinLimit(() => ++ran, { signal: abort.signal }).catch((e) => e))
    await eventually(() => ran >= 2)
    await pause(200)
    // the 3rd and 4th reserved slots 30 and 60 days away and wait for them
    expect(ran).toBe(2)
    abort.abort()
    const results = await Promise.all(calls)
    expect(results.slice(0, 2)).toEqual([1, 2])
    expect(results.slice(2).map((e) => e.code)).toEqual(['ERR_ABORTED', 'ERR_ABORTED'])
    expect(ran).toBe(2)
  })

  it('issue-24-long-window-wait: a 40-day window waits for its end without calling the store again', async () => {
    const l = new WindowLimiter(s.store, { name: name(), limit: 1, interval: 40 * DAY, waitTimeoutMs: 90 * DAY })
    expect((await l.check()).allowed).toBe(true)
    let calls = 0
    const call = (l as any)._call.bind(l)
    ;(l as any)._call = (...args: unknown[]) => {
      calls++
      return call(...args)
    }
    const abort = new AbortController()
    let ran = false
    const waiting = l.withinLimit(() => (ran = true), { signal: abort.signal }).catch((e) => e)
    await pause(200)
    // one refusal, then a 40-day sleep (a 1 ms timer would re-ask the store in a loop)
    expect(ran).toBe(false)
    expect(calls).toBe(1)
    abort.abort()
    expect(await waiting).toMatchObject({ code: 'ERR_ABORTED' })
  })

  it('issue-24-long-acquire: a 30-day acquire waits, and a release wakes it', async () => {
    const c = new ConcurrentLimiter(s.store, { name: name(), limit: 1, waitTimeoutMs: 30 * DAY })
    const held = (await c.tryAcquire())!
    expect(held).not.toBeNull()
    let settled: unknown = 'pending'
    const waiting = c.acquire().then(
      (lease) => (settled = lease),
      (err) => (settled = err),
    )
    await pause(200)
    expect(settled).toBe('pending')
    await held.release()
    await waiting
    expect(settled).toMatchObject({ token: held.token + 1 })
    await (settled as { release(): Promise<boolean> }).release()
  })

  it("issue-24-long-lease-expiry: a waiter behind a 40-day lease does not poll for the lease's expiry", async () => {
    const c = new ConcurrentLimiter(s.store, {
      name: name(),
      limit: 1,
      lockTimeoutMs: 40 * DAY,
      waitTimeoutMs: 60 * DAY,
      ttlMs: 250 * DAY,
    })
    const held = (await c.tryAcquire())!
    let polls = 0
    const op = (c as any)._op.bind(c)
    ;(c as any)._op = (...args: unknown[]) => {
      if (args[0] === 4) polls++ // POLL: asks whether an expired lease can be reclaimed
      return op(...args)
    }
    const abort = new AbortController()
    const waiting = c.acquire({ signal: abort.signal }).catch((e) => e)
    await pause(200)
    // the expiry poll is 40 days away (a 1 ms timer polls in a loop)
    expect(polls).toBe(0)
    abort.abort()
    expect(await waiting).toMatchObject({ code: 'ERR_ABORTED' })
    await held.release()
  })
})

describe.each(STORE_KINDS)('long waits on a ManualClock, %s', (kind) => {
  const clock = new ManualClock(T0)
  const s = useStore(kind, { clock })
  let n = 0
  const name = () => `longm${n++}`

  it('a LeakyLimiter of 2 per 60 days runs the 3rd job at 30 days and the 4th at 60', async () => {
    clock.set(T0)
    const l = new LeakyLimiter(s.store, { name: name(), limit: 2, interval: 60 * DAY, waitTimeoutMs: 90 * DAY })
    const ran: number[] = []
    const calls = [1, 2, 3, 4].map((i) => l.withinLimit(() => ran.push(i)))
    await timerArmed(clock, 2)
    expect(ran).toEqual([1, 2])
    clock.advance(30 * DAY - 1)
    await flush()
    expect(ran).toEqual([1, 2])
    clock.advance(1)
    await eventually(() => ran.length === 3)
    clock.advance(30 * DAY - 1)
    await flush()
    expect(ran).toEqual([1, 2, 3])
    clock.advance(1)
    await Promise.all(calls)
    expect(ran).toEqual([1, 2, 3, 4])
  })

  it('a 30-day acquire gives up at 30 days, not before', async () => {
    clock.set(T0)
    const c = new ConcurrentLimiter(s.store, { name: name(), limit: 1, waitTimeoutMs: 30 * DAY })
    const held = (await c.tryAcquire())!
    await held.extend(40 * DAY)
    let settled: unknown = 'pending'
    const waiting = c.acquire().then(
      (lease) => (settled = lease),
      (err) => (settled = err),
    )
    await timerArmed(clock)
    clock.advance(30 * DAY - 1)
    await flush()
    expect(settled).toBe('pending')
    clock.advance(1)
    await waiting
    expect(settled).toMatchObject({ code: 'ERR_OVER_LIMIT' })
    await held.release()
  })
})
