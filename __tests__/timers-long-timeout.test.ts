// issue 24 item 8: setTimeout fires after 1 ms when asked for more than 2^31-1 ms (~24.8
// days); lib/base/timers.js's longTimeout re-arms in steps instead. Fake timers here, and only
// here: they emulate that overflow as Node does (a delay above 2^31-1 becomes 1 ms).
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'
import { ManualClock } from '../lib/entries/index.js'

type Cancel = () => void
const { longTimeout, MAX_TIMEOUT_MS } = require('../lib/base/timers.js') as {
  longTimeout: (fn: () => void, ms: number, o?: { clock?: ManualClock | null; unref?: boolean }) => Cancel
  MAX_TIMEOUT_MS: number
}

const DAY = 86_400_000

describe('issue-24-long-timeout: longTimeout', () => {
  beforeEach(() => {
    vi.useFakeTimers()
  })
  afterEach(() => {
    vi.useRealTimers()
  })

  it('plain setTimeout overflows (the defect, as the fake timers emulate it)', () => {
    const fired = vi.fn()
    setTimeout(fired, 30 * DAY)
    vi.advanceTimersByTime(1)
    expect(fired).toHaveBeenCalledTimes(1)
  })

  it('a 30-day wait does not fire early, and fires once at 30 days', () => {
    const fired = vi.fn()
    longTimeout(fired, 30 * DAY)
    vi.advanceTimersByTime(1)
    expect(fired).not.toHaveBeenCalled()
    vi.advanceTimersByTime(MAX_TIMEOUT_MS) // past the first step
    expect(fired).not.toHaveBeenCalled()
    vi.advanceTimersByTime(30 * DAY - 1 - MAX_TIMEOUT_MS - 1) // 1 ms before the end
    expect(fired).not.toHaveBeenCalled()
    vi.advanceTimersByTime(1)
    expect(fired).toHaveBeenCalledTimes(1)
    vi.advanceTimersByTime(365 * DAY)
    expect(fired).toHaveBeenCalledTimes(1)
  })

  it('10 years (the longest option) in steps of at most 2^31-1 ms, one timer pending at a time', () => {
    const fired = vi.fn()
    const ms = 315_360_000_000
    longTimeout(fired, ms)
    expect(MAX_TIMEOUT_MS).toBe(2 ** 31 - 1)
    let steps = 0
    while (!fired.mock.calls.length) {
      expect(vi.getTimerCount()).toBe(1)
      const before = Date.now()
      vi.advanceTimersToNextTimer()
      expect(Date.now() - before).toBeLessThanOrEqual(MAX_TIMEOUT_MS)
      steps++
    }
    expect(steps).toBe(Math.ceil(ms / MAX_TIMEOUT_MS))
    expect(vi.getTimerCount()).toBe(0)
  })

  it('short waits are one plain timer; 0, negative and NaN fire on the next turn', () => {
    const fired = vi.fn()
    longTimeout(fired, 5)
    vi.advanceTimersByTime(4)
    expect(fired).not.toHaveBeenCalled()
    vi.advanceTimersByTime(1)
    expect(fired).toHaveBeenCalledTimes(1)
    for (const ms of [0, -5, NaN]) longTimeout(fired, ms)
    vi.advanceTimersByTime(1)
    expect(fired).toHaveBeenCalledTimes(4)
  })

  it('cancel stops it before and after a re-arm', () => {
    const a = vi.fn()
    const b = vi.fn()
    const cancelA = longTimeout(a, 60 * DAY)
    const cancelB = longTimeout(b, 60 * DAY)
    cancelA()
    vi.advanceTimersByTime(MAX_TIMEOUT_MS + 1) // b re-armed once
    cancelB()
    vi.advanceTimersByTime(60 * DAY)
    expect(a).not.toHaveBeenCalled()
    expect(b).not.toHaveBeenCalled()
    expect(vi.getTimerCount()).toBe(0)
  })

  it('unref: every step is unref-ed; by default none is (as the plain setTimeout it replaces)', () => {
    const unrefs: boolean[] = []
    const real = globalThis.setTimeout
    const spy = vi.spyOn(globalThis, 'setTimeout').mockImplementation(((fn: () => void, ms: number) => {
      const t = real(fn, ms) as unknown as { unref(): unknown }
      const unref = t.unref.bind(t)
      unrefs.push(false)
      const i = unrefs.length - 1
      t.unref = () => {
        unrefs[i] = true
        return unref()
      }
      return t
    }) as typeof setTimeout)
    try {
      longTimeout(() => {}, 30 * DAY, { unref: true })
      vi.advanceTimersByTime(MAX_TIMEOUT_MS)
      longTimeout(() => {}, 30 * DAY)
      expect(unrefs).toEqual([true, true, false])
    } finally {
      spy.mockRestore()
    }
  })

  it('on a ManualClock: fires when the clock reaches the time, however far', () => {
    const clock = new ManualClock(1_800_000_000_000)
    const fired = vi.fn()
    const cancel = longTimeout(fired, 60 * DAY, { clock })
    vi.advanceTimersByTime(60 * DAY) // real timers play no part
    expect(fired).not.toHaveBeenCalled()
    clock.advance(60 * DAY - 1)
    expect(fired).not.toHaveBeenCalled()
    clock.advance(1)
    expect(fired).toHaveBeenCalledTimes(1)
    cancel()
    const never = vi.fn()
    longTimeout(never, 1000, { clock })()
    clock.advance(2000)
    expect(never).not.toHaveBeenCalled()
  })
})
