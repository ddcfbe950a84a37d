// sluice/fetch with a Budget (issue 27 item 5) on every store, against a token-priced upstream
// on loopback (an LLM-style API: a JSON body with `max_tokens`, an answer with `usage` and
// `x-ratelimit-remaining-tokens`): the estimate is reserved before the call is sent, settled
// from the answer (a refund or a debt), given back when nothing was answered (maxWaitMs, an
// abort, a network error), settled as reserved when `settle` fails; the interceptor refuses
// the options.
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Budget, ManualClock, MemoryStore, RedisStore, type Store } from '../lib/entries/index.js'
import { pacedFetch, interceptor } from '../lib/entries/fetch.js'
import { STORE_KINDS, clusterNodes, freshPrefix, redisUrl, type StoreKind } from './helpers/stores.js'
import { eventually, timerArmed } from './helpers/clock.js'
import { freePort } from './helpers/servers.js'

const T0 = 1_800_000_000_000
const DIMENSIONS = {
  requests: { limit: 100, intervalMs: 60_000, maxBurst: 100 },
  tokens: { limit: 100_000, intervalMs: 60_000, maxBurst: 100_000 },
}

interface Priced {
  url: string
  /** what each request carried, and what the budget held when it arrived (filled by the test) */
  bodies: { max_tokens: number; prompt: string }[]
  close(): Promise<void>
}

/**
 * A token-priced upstream: a request's JSON body has `prompt` and `max_tokens`; the answer is
 * `{ usage: { prompt_tokens, completion_tokens, total_tokens } }` (prompt tokens: the prompt's
 * length; completion: the `x-completion` header, else half of max_tokens) with
 * `x-ratelimit-remaining-tokens`; `x-status` forces a status (with Retry-After 2 on a 503).
 */
