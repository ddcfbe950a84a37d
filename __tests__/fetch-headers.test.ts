// sluice/fetch reading an upstream's answer (lib/doors/fetch/headers.js): Retry-After, IETF RateLimit
// and RateLimit-Policy (draft-10 and draft-6/7/8), X-RateLimit-* (epoch seconds, epoch ms or
// delta resets), x-ratelimit-*-requests (Go durations), and hostile values: ignored or clamped
// and counted, never thrown.
import { describe, expect, it } from 'vitest'

const { learn } = require('../lib/doors/fetch/headers.js') as {
  learn: (
    get: (name: string) => string | string[] | null | undefined,
    nowMs: number,
    maxBlockMs: number,
  ) => {
    blockMs: number
    policy: { limit: number; windowMs: number } | null
    remaining: number | null
    resetMs: number | null
    quota: { limit: number; resetMs: number; slackMs: number } | null
    hostile: number
  }
}

const NOW = Date.UTC(2026, 10, 25, 8, 0, 0) // 1_795_939_200_000 ms
const HOUR = 3_600_000
const read = (headers: Record<string, string | string[]>, maxBlockMs = HOUR) => {
  const lower = Object.fromEntries(Object.entries(headers).map(([k, v]) => [k.toLowerCase(), v]))
  const l = learn((name) => lower[name], NOW, maxBlockMs)
  return {
    blockMs: l.blockMs,
    policy: l.policy,
    remaining: l.remaining,
    resetMs: l.resetMs,
    quota: l.quota,
    hostile: l.hostile,
  }
}
const none = { blockMs: 0, policy: null, remaining: null, resetMs: null, quota: null, hostile: 0 }

type Row = [string, Record<string, string | string[]>, Partial<ReturnType<typeof read>>]

