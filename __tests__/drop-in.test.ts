// Drop-in finished (issue 40): the peers' own tests that sluice's doors did not pass, each stated
// here as the peer states it (express-rate-limit 8.6.2's test/library, @fastify/rate-limit
// 11.2.0's test/), run on sluice's door with a real server.
import { afterEach, describe, expect, it, vi } from 'vitest'
import { ManualClock, MemoryStore, RedisStore, SluiceError } from '../lib/entries/index.js'
import { ConsoleLogger, ipKeyGenerator, rateLimit } from '../lib/entries/express.js'
import Fastify from 'fastify'
import sluiceFastify from '../lib/entries/fastify.js'
import http from 'node:http'
import express from 'express'
import { get, listen, serve, type Served } from './helpers/http.js'
import { freePort, startRedis, stop } from './helpers/servers.js'

describe('issue-40-drop-in express-rate-limit 8.6.2', () => {
  const open: { close(): Promise<unknown> }[] = []
  afterEach(async () => {
    vi.restoreAllMocks()
    for (const o of open.splice(0).reverse()) await o.close()
  })

  it('logger-test: ConsoleLogger forwards warn and error to the console, the message first', () => {
    const warn = vi.spyOn(console, 'warn').mockImplementation(() => {})
    const error = vi.spyOn(console, 'error').mockImplementation(() => {})
    const e = new Error('Mock Error')
    ConsoleLogger.error(e)
    expect(error).toHaveBeenLastCalledWith(e)
    ConsoleLogger.error(e, 'An error occurred')
    expect(error).toHaveBeenLastCalledWith('An error occurred', e)
    ConsoleLogger.warn(e)
    expect(warn).toHaveBeenLastCalledWith(e)
    ConsoleLogger.warn(e, 'An error occurred')
    expect(warn).toHaveBeenLastCalledWith('An error occurred', e)
  })

  it("options-test: an invalid logger implementation is a TypeError (and sluice's ERR_INVALID_CONFIG)", () => {
    const store = new MemoryStore()
    let thrown: unknown
    try {
      rateLimit({ store, logger: { error: 'invalid logger' } } as any)
    } catch (err) {
      thrown = err
    }
    expect(thrown).toBeInstanceOf(TypeError)
    expect(thrown).toBeInstanceOf(SluiceError)
    expect((thrown as SluiceError).code).toBe('ERR_INVALID_CONFIG')
  })

  it('headers-test: no `retry-after` when every header is disabled; one when any is shown', async () => {
    const store = new MemoryStore()
    open.push(store)
    const none: Served = await serve('express5', {
      store,
      windowMs: 60_000,
      limit: 1,
      legacyHeaders: false,
      standardHeaders: false,
    })
    open.push(none)
    expect((await get(`${none.url}/`)).status).toBe(200)
    const refused = await get(`${none.url}/`)
    expect([refused.status, refused.header('retry-after')]).toEqual([429, undefined])
    const legacy: Served = await serve('express5', { store, windowMs: 60_000, limit: 1, identifier: 'legacy' })
    open.push(legacy)
    await get(`${legacy.url}/`)
    expect((await get(`${legacy.url}/`)).header('retry-after')).toBe('60')
  })

  it("headers-test 'should send multiple headers correctly for the standard draft 8': five doors, one list each header, in order", async () => {
    const store = new MemoryStore()
    open.push(store)
    const app = express()
    const options = { store, standardHeaders: 'draft-8' as const, keyGenerator: () => 'foo' }
    const windows = [
      [5_000, 1],
      [60_000, 5],
      [3_600_000, 6],
      [86_400_000, 7],
      [172_800_000, 8],
    ]
    for (const [windowMs, limit] of windows) app.use(rateLimit({ ...options, windowMs, limit }))
    app.get('/', (_req, res) => res.send('Hi there!'))
    const server = await listen(http.createServer(app))
    open.push(server)
    const r = await get(`${server.url}/`)
    // the peer's names are "1-in-5sec", "5-in-1min"...: sluice's policy names are a kept difference
    const pk = 'pk=:MmMyNmI0NmI2OGZm:'
    expect([r.status, r.body]).toEqual([200, 'Hi there!'])
    // as Node (and supertest) read them: a field sent several times, its values joined
    const joined = (name: string) =>
      r.headers
        .filter(([n]) => n === name)
        .map(([, v]) => v)
        .join(', ')
    expect(joined('ratelimit-policy')).toBe(
      [
        `"1-per-5s"; q=1; w=5; ${pk}`,
        `"5-per-60s"; q=5; w=60; ${pk}`,
        `"6-per-3600s"; q=6; w=3600; ${pk}`,
        `"7-per-86400s"; q=7; w=86400; ${pk}`,
        `"8-per-172800s"; q=8; w=172800; ${pk}`,
      ].join(', '),
    )
    expect(joined('ratelimit')).toBe(
      [
        '"1-per-5s"; r=0; t=5',
        '"5-per-60s"; r=4; t=60',
        '"6-per-3600s"; r=5; t=3600',
        '"7-per-86400s"; r=6; t=86400',
        '"8-per-172800s"; r=7; t=172800',
      ].join(', '),
    )
  })

  it('ip-key-generator-test: ipv6Subnet applies to an IPv6 address that merely ends in dotted-quad notation', () => {
    expect(ipKeyGenerator('2001:db8:1234:5678::1.2.3.4')).toBe('2001:db8:1234:5600::/56')
    expect(ipKeyGenerator('64:ff9b::1.2.3.4')).toBe('64:ff9b::/56')
    expect(ipKeyGenerator('2001:db8:1234:5678::1.2.3.4')).toBe(ipKeyGenerator('2001:db8:1234:5678::102:304'))
    expect(ipKeyGenerator('2001:db8::1.2.3.4')).not.toBe(ipKeyGenerator('1.2.3.4'))
    // and the mapped and compatible forms stay IPv4 (their neighbours in the peer's file)
    expect(ipKeyGenerator('::ffff:102:304')).toBe('1.2.3.4')
    expect(ipKeyGenerator('::1.2.3.4', 16)).toBe('1.2.3.4')
    expect(ipKeyGenerator('::1')).toBe('::/56')
  })
})

