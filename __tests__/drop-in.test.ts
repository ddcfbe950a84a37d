// Drop-in finished (issue 40): the peers' own tests that sluice's doors did not pass, each stated
// here as the peer states it (express-rate-limit 8.6.2's test/library, @fastify/rate-limit
// 11.2.0's test/), run on sluice's door with a real server.
import { afterEach, describe, expect, it, vi } from 'vitest'
import { MemoryStore, SluiceError } from '../lib/entries/index.js'
import { ConsoleLogger, ipKeyGenerator, rateLimit } from '../lib/entries/express.js'
import Fastify from 'fastify'
import sluiceFastify from '../lib/entries/fastify.js'
import { get, serve, type Served } from './helpers/http.js'

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