const ROWS: Row[] = [
  ['nothing', {}, {}],
  // Retry-After
  ['Retry-After delta-seconds', { 'Retry-After': '7' }, { blockMs: 7000 }],
  ['Retry-After with a fraction (rounded up to the ms)', { 'Retry-After': '1.5' }, { blockMs: 1500 }],
  ['Retry-After HTTP-date', { 'Retry-After': new Date(NOW + 30_000).toUTCString() }, { blockMs: 30_000 }],
  ['Retry-After in the past', { 'Retry-After': new Date(NOW - 30_000).toUTCString() }, { blockMs: 0 }],
  ['Retry-After 0', { 'Retry-After': '0' }, { blockMs: 0 }],
  // IETF draft-10 / draft-8
  [
    'draft-10 policy and an exhausted quota',
    { RateLimit: '"api";r=0;t=12', 'RateLimit-Policy': '"api";q=100;w=60' },
    { blockMs: 12_000, policy: { limit: 100, windowMs: 60_000 }, remaining: 0, resetMs: 12_000 },
  ],
  [
    'draft-10 several windows: the shortest is paced to, the exhausted one blocks',
    { RateLimit: '"burst";r=5;t=1, "day";r=0;t=300', 'RateLimit-Policy': '"burst";q=10;w=1, "day";q=1000;w=86400' },
    { blockMs: 300_000, policy: { limit: 10, windowMs: 1000 }, remaining: 0, resetMs: 300_000 },
  ],
  [
    'draft-8 (spaces, partition key)',
    { RateLimit: '"100-in-1min"; r=42; t=30', 'RateLimit-Policy': '"100-in-1min"; q=100; w=60; pk=:MmVkYjQ2:' },
    { policy: { limit: 100, windowMs: 60_000 }, remaining: 42, resetMs: 30_000 },
  ],
  // draft-7 and draft-6
  [
    'draft-7',
    { RateLimit: 'limit=100, remaining=0, reset=30', 'RateLimit-Policy': '100;w=60' },
    { blockMs: 30_000, policy: { limit: 100, windowMs: 60_000 }, remaining: 0, resetMs: 30_000 },
  ],
  [
    'draft-6',
    { 'RateLimit-Limit': '50', 'RateLimit-Remaining': '3', 'RateLimit-Reset': '9', 'RateLimit-Policy': '50;w=10' },
    { policy: { limit: 50, windowMs: 10_000 }, remaining: 3, resetMs: 9000 },
  ],
  // X-RateLimit-*
  [
    'X-RateLimit reset as epoch seconds',
    { 'X-RateLimit-Limit': '60', 'X-RateLimit-Remaining': '0', 'X-RateLimit-Reset': String(NOW / 1000 + 45) },
    { blockMs: 45_000, remaining: 0, resetMs: 45_000, quota: { limit: 60, resetMs: 45_000, slackMs: 1000 } },
  ],
  [
    'X-RateLimit reset as delta seconds',
    { 'X-RateLimit-Limit': '60', 'X-RateLimit-Remaining': '10', 'X-RateLimit-Reset': '20' },
    { remaining: 10, resetMs: 20_000, quota: { limit: 60, resetMs: 20_000, slackMs: 0 } },
  ],
  [
    'X-RateLimit reset as epoch ms',
    { 'X-RateLimit-Limit': '60', 'X-RateLimit-Remaining': '0', 'X-RateLimit-Reset': String(NOW + 2500) },
    { blockMs: 2500, remaining: 0, resetMs: 2500, quota: { limit: 60, resetMs: 2500, slackMs: 0 } },
  ],
  [
    'X-RateLimit epoch reset in the past blocks nothing',
    { 'X-RateLimit-Limit': '60', 'X-RateLimit-Remaining': '0', 'X-RateLimit-Reset': String(NOW / 1000 - 5) },
    { blockMs: 0, remaining: 0, resetMs: 0, quota: { limit: 60, resetMs: 0, slackMs: 1000 } },
  ],
  // x-ratelimit-*-requests (OpenAI's family)
  [
    'x-ratelimit-*-requests with a Go duration',
    { 'x-ratelimit-limit-requests': '60', 'x-ratelimit-remaining-requests': '0', 'x-ratelimit-reset-requests': '6m0s' },
    { blockMs: 360_000, remaining: 0, resetMs: 360_000, policy: { limit: 60, windowMs: 360_000 } },
  ],
  [
    'x-ratelimit-*-requests: the refill rate from what was spent',
    {
      'x-ratelimit-limit-requests': '100',
      'x-ratelimit-remaining-requests': '99',
      'x-ratelimit-reset-requests': '1.5s',
    },
    { remaining: 99, resetMs: 1500, policy: { limit: 100, windowMs: 150_000 } },
  ],
  [
    'x-ratelimit-*-requests with ms',
    {
      'x-ratelimit-limit-requests': '10',
      'x-ratelimit-remaining-requests': '0',
      'x-ratelimit-reset-requests': '120ms',
    },
    { blockMs: 120, remaining: 0, resetMs: 120, policy: { limit: 10, windowMs: 120 } },
  ],
  // hostile values: ignored or clamped, counted
  ['negative Retry-After', { 'Retry-After': '-5' }, { hostile: 1 }],
  ['NaN Retry-After', { 'Retry-After': 'NaN' }, { hostile: 1 }],
  [
    '10^12 seconds of Retry-After is clamped to the cap',
    { 'Retry-After': '1000000000000' },
    { blockMs: HOUR, hostile: 1 },
  ],
  [
    'a date centuries ahead is clamped',
    { 'Retry-After': 'Fri, 31 Dec 9999 23:59:59 GMT' },
    { blockMs: HOUR, hostile: 1 },
  ],
  ['non-ASCII', { 'Retry-After': '５' }, { hostile: 1 }],
  ['a control character', { RateLimit: '"a";r=0;t=5\u0000' }, { hostile: 1 }],
  ['an overlong value', { 'RateLimit-Policy': `"a";q=1;w=1${' '.repeat(5000)}` }, { hostile: 1 }],
  [
    'thousands of list items: the first 16 are read',
    {
      'RateLimit-Policy': Array.from({ length: 2000 }, (_, i) => `"p${i}";q=${i + 1};w=1`)
        .join(',')
        .slice(0, 4000),
    },
    { policy: { limit: 1, windowMs: 1000 }, hostile: 1 },
  ],
  [
    'negative remaining',
    { 'X-RateLimit-Limit': '60', 'X-RateLimit-Remaining': '-1', 'X-RateLimit-Reset': '5' },
    { hostile: 1, quota: null },
  ],
  ['a limit of 0 is not believed', { 'RateLimit-Policy': '"a";q=0;w=60' }, { hostile: 1 }],
  ['a window of 0 is not believed', { 'RateLimit-Policy': '"a";q=10;w=0' }, { hostile: 1 }],
  ['a huge limit is not believed', { 'RateLimit-Policy': '"a";q=99999999999;w=1' }, { hostile: 1 }],
  [
    'an exhausted quota resetting in 10^12 s is clamped',
    { RateLimit: '"a";r=0;t=1000000000000' },
    { blockMs: HOUR, remaining: 0, resetMs: 1e15, hostile: 1 },
  ],
  [
    'a bad duration',
    {
      'x-ratelimit-limit-requests': '5',
      'x-ratelimit-remaining-requests': '0',
      'x-ratelimit-reset-requests': '6 minutes',
    },
    { hostile: 1, remaining: 0 },
  ],
  ['exponent notation', { RateLimit: '"a";r=1e3;t=1' }, { hostile: 1 }],
  [
    'a quoted comma does not split items',
    { RateLimit: '"a,b";r=0;t=3', 'RateLimit-Policy': '"a,b";q=5;w=10' },
    { blockMs: 3000, policy: { limit: 5, windowMs: 10_000 }, remaining: 0, resetMs: 3000 },
  ],
]