describe('issue-40-drop-in @fastify/rate-limit 11.2.0', () => {
  it.each(['function', 'async function'])(
    'global-rate-limit.test.js: a %s allowList gets the request and the key as keyGenerator gave it (a number)',
    async (form) => {
      const store = new MemoryStore()
      const fastify = Fastify()
      const seen: unknown[] = []
      const allowList =
        form === 'function'
          ? (req: any, key: unknown) => (seen.push(key), req.headers['x-my-header'] !== undefined)
          : async (req: any, key: unknown) => (seen.push(key), req.headers['x-my-header'] !== undefined)
      await fastify.register(sluiceFastify as any, {
        store,
        max: 2,
        timeWindow: '2s',
        keyGenerator: () => 42,
        allowList,
      })
      fastify.get('/', async () => 'hello!')
      const codes = []
      for (let i = 0; i < 3; i++)
        codes.push((await fastify.inject({ url: '/', headers: { 'x-my-header': 'FOO BAR' } })).statusCode)
      for (let i = 0; i < 3; i++) codes.push((await fastify.inject('/')).statusCode)
      expect(codes).toEqual([200, 200, 200, 200, 200, 429])
      expect(new Set(seen)).toEqual(new Set([42]))
      await fastify.close()
      await store.close()
    },
  )

  it("group-rate-limit.test.js and route-rate-limit.test.js: a groupId that is not a string, a route's rateLimit that is not an object", async () => {
    const store = new MemoryStore()
    const fastify = Fastify()
    await fastify.register(sluiceFastify as any, { store, max: 2, timeWindow: 1000 })
    expect(() =>
      fastify.get(
        '/group',
        { config: { rateLimit: { max: 2, timeWindow: 1000, groupId: 123 } } } as any,
        async () => 'x',
      ),
    ).toThrow('groupId must be a string')
    expect(() => fastify.get('/bad', { config: { rateLimit: () => {} } } as any, async () => 'x')).toThrow(
      'Unknown value for route rate-limit configuration',
    )
    await fastify.close()
    await store.close()
  })

  it("create-rate-limit.test.js 'With { increment: false } and exponentialBackoff': the peek reads the backoff as the peer's Redis store keeps it (a kept difference from its local store)", async () => {
    // the peer's local store only tells the longer wait (it lets the key go one timeWindow after
    // the last refusal, and its peek says so: ttl 900, then a clean state); its Redis store
    // enforces it (PEXPIRE), and its read is the key's PTTL. sluice enforces it on every store.
    const clock = new ManualClock(0)
    const store = new MemoryStore({ clock })
    const fastify = Fastify()
    await fastify.register(sluiceFastify as any, {
      store,
      global: false,
      max: 1,
      timeWindow: 1000,
      exponentialBackoff: true,
    })
    const check = fastify.createRateLimit()
    fastify.get('/peek', async (req: any) => check(req, { increment: false }))
    fastify.get('/consume', async (req: any) => check(req))
    for (let i = 0; i < 3; i++) {
      await fastify.inject('/consume') // counts 1, 2 (backoff 1 s), 3 (backoff 2 s, from t = 200)
      clock.advance(100)
    }
    const base = { isAllowed: false, key: '127.0.0.1', max: 1, timeWindow: 1000, isBanned: false }
    expect((await fastify.inject('/peek')).json()).toEqual({
      ...base,
      remaining: 0,
      ttl: 1900,
      ttlInSeconds: 2,
      isExceeded: true,
    })
    clock.advance(1000) // past the base window, within the backoff: still exceeded (the peer's local store: clean)
    expect((await fastify.inject('/peek')).json()).toMatchObject({ remaining: 0, ttl: 900, isExceeded: true })
    clock.advance(900) // the backoff over: a clean state
    expect((await fastify.inject('/peek')).json()).toEqual({
      ...base,
      remaining: 1,
      ttl: 0,
      ttlInSeconds: 0,
      isExceeded: false,
    })
    await fastify.close()
    await store.close()
  })

  it("exponential-backoff.test.js 'MAx safe Exponential Backoff': a window of 285,421 years is clamped (10 years), never an error", async () => {
    const store = new MemoryStore()
    const fastify = Fastify()
    await fastify.register(sluiceFastify as any, { store, max: 2, timeWindow: 500, exponentialBackoff: true })
    fastify.get('/b', { config: { rateLimit: { max: 2, timeWindow: '285421 years' } } } as any, async () => 'ok')
    const codes = []
    let last: any
    for (let i = 0; i < 4; i++) {
      last = await fastify.inject('/b')
      codes.push(last.statusCode)
    }
    expect(codes).toEqual([200, 200, 429, 429])
    expect(last.headers['x-ratelimit-limit']).toBe('2')
    expect(JSON.parse(last.payload)).toEqual({
      statusCode: 429,
      error: 'Too Many Requests',
      message: expect.stringMatching(/^Rate limit exceeded, retry in \d+ years$/),
    })
    await fastify.close()
    await store.close()
  })
})

