// sluice/fetch on every store with a ManualClock and real loopback HTTP: pacing per key, a
// Retry-After from one instance blocking every instance (several stores on one prefix stand for
// several processes), blocks that do not stack, retries, maxWaitMs, aborts, learned limits,
// hostile headers, Request/URL inputs, the undici interceptor and @octokit/core.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { ManualClock, MemoryStore, SluiceError, type Store } from '../lib/entries/index.js'
import { pacedFetch, interceptor, type PacedFetch } from '../lib/entries/fetch.js'
import { STORE_KINDS, type StoreKind, makeStores } from './helpers/stores.js'
import { eventually, flush, timerArmed } from './helpers/clock.js'
import { codeOf } from './helpers/errors.js'
// eslint-disable-next-line @typescript-eslint/no-require-imports
const { startUpstream } = require('./helpers/upstream.js')
import { Agent, fetch as undiciFetch, request as undiciRequest } from 'undici'
import { Octokit } from '@octokit/core'

const T0 = 1_800_000_000_000

type Answer = { status: number; headers?: Record<string, string | undefined> }
interface Upstream {
  url: string
  counts: { requests: number; served: number; refused: number }
  close(): Promise<void>
}

/** An upstream that answers from `script` (the n-th request gets script(n), 0-based) and keeps what it received. */
async function scripted(script: (n: number, req: any) => Answer) {
  const seen: { method: string; url: string; body: string; header: string | undefined }[] = []
  const up: Upstream = await startUpstream({
    fixed: (req: any, counts: { requests: number }) => {
      let body = ''
      req.on('data', (c: Buffer) => (body += c))
      req.on('end', () => seen.push({ method: req.method, url: req.url, body, header: req.headers['x-test'] }))
      return script(counts.requests - 1, req)
    },
  })
  return Object.assign(up, { seen })
}

const ok: Answer = { status: 200 }

const rejection = async (p: Promise<unknown>) => {
  try {
    await p
  } catch (err) {
    return err as SluiceError
  }
  throw new Error('resolved')
}