describe('sluice/fetch header parsing', () => {
  it.each(ROWS)('%s', (_name, headers, expected) => {
    expect(read(headers)).toEqual({ ...none, ...expected })
  })

  it('the cap is configurable', () => {
    expect(read({ 'Retry-After': '600' }, 60_000)).toEqual({ ...none, blockMs: 60_000, hostile: 1 })
  })

  it('never throws, whatever the getter answers', () => {
    const weird = [undefined, null, '', ' ', ',,,', ';;;', '"', '"unterminated;q=5', 'q=;w=', ['1', '2'], '\t9']
    for (const v of weird) {
      for (const name of [
        'retry-after',
        'ratelimit',
        'ratelimit-policy',
        'x-ratelimit-reset',
        'x-ratelimit-reset-requests',
      ]) {
        expect(() =>
          learn((n) => (n === name ? (v as string) : n.startsWith('x-ratelimit-') ? '1' : null), NOW, HOUR),
        ).not.toThrow()
      }
    }
  })
})

describe('the window of X-RateLimit-* (no window stated) is estimated from the longest reset seen', () => {
  // a token bucket of 100/s states its reset a second away: in whole epoch seconds that reads as
  // 1-2 s; the estimate takes the rounding off (else the key is paced at half its rate)
  it.each([
    ['epoch seconds', (nowMs: number) => String(Math.ceil((nowMs + 1000) / 1000)), 1000],
    ['delta seconds', () => '1', 1000],
    ['epoch seconds, a 60 s window', (nowMs: number) => String(Math.ceil((nowMs + 60_000) / 1000)), 59_700], // 60.7 s read, less the rounding,
  ])('%s', async (_, reset, windowMs) => {
    const { ManualClock, MemoryStore } = await import('../lib/entries/index.js')
    const { pacedFetch } = await import('../lib/entries/fetch.js')
    const clock = new ManualClock(1_800_000_000_300)
    const store = new MemoryStore({ clock })
    const f = pacedFetch({
      store,
      retry: false,
      fetch: async () =>
        new Response('', {
          headers: {
            'X-RateLimit-Limit': '100',
            'X-RateLimit-Remaining': '50',
            'X-RateLimit-Reset': reset(clock.now()),
          },
        }),
    })
    for (let i = 0; i < 3; i++) {
      // paced at what was learned (a 60 s window: 1.6 a second): the clock moves while it waits
      let done = false
      const call = f('http://upstream.invalid/').then(() => (done = true))
      for (let k = 0; k < 100 && !done; k++) {
        await new Promise((r) => setImmediate(r))
        if (!done) clock.advance(10)
      }
      await call
      clock.advance(300)
    }
    expect((await f.stats())[0].learned).toEqual({ limit: 100, windowMs })
    await store.close()
  })
})
