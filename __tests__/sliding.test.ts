// SlidingWindowLimiter: several exact sliding windows, all or nothing, on every store with a
// ManualClock; then its bad inputs.
import { describe, expect, it } from 'vitest'
import { ManualClock, OverLimitError, SlidingWindowLimiter } from '../lib/entries/index.js'
import { STORE_KINDS, useStore } from './helpers/stores.js'
import { codeOf } from './helpers/errors.js'

const T0 = 1_800_000_000_000

describe.each(STORE_KINDS)('SlidingWindowLimiter on %s', (kind) => {
  const clock = new ManualClock(T0)
  const s = useStore(kind, { clock })
  const { raw, prefix } = s

  let n = 0
  const make = (windows: { limit: number; intervalMs: number }[]) =>
    new SlidingWindowLimiter(s.store, { name: `s${n++}`, windows })

  it('admits up to every window, and a call one window refuses charges none of them', async () => {
    clock.set(T0)
    const l = make([
      { limit: 2, intervalMs: 1000 },
      { limit: 3, intervalMs: 10_000 },
    ])
    const a = await l.check()
    expect(a).toEqual({
      allowed: true,
      retryAfterMs: 0,
      degraded: false,
      windows: [
        { limit: 2, intervalMs: 1000, remaining: 1, retryAfterMs: 0 },
        { limit: 3, intervalMs: 10_000, remaining: 2, retryAfterMs: 0 },
      ],
    })
    clock.advance(100)
    expect((await l.check()).allowed).toBe(true)
    clock.advance(100)
    const refused = await l.check()
    expect(refused.allowed).toBe(false)
    expect(refused.retryAfterMs).toBe(800)
    expect(refused.windows.map((w) => [w.remaining, w.retryAfterMs])).toEqual([
      [0, 800],
      [1, 0],
    ])
    // the refused call did not use the 10 s window's last unit
    clock.set(T0 + 1000)
    const third = await l.check()
    expect(third.allowed).toBe(true)
    expect(third.windows[1].remaining).toBe(0)
    const full = await l.check()
    expect(full.allowed).toBe(false)
    expect(full.retryAfterMs).toBe(9000)
    expect(full.windows.map((w) => w.remaining)).toEqual([0, 0])
  })

  it('reports an exact retryAfter: refused 1 ms before it, admitted at it', async () => {
    clock.set(T0)
    const l = make([{ limit: 3, intervalMs: 500 }])
    for (let i = 0; i < 3; i++) {
      expect((await l.check()).allowed).toBe(true)
      clock.advance(40)
    }
    const d = await l.check()
    expect(d.retryAfterMs).toBe(500 - 120)
    clock.advance(d.retryAfterMs - 1)
    expect((await l.check()).allowed).toBe(false)
    clock.advance(1)
    expect((await l.check()).allowed).toBe(true)
    // a call exactly one interval old has left the window
    clock.advance(40)
    expect((await l.check()).allowed).toBe(true)
  })

  it('counts weights in full, waits for enough of them to leave, and weight 0 or peek charge nothing', async () => {
    clock.set(T0)
    const l = make([
      { limit: 10, intervalMs: 1000 },
      { limit: 20, intervalMs: 5000 },
    ])
    expect((await l.check(3)).windows[0].remaining).toBe(7)
    clock.advance(100)
    expect((await l.check(3)).allowed).toBe(true)
    clock.advance(100)
    expect((await l.check(3)).allowed).toBe(true)
    const d = await l.check(6)
    expect(d.allowed).toBe(false)
    expect(d.retryAfterMs).toBe(900) // 5 of the 9 must leave: the calls at 0 and 100
    expect((await l.peek(1)).windows[0].remaining).toBe(1)
    expect((await l.check(0)).allowed).toBe(true)
    expect((await l.peek(1)).windows.map((w) => w.remaining)).toEqual([1, 11])
    clock.advance(900)
    expect((await l.check(6)).allowed).toBe(true)
  })

  it('decides the calls of one tick in call order', async () => {
    clock.set(T0)
    const l = make([{ limit: 3, intervalMs: 60_000 }])
    const out = await Promise.all(Array.from({ length: 6 }, () => l.check()))
    expect(out.map((d) => d.allowed)).toEqual([true, true, true, false, false, false])
    expect(out.map((d) => d.windows[0].remaining)).toEqual([2, 1, 0, 0, 0, 0])
  })

  it('ensure runs the function when admitted and otherwise names the window that refused', async () => {
    clock.set(T0)
    const l = make([
      { limit: 5, intervalMs: 1000 },
      { limit: 1, intervalMs: 60_000 },
    ])
    expect(await l.ensure(() => 'ran')).toBe('ran')
    let ran = false
    const err = await l
      .ensure(() => {
        ran = true
      })
      .catch((e) => e)
    expect(ran).toBe(false)
    expect(err).toBeInstanceOf(OverLimitError)
    expect(err.code).toBe('ERR_OVER_LIMIT')
    expect(err.limiter).toBe(l.name)
    expect(err.window).toEqual({ limit: 1, intervalMs: 60_000 })
    expect(err.retryAfterMs).toBe(60_000)
  })

  it('reset forgets every logged call', async () => {
    clock.set(T0)
    const l = make([{ limit: 1, intervalMs: 60_000 }])
    await l.check()
    expect((await l.check()).allowed).toBe(false)
    await l.reset()
    expect((await l.check()).allowed).toBe(true)
  })

  it('keeps the log bounded: trimmed to the longest window, at most its limit entries, with a TTL', async () => {
    clock.set(T0)
    const l = make([
      { limit: 50, intervalMs: 100 },
      { limit: 8, intervalMs: 1000 },
    ])
    let admitted = 0
    for (let i = 0; i < 60; i++) {
      if ((await l.check()).allowed) admitted++
      clock.advance(50)
    }
    // 3 s in 50 ms steps, 8 per sliding second
    expect(admitted).toBe(24)
    if (raw) {
      const key = `${prefix}:sliding:{${l.name}}`
      expect(await raw.zcard(key)).toBeLessThanOrEqual(8)
      const ttl = await raw.pttl(key)
      expect(ttl).toBeGreaterThan(0)
      expect(ttl).toBeLessThanOrEqual(1000 + 60_000)
    }
  })
})