describe.each(STORE_KINDS)('sluice/fetch on %s', (kind) => {
  const clock = new ManualClock(T0)
  let stores: Store[] = []
  const ups: Upstream[] = []
  beforeAll(async () => {
    stores = await makeStores(kind, 4, clock)
  })
  afterAll(async () => {
    await Promise.all([...new Set(stores)].map((s) => s.close()))
    await Promise.all(ups.map((u) => u.close()))
  })
  const upstream = async (script: (n: number, req: any) => Answer) => {
    const u = await scripted(script)
    ups.push(u)
    return u
  }

  it('paces the calls of a key at qps, each origin on its own key', async () => {
    const a = await upstream(() => ok)
    const b = await upstream(() => ok)
    const f = pacedFetch({ store: stores[0], qps: 10 })
    const calls = [f(a.url + '/1'), f(a.url + '/2'), f(a.url + '/3')]
    await eventually(() => a.counts.requests === 1)
    expect((await f(b.url)).status).toBe(200) // another origin does not queue behind a
    await timerArmed(clock, 2)
    expect(a.counts.requests).toBe(1)
    clock.advance(100)
    await eventually(() => a.counts.requests === 2)
    clock.advance(100)
    await eventually(() => a.counts.requests === 3)
    expect((await Promise.all(calls)).map((r) => r.status)).toEqual([200, 200, 200])
    const [st] = await f.stats(new URL(a.url).origin)
    expect(st).toMatchObject({ calls: 3, waited: 2, waitTimeMs: 300, throttled: 0, blocks: 0, qps: 10 })
  })

  it('a Retry-After seen by one instance holds back every instance, once', async () => {
    const u = await upstream((n) => (n === 0 ? { status: 429, headers: { 'Retry-After': '10' } } : ok))
    const fs = stores.map((store) => pacedFetch({ store, retry: false }))
    expect((await fs[0](u.url)).status).toBe(429)
    const later = fs.map((f) => f(u.url))
    await timerArmed(clock, 4)
    await flush()
    expect(u.counts.requests).toBe(1) // nobody went while blocked
    clock.advance(9_999)
    await flush()
    expect(u.counts.requests).toBe(1)
    clock.advance(2) // unpaced, the slots after the block are 1 ns apart: whole ms rounded up
    expect((await Promise.all(later)).map((r) => r.status)).toEqual([200, 200, 200, 200])
    const blocks = (await Promise.all(fs.map((f) => f.stats()))).flat().map((s) => s.blocks)
    expect(blocks).toEqual([1, 0, 0, 0])
  })

  it("an instance's calls that took their slots before another's 429 wait for its block", async () => {
    const u = await upstream(() => ok)
    // instance A's call is answered when the test says: a 429 that arrives while B's calls sleep
    let answer: (r: Response) => void = () => {}
    const held = (): Promise<Response> => new Promise((resolve) => (answer = resolve))
    const a = pacedFetch({ store: stores[0], qps: 10, retry: false, fetch: held })
    const b = pacedFetch({ store: stores[1], qps: 10, retry: false })
    const first = a(u.url + '/a')
    await eventually(() => a.stats().then((s) => s[0]?.calls === 1))
    const queued = [b(u.url + '/b1'), b(u.url + '/b2')] // slots at 100 and 200 ms
    await timerArmed(clock, 2)
    answer(new Response('slow down', { status: 429, headers: { 'Retry-After': '2' } }))
    expect((await first).status).toBe(429)
    // the clock moves only while B's callers sleep (a store's answer takes real time)
    clock.advance(100) // B's first slot: inside A's block; it asks, hears of the block, waits
    await flush()
    await timerArmed(clock, 2)
    clock.advance(100) // the second
    await flush()
    await timerArmed(clock, 2)
    clock.advance(1_799)
    await flush()
    expect(u.counts.requests).toBe(0) // nothing went during the block
    // after it: both go, a slot apart (the clock moves on until they have)
    let settled = 0
    for (const q of queued) void q.then(() => settled++)
    for (let i = 0; i < 200 && settled < 2; i++) {
      clock.advance(i === 0 ? 1 : 10)
      await flush()
      await new Promise((r) => setTimeout(r, 2))
    }
    expect((await Promise.all(queued)).map((r) => r.status)).toEqual([200, 200])
    expect(u.counts.requests).toBe(2)
  })

  it('instances that saw the same 429 burst extend one block, they do not add up', async () => {
    const u = await upstream((n) => (n < 4 ? { status: 429, headers: { 'Retry-After': '5' } } : ok))
    const fs = stores.map((store) => pacedFetch({ store, retry: false }))
    expect((await Promise.all(fs.map((f) => f(u.url)))).map((r) => r.status)).toEqual([429, 429, 429, 429])
    const next = fs[1](u.url)
    await timerArmed(clock, 1)
    clock.advance(5_000) // four blocks of 5 s would be 20 s
    expect((await next).status).toBe(200)
    expect(u.counts.requests).toBe(5)
  })

  it('retries a 429 of an idempotent method after the block, and never a POST', async () => {
    const u = await upstream((n) => (n % 2 === 0 ? { status: 429, headers: { 'Retry-After': '2' } } : ok))
    const f = pacedFetch({ store: stores[0] })
    const get = f(u.url + '/get', { headers: { 'x-test': 'kept' } })
    await eventually(() => u.counts.requests === 1)
    await timerArmed(clock, 1)
    clock.advance(2_000)
    expect((await get).status).toBe(200)
    expect(u.seen.map((s) => s.header)).toEqual(['kept', 'kept'])
    const post = await f(u.url + '/post', { method: 'POST', body: 'x' })
    expect(post.status).toBe(429)
    expect(u.counts.requests).toBe(3)
    const [st] = await f.stats()
    expect(st).toMatchObject({ calls: 2, retries: 1, throttled: 2, blocks: 2 })
    clock.advance(2_000)
  })

  it('sends a Request with its body again on a retry, and takes URL input', async () => {
    const u = await upstream((n) => (n === 0 ? { status: 503, headers: { 'Retry-After': '1' } } : ok))
    const f = pacedFetch({ store: stores[0] })
    const req = new Request(u.url + '/put', { method: 'PUT', body: 'payload', headers: { 'x-test': 'r' } })
    const res = f(req)
    await eventually(() => u.counts.requests === 1)
    await timerArmed(clock, 1)
    clock.advance(1_000)
    expect((await res).status).toBe(200)
    await eventually(() => u.seen.length === 2)
    expect(u.seen.map((s) => [s.method, s.body, s.header])).toEqual([
      ['PUT', 'payload', 'r'],
      ['PUT', 'payload', 'r'],
    ])
    expect((await f(new URL(u.url + '/u'))).status).toBe(200)
  })

  it('over maxWaitMs: OverLimitError and nothing sent', async () => {
    const u = await upstream(() => ok)
    const f = pacedFetch({ store: stores[0], qps: 1, maxWaitMs: 500 })
    expect((await f(u.url)).status).toBe(200)
    const err = await rejection(f(u.url))
    expect([err.code, (err as any).retryAfterMs > 500]).toEqual(['ERR_OVER_LIMIT', true])
    await flush()
    expect(u.counts.requests).toBe(1)
    expect((await f.stats())[0]).toMatchObject({ calls: 2, refused: 1 })
    clock.advance(1_000)
  })

  it('aborting during a wait (pacing or a block) rejects with ERR_ABORTED and sends nothing', async () => {
    const u = await upstream((n) => (n === 1 ? { status: 429, headers: { 'Retry-After': '30' } } : ok))
    const f = pacedFetch({ store: stores[0], qps: 1, retry: false })
    expect((await f(u.url)).status).toBe(200)
    const ac = new AbortController()
    const waiting = f(u.url, { signal: ac.signal })
    await timerArmed(clock, 1)
    ac.abort()
    expect((await rejection(waiting)).code).toBe('ERR_ABORTED')
    clock.advance(2_000) // past the aborted call's slot: it was reserved, and is spent
    expect((await f(u.url)).status).toBe(429) // blocks the key 30 s
    const ac2 = new AbortController()
    const blocked = f(new Request(u.url, { signal: ac2.signal }))
    await timerArmed(clock, 1)
    ac2.abort()
    expect((await rejection(blocked)).code).toBe('ERR_ABORTED')
    clock.advance(30_000)
    await flush()
    expect(u.counts.requests).toBe(2)
    const pre = new AbortController()
    pre.abort()
    expect((await rejection(f(u.url, { signal: pre.signal }))).code).toBe('ERR_ABORTED')
  })

  it('learns a stated policy (never above qps) and blocks an exhausted quota until its reset', async () => {
    const u = await upstream((n) => ({
      status: 200,
      headers:
        n === 0
          ? { 'RateLimit-Policy': '"api";q=5;w=1', RateLimit: '"api";r=4;t=1' }
          : { 'RateLimit-Policy': '"api";q=5;w=1', RateLimit: '"api";r=0;t=3' },
    }))
    const f = pacedFetch({ store: stores[0], qps: 100 })
    await f(u.url)
    expect((await f.stats())[0]).toMatchObject({ qps: 4.9, learned: { limit: 5, windowMs: 1000 } })
    const second = f(u.url)
    await timerArmed(clock, 1)
    clock.advance(205) // 1 / 4.9 s
    await second
    const third = f(u.url)
    await timerArmed(clock, 1)
    clock.advance(2_999)
    await flush()
    expect(u.counts.requests).toBe(2)
    clock.advance(1)
    await third
    expect(u.counts.requests).toBe(3)
    const capped = pacedFetch({ store: stores[1], qps: 2, key: () => 'capped' })
    await capped(u.url)
    expect((await capped.stats())[0].qps).toBe(2)
    clock.advance(3_000)
  })

  it('with no rate given, the first call of a key goes alone: the others wait for its answer', async () => {
    const sent: string[] = []
    let answer: (r: Response) => void = () => {}
    const headers = { 'RateLimit-Policy': '"api";q=10;w=1', RateLimit: '"api";r=9;t=1' }
    let first = true
    const fetch = (input: any): Promise<Response> => {
      sent.push(String(input))
      if (first) {
        first = false
        return new Promise((resolve) => (answer = resolve))
      }
      return Promise.resolve(new Response('ok', { status: 200, headers }))
    }
    const f = pacedFetch({ store: stores[0], retry: false, fetch, key: () => 'first-alone' })
    const calls = [f('http://api.test/1'), f('http://api.test/2'), f('http://api.test/3')]
    await eventually(() => sent.length === 1)
    await flush()
    expect(sent).toEqual(['http://api.test/1']) // no first wave before an answer could teach a limit
    answer(new Response('ok', { status: 200, headers }))
    // then paced at what the answer stated (9.8 a second)
    for (let i = 0; i < 100 && sent.length < 3; i++) {
      await flush()
      clock.advance(10)
      await new Promise((r) => setTimeout(r, 2))
    }
    expect((await Promise.all(calls)).map((r) => r.status)).toEqual([200, 200, 200])
    expect(sent).toHaveLength(3)
    expect((await f.stats())[0].learned).toEqual({ limit: 10, windowMs: 1000 })
    // a key with a rate given never waits so
    const paced = pacedFetch({ store: stores[0], retry: false, qps: 1e6, fetch, key: () => 'given' })
    sent.length = 0
    await Promise.all([paced('http://api.test/a'), paced('http://api.test/b')])
    expect(sent).toHaveLength(2)
  })

  it('counts hostile headers, never throws them, and caps a block at maxBlockMs', async () => {
    const u = await upstream((n) =>
      n === 0 ? { status: 429, headers: { 'Retry-After': '1000000000000', RateLimit: '"x";r=-1;t=NaN' } } : ok,
    )
    const f = pacedFetch({ store: stores[0], retry: false, maxBlockMs: 60_000, maxWaitMs: 120_000 })
    expect((await f(u.url)).status).toBe(429)
    const next = f(u.url)
    await timerArmed(clock, 1)
    clock.advance(60_000)
    expect((await next).status).toBe(200)
    expect((await f.stats())[0]).toMatchObject({ hostile: 3, blocks: 1 })
  })

  it('the undici interceptor paces fetch and request of a dispatcher, and an abort in its wait sends nothing', async () => {
    const u = await upstream((n) => (n === 0 ? { status: 429, headers: { 'Retry-After': '2' } } : ok))
    const i = interceptor({ store: stores[0], qps: 10 })
    const agent = new Agent().compose(i)
    try {
      const first = undiciFetch(u.url, { dispatcher: agent })
      await eventually(() => u.counts.requests === 1)
      await timerArmed(clock, 1)
      clock.advance(2_000) // the 429 was retried after its block
      expect((await first).status).toBe(200)
      const r = undiciRequest(u.url, { dispatcher: agent })
      await timerArmed(clock, 1)
      clock.advance(100)
      expect((await r).statusCode).toBe(200)
      const ac = new AbortController()
      const aborted = undiciRequest(u.url, { dispatcher: agent, signal: ac.signal })
      await timerArmed(clock, 1)
      ac.abort()
      expect((await rejection(aborted)).code).toBe('ERR_ABORTED')
      clock.advance(1_000)
      await flush()
      expect(u.counts.requests).toBe(3)
      expect((await i.stats())[0]).toMatchObject({ calls: 3, retries: 1, throttled: 1, blocks: 1 })
    } finally {
      await agent.close()
    }
  })

  it('@octokit/core through request: { fetch } is paced and backs off on Retry-After', async () => {
    const u = await upstream((n) =>
      n === 0
        ? { status: 429, headers: { 'Retry-After': '3', 'content-type': 'application/json' } }
        : { status: 200, headers: { 'content-type': 'application/json' } },
    )
    const f: PacedFetch = pacedFetch({ store: stores[2], qps: 50 })
    const octokit = new Octokit({ baseUrl: u.url, request: { fetch: f } })
    const res = octokit.request('GET /repos/{owner}/{repo}', { owner: 'o', repo: 'r' })
    await eventually(() => u.counts.requests === 1)
    await timerArmed(clock, 1)
    clock.advance(3_000)
    expect((await res).status).toBe(200)
    expect(u.counts.requests).toBe(2)
  })
})

