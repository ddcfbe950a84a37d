// SlidingCounterLimiter: the approximate sliding window (two counters per window), on every
// store with a ManualClock; its store-down answers; its bad inputs; and several processes on
// Redis and a cluster, counted per calendar window.
import { fork } from 'node:child_process'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { ManualClock, MemoryStore, OverLimitError, RedisStore, SlidingCounterLimiter } from '../lib/entries/index.js'
import { STORE_KINDS, clusterNodes, freshPrefix, redisUrl, useStore, REDIS_KINDS } from './helpers/stores.js'
import { freePort } from './helpers/servers.js'
import { FRAMEWORKS, get, serve } from './helpers/http.js'
import { codeOf } from './helpers/errors.js'

// a multiple of every interval below, so calendar windows start at T0
const T0 = 1_800_000_000_000

describe.each(STORE_KINDS)('SlidingCounterLimiter on %s', (kind) => {
  const clock = new ManualClock(T0)
  const s = useStore(kind, { clock })

  let n = 0
  const make = (windows: { limit: number; intervalMs: number }[], more: Record<string, unknown> = {}) =>
    new SlidingCounterLimiter(s.store, { name: `c${n++}`, windows, ...more })

  it('weighs the previous calendar window by its overlap, and retryAfter is exact to the ms', async () => {
    clock.set(T0 + 500)
    const l = make([{ limit: 10, intervalMs: 1000 }])
    for (let i = 0; i < 10; i++) expect((await l.check()).allowed).toBe(true)
    const full = await l.check()
    // next window: 10 x (1 - e) + 1 <= 10 from e = 0.1 s, at +1100
    expect([full.allowed, full.remaining, full.retryAfterMs]).toEqual([false, 0, 600])
    // at +1250 the previous window still weighs 10 x 0.75 = 7.5: 2 more fit, not 3
    clock.set(T0 + 1250)
    const two = await l.check(2)
    expect([two.allowed, two.remaining]).toEqual([true, 0])
    const refused = await l.check()
    // 10 x (1 - e) + 3 <= 10 from e = 0.3 s
    expect([refused.allowed, refused.retryAfterMs]).toEqual([false, 50])
    clock.set(T0 + 1299)
    expect((await l.check()).allowed).toBe(false)
    clock.set(T0 + 1300)
    expect((await l.check()).allowed).toBe(true)
  })

  it('decides several windows all or nothing, describing the most restrictive one plus windows[]', async () => {
    clock.set(T0)
    const l = make([
      { limit: 2, intervalMs: 1000 },
      { limit: 3, intervalMs: 10_000 },
    ])
    const first = await l.check()
    expect(first).toEqual({
      allowed: true,
      limit: 2,
      remaining: 1,
      retryAfterMs: 0,
      resetAfterMs: 2000,
      degraded: false,
      windows: [
        { limit: 2, intervalMs: 1000, remaining: 1, retryAfterMs: 0, resetAfterMs: 2000 },
        { limit: 3, intervalMs: 10_000, remaining: 2, retryAfterMs: 0, resetAfterMs: 20_000 },
      ],
    })
    expect((await l.check()).allowed).toBe(true)
    const refused = await l.check()
    expect([refused.allowed, refused.limit, refused.retryAfterMs]).toEqual([false, 2, 1500])
    expect(refused.windows.map((w) => w.remaining)).toEqual([0, 1]) // charged neither window
    clock.set(T0 + 1500)
    expect((await l.check()).allowed).toBe(true)
    clock.set(T0 + 5000)
    const ten = await l.check()
    expect([ten.allowed, ten.limit]).toEqual([false, 3]) // now the 10 s window refuses
    // 3 x (1 - e / 10 s) + 1 <= 3 from e = 3,334 ms (whole µs rounded up to ms) into the next window
    expect(ten.retryAfterMs).toBe(10_000 + 3334 - 5000)
  })

  it('peek and weight 0 charge nothing; reset forgets; a block refuses until its end and keeps the counts', async () => {
    clock.set(T0)
    const l = make([{ limit: 3, intervalMs: 1000 }])
    expect((await l.peek()).remaining).toBe(3)
    expect((await l.check(0)).remaining).toBe(3)
    expect((await l.check(2)).remaining).toBe(1)
    expect((await l.peek()).remaining).toBe(1)
    await l.reset()
    expect((await l.check(3)).allowed).toBe(true)
    await l.block(5000)
    clock.set(T0 + 2500)
    const blocked = await l.check()
    expect([blocked.allowed, blocked.remaining, blocked.retryAfterMs]).toEqual([false, 0, 2500])
    await l.block({ retryAfter: '1' }) // a shorter block keeps the longer one
    clock.set(T0 + 5000)
    expect((await l.check()).allowed).toBe(true)
  })

  it('withinLimit waits for room up to waitTimeoutMs, or raises / skips', async () => {
    clock.set(T0)
    const l = make([{ limit: 1, intervalMs: 1000 }], { waitTimeoutMs: 0 })
    expect(await l.withinLimit(() => 'ran')).toBe('ran')
    await expect(l.withinLimit(() => 'no')).rejects.toBeInstanceOf(OverLimitError)
    const skip = make([{ limit: 1, intervalMs: 1000 }], { waitTimeoutMs: 0, policy: 'skip' })
    await skip.check()
    expect(await skip.withinLimit(() => 'no')).toBeUndefined()
  })

  it('counts its decisions in statistics under its kind', async () => {
    clock.set(T0)
    const l = make([{ limit: 1, intervalMs: 1000 }])
    await l.check()
    await l.check()
    await (s.store as { _flushStats?: () => Promise<void> })._flushStats?.()
    const st = await l.stats()
    expect([st.admitted, st.refused]).toEqual([1, 1])
    const listed = (await s.store.limiters()).find((x: { name: string }) => x.name === l.name)
    expect(listed?.kind).toBe('sliding-counter')
  })

  it.skipIf(kind === 'memory')(
    'keeps two counters per window in one string of doubles with a TTL, and a wrong-type key fails only its call',
    async () => {
      clock.set(T0)
      const l = make([
        { limit: 1000, intervalMs: 1000 },
        { limit: 5000, intervalMs: 60_000 },
      ])
      for (let i = 0; i < 20; i++) await l.check(50)
      const key = `${s.prefix}:sliding-counter:{${l.name}}`
      expect(await s.raw!.strlen(key)).toBe(8 + 24 * 2) // the block's end, then start, prev, curr per window
      expect(await s.raw!.pttl(key)).toBeGreaterThan(0)
      const other = make([{ limit: 1, intervalMs: 1000 }])
      await s.raw!.set(`${s.prefix}:sliding-counter:{${other.name}}`, 'x', 'PX', 60_000)
      const [bad, good] = await Promise.allSettled([other.check(), l.peek()])
      expect(bad.status === 'rejected' && (bad.reason as { code: string }).code).toBe('ERR_SCRIPT')
      expect(good.status).toBe('fulfilled')
    },
  )
})