/**
 * @fastify/rate-limit 11.2.0's test/redis-rate-limit.test.js, the cases the issue names, on
 * sluice's door with a sluice RedisStore on a real redis-server of the test's own (killed where
 * the peer's test quits its client); the peer's sleeps on the store's ManualClock.
 */
describe('issue-40-drop-in @fastify/rate-limit 11.2.0 redis-rate-limit.test.js', () => {
  const T0 = 1_800_000_000_000
  /** A fastify app of `register` options on a RedisStore of its own Redis; kill() stops that Redis. */
  async function app(register: object, route?: object) {
    const port = await freePort()
    const server = await startRedis(port)
    const clock = new ManualClock(T0)
    const store = await RedisStore.connect({ url: `redis://127.0.0.1:${port}`, commandTimeoutMs: 300, clock })
    const fastify = Fastify()
    await fastify.register(sluiceFastify as any, { store, ...register })
    fastify.get('/', route === undefined ? {} : { config: { rateLimit: route } }, async () => 'hello!')
    const checkRateLimit = fastify.createRateLimit()
    fastify.get('/peek', async (req: any) => checkRateLimit(req, { increment: false }))
    return {
      fastify,
      clock,
      inject: (url = '/') => fastify.inject(url),
      kill: () => stop(server),
      close: async () => {
        await fastify.close()
        await store.close()
        if (server.exitCode === null) await stop(server)
      },
    }
  }
  const headers = (r: any) => [r.statusCode, r.headers['x-ratelimit-limit'], r.headers['x-ratelimit-remaining']]

  it.each([
    ['global', { max: 2, timeWindow: 1000, skipOnError: true }, undefined],
    ['route', { global: false }, { max: 2, timeWindow: 1000, skipOnError: true }],
  ] as const)(
    "'Skip on redis error' (%s): the requests go on, with the headers of nothing counted",
    async (_where, register, route) => {
      const a = await app(register, route)
      try {
        expect(headers(await a.inject())).toEqual([200, '2', '1'])
        await a.kill()
        expect(headers(await a.inject())).toEqual([200, '2', '2'])
        expect(headers(await a.inject())).toEqual([200, '2', '2'])
      } finally {
        await a.close()
      }
    },
  )

  it.each([
    ['global', { max: 2, timeWindow: 1000, skipOnError: false }, undefined],
    ['route', { global: false }, { max: 2, timeWindow: 1000, skipOnError: false }],
  ] as const)("'Throw on redis error' (%s): a 500 from the error handler", async (_where, register, route) => {
    const a = await app(register, route)
    try {
      const first = await a.inject()
      expect([...headers(first), first.headers['x-ratelimit-reset']]).toEqual([200, '2', '1', '1'])
      await a.kill()
      const failed = await a.inject()
      expect(failed.statusCode).toBe(500)
      // the peer's body carries its client's message ("Connection is closed."); sluice's store its own
      expect(failed.json()).toMatchObject({ statusCode: 500, error: 'Internal Server Error' })
    } finally {
      await a.close()
    }
  })

  it("'With { increment: false } it throws on redis error': a 500", async () => {
    const a = await app({ global: false, max: 2, timeWindow: 1000 })
    try {
      await a.kill()
      const r = await a.inject('/peek')
      expect([r.statusCode, r.json().error]).toEqual([500, 'Internal Server Error'])
    } finally {
      await a.close()
    }
  })

  it.each([
    ['global', { max: 1, timeWindow: 5000, continueExceeding: true }, undefined],
    ['route', { global: false }, { timeWindow: 5000, max: 1, continueExceeding: true }],
  ] as const)(
    "'When continue exceeding is on (Redis)' (%s): the refusal restarts the window",
    async (_where, register, route) => {
      const a = await app(register, route)
      try {
        expect((await a.inject()).statusCode).toBe(200)
        const second = await a.inject()
        expect([...headers(second), second.headers['x-ratelimit-reset']]).toEqual([429, '1', '0', '5'])
      } finally {
        await a.close()
      }
    },
  )

  it("'When continue exceeding is off under route (Redis)': the route's false wins, the window runs on", async () => {
    const a = await app(
      { global: false, continueExceeding: true },
      { timeWindow: 5000, max: 1, continueExceeding: false },
    )
    try {
      const first = await a.inject()
      const second = await a.inject()
      a.clock.advance(2000)
      const third = await a.inject()
      expect(first.statusCode).toBe(200)
      expect([...headers(second), second.headers['x-ratelimit-reset']]).toEqual([429, '1', '0', '5'])
      expect([...headers(third), third.headers['x-ratelimit-reset']]).toEqual([429, '1', '0', '3'])
    } finally {
      await a.close()
    }
  })

  it("'Redis with continueExceeding should not always return the timeWindow as ttl'", async () => {
    const a = await app({ max: 2, timeWindow: 3000, continueExceeding: true })
    try {
      let r = await a.inject()
      expect([...headers(r), r.headers['x-ratelimit-reset']]).toEqual([200, '2', '1', '3'])
      a.clock.advance(1000)
      r = await a.inject()
      expect([...headers(r), r.headers['x-ratelimit-reset']]).toEqual([200, '2', '0', '2'])
      r = await a.inject()
      expect([...headers(r), r.headers['x-ratelimit-reset'], r.headers['retry-after']]).toEqual([
        429,
        '2',
        '0',
        '3',
        '3',
      ])
      expect(r.headers['content-type']).toBe('application/json; charset=utf-8')
      expect(r.json()).toEqual({
        statusCode: 429,
        error: 'Too Many Requests',
        message: 'Rate limit exceeded, retry in 3 seconds',
      })
      a.clock.advance(1000)
      r = await a.inject()
      expect([...headers(r), r.headers['x-ratelimit-reset']]).toEqual([429, '2', '0', '3'])
    } finally {
      await a.close()
    }
  })
})