describe.each(STORE_KINDS)('SlidingWindowLimiter input validation on %s', (kind) => {
  const s = useStore(kind, { clock: new ManualClock(T0), after: 'empty' })

  it('rejects bad options with ERR_INVALID_CONFIG', () => {
    const good = { limit: 1, intervalMs: 1000 }
    const make = (o: unknown) => () => new SlidingWindowLimiter(s.store, o as never)
    for (const o of [
      undefined,
      {},
      { name: '', windows: [good] },
      { name: 'a\uD800', windows: [good] },
      { name: 'x', windows: [] },
      { name: 'x', windows: good },
      { name: 'x', windows: Array.from({ length: 17 }, () => good) },
      { name: 'x', windows: [{ limit: 0, intervalMs: 1000 }] },
      { name: 'x', windows: [{ limit: 1.5, intervalMs: 1000 }] },
      { name: 'x', windows: [{ limit: 1, intervalMs: 0 }] },
      { name: 'x', windows: [{ limit: 1, intervalMs: 10.5 }] },
      { name: 'x', windows: [{ limit: 1, interval: 1000 }] },
      { name: 'x', windows: [good], policy: 'skip' },
      // a sparse array: the hole is refused with a code, not a TypeError
      // eslint-disable-next-line no-sparse-arrays
      { name: 'x', windows: [good, , good] },
    ]) {
      expect(codeOf(make(o)), JSON.stringify(o)).toBe('ERR_INVALID_CONFIG')
    }
    expect(codeOf(() => new SlidingWindowLimiter({} as never, { name: 'x', windows: [good] }))).toBe(
      'ERR_INVALID_CONFIG',
    )
  })

  it('rejects bad weights and options with ERR_INVALID_ARGUMENT before touching the store', async () => {
    const l = new SlidingWindowLimiter(s.store, {
      name: 'v',
      windows: [
        { limit: 5, intervalMs: 1000 },
        { limit: 3, intervalMs: 9000 },
      ],
    })
    for (const w of [-1, 1.5, NaN, '1', 4]) {
      await expect(l.check(w as never)).rejects.toMatchObject({ code: 'ERR_INVALID_ARGUMENT' })
      await expect(l.peek(w as never)).rejects.toMatchObject({ code: 'ERR_INVALID_ARGUMENT' })
    }
    await expect(l.ensure('x' as never)).rejects.toMatchObject({ code: 'ERR_INVALID_ARGUMENT' })
    await expect(l.ensure(() => 1, { weight: 4 })).rejects.toMatchObject({ code: 'ERR_INVALID_ARGUMENT' })
    await expect(l.ensure(() => 1, { wait: 1 } as never)).rejects.toMatchObject({ code: 'ERR_INVALID_ARGUMENT' })
  })
})