describe('SlidingCounterLimiter while Redis is down', () => {
  it.each(['allow', 'deny', 'local'] as const)("answers by whenDown '%s', degraded", async (whenDown) => {
    const store = await RedisStore.connect({
      url: `redis://127.0.0.1:${await freePort()}`,
      keyPrefix: freshPrefix(),
      whenDown,
      connectTimeoutMs: 300,
      commandTimeoutMs: 300,
    })
    try {
      const l = new SlidingCounterLimiter(store, { name: 'down', windows: [{ limit: 1, intervalMs: 60_000 }] })
      const a = await l.check()
      const b = await l.check()
      expect(a.degraded && b.degraded).toBe(true)
      if (whenDown === 'allow') expect([a.allowed, b.allowed]).toEqual([true, true])
      if (whenDown === 'deny') expect([a.allowed, b.allowed]).toEqual([false, false])
      if (whenDown === 'local') expect([a.allowed, b.allowed]).toEqual([true, false])
      if (whenDown !== 'local') await expect(l.reset()).rejects.toMatchObject({ code: 'ERR_STORE_UNAVAILABLE' })
    } finally {
      await store.close()
    }
  })
})

describe.each(FRAMEWORKS)("the HTTP door's algorithm 'sliding-counter' on %s", (framework) => {
  it('decides its windows together, in headers of every window, and limiter(req) may return one', async () => {
    const clock = new ManualClock(T0)
    const store = new MemoryStore({ clock })
    const limits = [
      { limit: 2, windowMs: 1000 },
      { limit: 3, windowMs: 10_000 },
    ]
    const door = await serve(framework, {
      store,
      limits,
      algorithm: 'sliding-counter',
      identifier: 'sc',
      standardHeaders: 'draft-10',
      legacyHeaders: false,
    })
    const custom = await serve(framework, {
      store,
      identifier: 'own',
      limiter: () => new SlidingCounterLimiter(store, { name: 'own', windows: [{ limit: 1, intervalMs: 60_000 }] }),
      standardHeaders: 'draft-7',
      legacyHeaders: false,
    })
    try {
      const replies = []
      for (let i = 0; i < 3; i++) replies.push(await get(`${door.url}/`))
      expect(replies.map((r) => r.status)).toEqual([200, 200, 429])
      // the refused request charged neither window: the 10 s window still has 1
      expect(replies[2].header('ratelimit')).toBe('"sc-2-per-1s";r=0;t=2, "sc-3-per-10s";r=1;t=20')
      expect(replies[2].header('retry-after')).toBe('2')
      clock.set(T0 + 1500)
      expect((await get(`${door.url}/`)).status).toBe(200)
      expect((await get(`${custom.url}/`)).header('ratelimit')).toBe('limit=1, remaining=0, reset=119')
      expect((await get(`${custom.url}/`)).status).toBe(429)
    } finally {
      await door.close()
      await custom.close()
    }
  })
})