async function pricedUpstream(): Promise<Priced> {
  const bodies: Priced['bodies'] = []
  let remaining = 1_000_000
  const server = http.createServer((req, res) => {
    let raw = ''
    req.on('data', (c: Buffer) => (raw += c))
    req.on('end', () => {
      const body = raw === '' ? { prompt: '', max_tokens: 0 } : JSON.parse(raw)
      bodies.push(body)
      const status = Number(req.headers['x-status'] ?? 200)
      const prompt = body.prompt.length
      const completion = Number(req.headers['x-completion'] ?? Math.floor(body.max_tokens / 2))
      remaining -= prompt + completion
      res.statusCode = status
      res.setHeader('content-type', 'application/json')
      res.setHeader('x-ratelimit-remaining-tokens', String(remaining))
      if (status === 503) res.setHeader('Retry-After', '2')
      const usage = { prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion }
      res.end(JSON.stringify(status === 200 ? { usage } : { error: 'busy' }))
    })
  })
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1/chat`,
    bodies,
    close: () => new Promise<void>((r) => (server.closeAllConnections(), server.close(() => r()))),
  }
}

/** The code a promise rejects with. */
async function codeOf(p: Promise<unknown>): Promise<string> {
  try {
    await p
  } catch (err) {
    return (err as { code: string }).code
  }
  throw new Error('resolved')
}

async function makeStore(kind: StoreKind, clock: ManualClock): Promise<Store> {
  const keyPrefix = freshPrefix()
  if (kind === 'memory') return new MemoryStore({ keyPrefix, clock })
  const o = kind === 'redis' ? { url: redisUrl() } : { cluster: clusterNodes() }
  return RedisStore.connect({ ...o, keyPrefix, clock })
}

/** The estimate of docs/fetch.md: the prompt's length plus max_tokens, read from a copy of the body. */
async function estimate(req: Request) {
  const body = await req.json()
  return { requests: 1, tokens: body.prompt.length + body.max_tokens }
}

/** The settle of docs/fetch.md: the JSON body's usage (read from a copy: the caller's body stays unread). */
async function settle(res: Response) {
  if (!res.ok) return { tokens: 0 } // a refusal costs nothing here
  const { usage } = await res.json()
  return { tokens: usage.total_tokens }
}

const call = (prompt: string, maxTokens: number, headers: Record<string, string> = {}) => ({
  method: 'POST',
  headers: { 'content-type': 'application/json', ...headers },
  body: JSON.stringify({ prompt, max_tokens: maxTokens }),
})

describe.each(STORE_KINDS)('sluice/fetch with a Budget on %s', (kind) => {
  const clock = new ManualClock(T0)
  let store: Store
  let up: Priced
  let n = 0
  const budget = () => new Budget(store, { name: `llm${n++}`, dimensions: DIMENSIONS })
  const use = async (b: Budget) => {
    const s = await b.stats()
    return { tokens: s.dimensions.tokens.used, reserved: s.dimensions.tokens.reserved, open: s.reservations }
  }
  beforeAll(async () => {
    store = await makeStore(kind, clock)
    up = await pricedUpstream()
  })
  afterAll(async () => {
    await store.close()
    await up.close()
  })

  it('reserves the estimate before the call is sent, settles from the usage in the body (refund and debt)', async () => {
    clock.set(T0)
    const b = budget()
    const atSend: Awaited<ReturnType<typeof use>>[] = []
    const f = pacedFetch({
      store,
      qps: 1e6,
      budget: b,
      estimate,
      settle,
      key: () => `k${n}`,
      fetch: async (input: any, init: any) => (atSend.push(await use(b)), globalThis.fetch(input, init)),
    })
    // estimate 10 + 1000; the upstream uses 10 + 500: 510 given back
    const res = await f(up.url, call('0123456789', 1000))
    expect(atSend).toEqual([{ tokens: 1010, reserved: 1010, open: 1 }])
    // the caller's body is whole (the settle read a copy)
    expect((await res.json()).usage.total_tokens).toBe(510)
    await eventually(async () => (await use(b)).open === 0)
    expect(await use(b)).toEqual({ tokens: 510, reserved: 0, open: 0 })
    // more than estimated: the excess is a debt
    const over = await f(up.url, call('abc', 100, { 'x-completion': '900' }))
    expect(over.status).toBe(200)
    await eventually(async () => (await use(b)).open === 0)
    expect(await use(b)).toEqual({ tokens: 510 + 903, reserved: 0, open: 0 })
    expect((await f.stats())[0]).toMatchObject({ reserved: 2, cancelled: 0, budgetErrors: 0 })
  })

  it('settles from a header (x-ratelimit-remaining-tokens): settle gets the response and the request', async () => {
    clock.set(T0 + 600_000)
    const b = budget()
    const seen: { remaining: string | null; method: string }[] = []
    const f = pacedFetch({
      store,
      qps: 1e6,
      budget: b,
      estimate: () => ({ requests: 1, tokens: 2000 }),
      settle: (res: Response, req: Request) => {
        seen.push({ remaining: res.headers.get('x-ratelimit-remaining-tokens'), method: req.method })
        return { tokens: 700 }
      },
      key: () => `k${n}`,
    })
    await (await f(new Request(up.url, call('x', 10)))).text()
    await eventually(async () => (await use(b)).open === 0)
    expect(await use(b)).toEqual({ tokens: 700, reserved: 0, open: 0 })
    expect(seen).toHaveLength(1)
    expect(seen[0].method).toBe('POST')
    expect(Number(seen[0].remaining)).toBeGreaterThan(0)
    // the Request input's body went out whole
    expect(up.bodies.at(-1)).toEqual({ prompt: 'x', max_tokens: 10 })
  })

  it('gives the reservation back when nothing was answered: maxWaitMs, an abort, a network error', async () => {
    clock.set(T0 + 1_200_000)
    const b = budget()
    const key = `k${n}`
    const o = { store, qps: 1e6, budget: b, estimate, settle, key: () => key, retry: false as const }
    // a 503 with Retry-After 2 blocks the key (a refusal costs nothing: settle says 0)
    const f = pacedFetch(o)
    expect((await f(up.url, call('a', 10, { 'x-status': '503' }))).status).toBe(503)
    await eventually(async () => (await use(b)).open === 0)
    expect(await use(b)).toEqual({ tokens: 0, reserved: 0, open: 0 })
    // maxWaitMs 0 during the block: OverLimitError, nothing sent, the reservation given back
    const sent = up.bodies.length
    const hurried = pacedFetch({ ...o, maxWaitMs: 0 })
    expect(await codeOf(hurried(up.url, call('b', 10)))).toBe('ERR_OVER_LIMIT')
    expect(await use(b)).toEqual({ tokens: 0, reserved: 0, open: 0 })
    // an abort while it waits for the block: the same
    const ac = new AbortController()
    const waiting = f(up.url, { ...call('c', 10), signal: ac.signal })
    await timerArmed(clock)
    expect((await use(b)).reserved).toBe(11) // reserved while it waits
    ac.abort()
    expect(await codeOf(waiting)).toBe('ERR_ABORTED')
    expect(await use(b)).toEqual({ tokens: 0, reserved: 0, open: 0 })
    expect(up.bodies.length).toBe(sent)
    // a network error (nothing listens): given back, the error reaches the caller
    const port = await freePort()
    const down = pacedFetch({ ...o, key: () => 'nowhere' })
    await expect(down(`http://127.0.0.1:${port}/v1/chat`, call('d', 10))).rejects.toThrow(TypeError)
    expect(await use(b)).toEqual({ tokens: 0, reserved: 0, open: 0 })
    expect((await f.stats(key))[0]).toMatchObject({ reserved: 2, cancelled: 1 })
    expect((await hurried.stats(key))[0]).toMatchObject({ reserved: 1, cancelled: 1, refused: 1 })
    expect((await down.stats('nowhere'))[0]).toMatchObject({ reserved: 1, cancelled: 1 })
  })

  it('a settle that throws or answers amounts the budget refuses: settled as reserved, counted', async () => {
    clock.set(T0 + 1_800_000)
    const b = budget()
    let settles = 0
    const f = pacedFetch({
      store,
      qps: 1e6,
      budget: b,
      estimate: () => ({ requests: 1, tokens: 300 }),
      settle: () => {
        // the first throws, the second answers an unknown dimension
        if (++settles === 1) throw new Error('no usage')
        return { unknownDimension: 5 }
      },
      key: () => `k${n}`,
    })
    await (await f(up.url, call('a', 1))).text()
    await (await f(up.url, call('a', 1))).text()
    await eventually(async () => (await use(b)).open === 0)
    expect((await use(b)).tokens).toBe(600)
    expect((await f.stats())[0]).toMatchObject({ reserved: 2, budgetErrors: 2 })
  })

  it('refuses bad budget options at setup, and any of them on the interceptor', () => {
    const b = budget()
    const bad = [
      { store, budget: {}, estimate },
      { store, budget: b },
      { store, budget: b, estimate: 5 },
      { store, budget: b, estimate, settle: 'x' },
      { store, estimate },
      { store, settle },
    ]
    for (const o of bad)
      expect(() => pacedFetch(o as never), JSON.stringify(Object.keys(o))).toThrow(/budget|estimate|settle/)
    for (const o of bad) {
      try {
        pacedFetch(o as never)
      } catch (err) {
        expect((err as { code: string }).code).toBe('ERR_INVALID_CONFIG')
      }
    }
    for (const o of [{ budget: b }, { estimate }, { settle }]) {
      let code = ''
      try {
        interceptor({ store, ...o } as never)
      } catch (err) {
        code = (err as { code: string }).code
      }
      expect(code).toBe('ERR_INVALID_CONFIG')
    }
  })
})