describe('sluice/fetch options', () => {
  const store = new MemoryStore()
  afterAll(() => store.close())

  it('bad options are ERR_INVALID_CONFIG at setup', () => {
    const bad: unknown[] = [
      undefined,
      {},
      { store, qps: 0 },
      { store, qps: -1 },
      { store, qps: NaN },
      { store, maxBurst: 3 },
      { store, key: 'origin' },
      { store, limits: {} },
      { store, maxWaitMs: -1 },
      { store, maxWaitMs: 1.5 },
      { store, maxBlockMs: 0 },
      { store, retry: true },
      { store, retry: { statuses: [42] } },
      { store, retry: { methods: ['GET POST'] } },
      { store, retry: { maxRetries: -1 } },
      { store, retry: { tries: 3 } },
      { store, learn: 'yes' },
      { store, adaptive: { maxQps: 0 } },
      { store, adaptive: { maxQps: 10, minQps: 20 } },
      { store, adaptive: { maxQps: 10, decrease: 1 } },
      { store, fetch: 'fetch' },
      { store, qpss: 1 },
    ]
    for (const o of bad)
      expect([JSON.stringify(o), codeOf(() => pacedFetch(o as any))]).toEqual([JSON.stringify(o), 'ERR_INVALID_CONFIG'])
    expect(codeOf(() => interceptor({ store, fetch: globalThis.fetch } as any))).toBe('ERR_INVALID_CONFIG')
  })

  it('a bad key or limits answer fails that call with ERR_INVALID_ARGUMENT, before anything is sent', async () => {
    let sent = 0
    const fetch = async () => {
      sent++
      return new Response('ok')
    }
    for (const key of [() => '', () => 'x'.repeat(501), () => '\ud800', () => 42]) {
      const f = pacedFetch({ store, fetch, key: key as any })
      expect((await rejection(f('http://example.test/'))).code).toBe('ERR_INVALID_ARGUMENT')
    }
    const f = pacedFetch({ store, fetch, limits: () => ({ qps: -1 }) })
    expect((await rejection(f('http://example.test/'))).code).toBe('ERR_INVALID_ARGUMENT')
    expect(sent).toBe(0)
  })

  it('limits(key) sets a rate per key; null leaves the key unpaced', async () => {
    const fetch = async () => new Response('ok')
    const f = pacedFetch({
      store,
      fetch,
      limits: (key) => (key === 'http://slow.test' ? { qps: 2, maxBurst: 1 } : null),
    })
    await f('http://slow.test/a')
    await f('http://fast.test/a')
    const stats = await f.stats()
    expect(stats.map((s) => [s.key, s.qps])).toEqual([
      ['http://slow.test', 2],
      ['http://fast.test', null],
    ])
  })
})