describe('SlidingCounterLimiter options', () => {
  const store = new MemoryStore()
  it('refuses bad windows and weights with typed errors', () => {
    const bad = (o: unknown) => codeOf(() => new SlidingCounterLimiter(store, o as never))
    expect(bad({ name: 'x', windows: [] })).toBe('ERR_INVALID_CONFIG')
    expect(bad({ name: 'x', windows: [{ limit: 0, intervalMs: 1000 }] })).toBe('ERR_INVALID_CONFIG')
    expect(bad({ name: 'x', windows: [{ limit: 1, intervalMs: 1000, extra: 1 }] })).toBe('ERR_INVALID_CONFIG')
    // a name is any text (issue-38-names) but empty, a lone surrogate or over 256 bytes
    expect(bad({ name: 'x\uD800', windows: [{ limit: 1, intervalMs: 1000 }] })).toBe('ERR_INVALID_CONFIG')
    expect(bad({ name: 'x y', windows: [{ limit: 1, intervalMs: 1000 }] })).toBeUndefined()
    expect(bad({ name: 'x', windows: [{ limit: 1, intervalMs: 1000 }], interval: 'minute' })).toBe('ERR_INVALID_CONFIG')
    expect(codeOf(() => new SlidingCounterLimiter({} as never, { name: 'x', windows: [] }))).toBe('ERR_INVALID_CONFIG')
    const l = new SlidingCounterLimiter(store, {
      name: 'x',
      windows: [
        { limit: 5, intervalMs: 1000 },
        { limit: 3, intervalMs: 60_000 },
      ],
    })
    return Promise.all(
      [4, -1, 1.5, NaN].map((w) => expect(l.check(w)).rejects.toMatchObject({ code: 'ERR_INVALID_ARGUMENT' })),
    )
  })
})

interface Admission {
  at: number
  resetAfterMs: number
}

describe.each(REDIS_KINDS)('SlidingCounterLimiter across 4 processes on %s', (kind) => {
  it('never admits more than the limit in a calendar window; the worst sliding window is reported', async () => {
    const limit = 40
    const intervalMs = 500
    // the workers start 20 ms into a calendar window: a whole first window with nothing before it,
    // which the 32 callers fill whatever the machine's load (a start near a window's end left
    // only the next windows, each estimated with the previous one full: just under the limit)
    const startAt = Math.ceil((Date.now() + 1500) / intervalMs) * intervalMs + 20
    const cfg = {
      ...(kind === 'redis' ? { url: redisUrl() } : { cluster: clusterNodes() }),
      prefix: freshPrefix(),
      name: 'shared',
      limit,
      intervalMs,
      startAt,
      durationMs: 2500,
      inflight: 8,
    }
    const worker = join(__dirname, 'helpers', 'sliding-counter-worker.js')
    const results = await Promise.all(
      Array.from({ length: 4 }, () => {
        const child = fork(worker, [JSON.stringify(cfg)])
        return new Promise<{ admitted: Admission[]; refused: number }>((resolve, reject) => {
          child.once('message', (m) => resolve(m as { admitted: Admission[]; refused: number }))
          child.once('exit', (code) => code !== 0 && reject(new Error(`worker exited with ${code}`)))
        })
      }),
    )
    const admitted = results.flatMap((r) => r.admitted)
    // an admitted call's reset is the end of the calendar window after the one it was charged
    // to (whole µs, rounded up to ms): that names its window exactly, whatever the latency
    const perWindow = new Map<number, number>()
    for (const a of admitted) {
      const w = Math.round((a.at + a.resetAfterMs - 2 * intervalMs) / intervalMs)
      perWindow.set(w, (perWindow.get(w) ?? 0) + 1)
    }
    const most = Math.max(...perWindow.values())
    const times = admitted.map((a) => a.at).sort((x, y) => x - y)
    let worst = 0
    for (let i = 0, j = 0; i < times.length; i++) {
      while (times[i] - times[j] >= intervalMs) j++
      worst = Math.max(worst, i - j + 1)
    }
    console.info(
      `${kind}: ${admitted.length} admitted, ${results.reduce((x, r) => x + r.refused, 0)} refused; ` +
        `at most ${most} in a calendar window (limit ${limit}); worst sliding window ${worst}`,
    )
    expect(most).toBeLessThanOrEqual(limit)
    expect(most).toBe(limit) // the limit is used, not just enforced
    expect(worst).toBeLessThanOrEqual(2 * limit) // the estimate's bound over any sliding window
  })
})
