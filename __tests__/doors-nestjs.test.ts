// sluice/nestjs (issue 40, DESIGN §10) on real NestJS apps (the Express and the Fastify
// platform) with a real HTTP client, on the memory store and Redis: SluiceModule, @RateLimit,
// @SkipRateLimit, SluiceGuard (counted defaults, headers, keys, several windows and several
// keys, refusals, a throwing callback, bad options at setup, the store's owner), and
// SluiceThrottlerStorage behind @nestjs/throttler's own guard: its increment() contract as the
// peer's storage tests state it, and 4 processes x 250 concurrent increments at a limit of 5.
import 'reflect-metadata'
import { fork } from 'node:child_process'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { Controller, Get, HttpException, Module, Post, Req, UseGuards, type INestApplication } from '@nestjs/common'
import { APP_GUARD, NestFactory } from '@nestjs/core'
import { FastifyAdapter } from '@nestjs/platform-fastify'
import { SkipThrottle, Throttle, ThrottlerGuard, ThrottlerModule } from '@nestjs/throttler'
import { ManualClock, MemoryStore, RedisStore, type Store } from '../lib/entries/index.js'
import {
  RateLimit,
  SkipRateLimit,
  SluiceGuard,
  SluiceModule,
  SluiceRateLimitException,
  SluiceThrottlerStorage,
} from '../lib/entries/nestjs.js'
import { REDIS_KINDS, clusterNodes, freshPrefix, makeStore, redisUrl } from './helpers/stores.js'
import { get, limitHeaders } from './helpers/http.js'
import { freePort, startRedis, stop } from './helpers/servers.js'

const T0 = 1_800_000_000_000
const PLATFORMS = ['express', 'fastify'] as const
type Platform = (typeof PLATFORMS)[number]

/** A Nest app of `module` on `platform`, listening on loopback: its URL and close(). */
async function start(module: any, platform: Platform): Promise<{ url: string; app: INestApplication }> {
  const app =
    platform === 'express'
      ? await NestFactory.create(module, { logger: false })
      : await NestFactory.create(module, new FastifyAdapter() as any, { logger: false })
  await app.listen(0, '127.0.0.1')
  const address = app.getHttpServer().address()
  return { url: `http://127.0.0.1:${address.port}`, app }
}

const statuses = async (url: string, n: number, headers: Record<string, string> = {}) => {
  const out: number[] = []
  for (let i = 0; i < n; i++) out.push((await get(url, headers)).status)
  return out
}

@Controller()
@RateLimit({ limit: 3, windowMs: 60_000 })
class LimitedController {
  /** the controller's limit (3 a minute) */
  @Get('/')
  root(@Req() req: any) {
    return { rateLimit: req.rateLimit }
  }

  /** its own: 10 a second, fixed windows */
  @Get('/fast')
  @RateLimit({ limit: 10, windowMs: 1000, algorithm: 'fixed' })
  fast() {
    return 'fast'
  }

  @Get('/free')
  @SkipRateLimit()
  free() {
    return 'free'
  }

  /** two windows of one key: 2 a second and 3 a minute, all or nothing */
  @Get('/windows')
  @RateLimit([
    { limit: 2, windowMs: 1000 },
    { limit: 3, windowMs: 60_000 },
  ])
  windows() {
    return 'windows'
  }

  /** two keys: 3 a minute per user, 2 a second for everyone; a refusal of one gives the other's back */
  @Get('/keys')
  @RateLimit([
    { limit: 3, windowMs: 60_000, keyGenerator: (req: any) => String(req.headers['x-user']) },
    { limit: 2, windowMs: 1000, keyGenerator: () => 'everyone', identifier: 'everyone' },
  ])
  keys() {
    return 'keys'
  }

  /** a keyGenerator that throws for one request: that request fails, the next ones go on */
  @Get('/throws')
  @RateLimit({
    limit: 5,
    windowMs: 60_000,
    keyGenerator: (req: any) => {
      if (req.headers['x-bad']) throw new Error('no key')
      return 'k'
    },
  })
  throws() {
    return 'ok'
  }

  /** a refusal's body from handler(), and an HttpException of the app's */
  @Get('/handled')
  @RateLimit({ limit: 1, windowMs: 60_000, handler: (req: any) => ({ error: 'slow down', path: req.url }) })
  handled() {
    return 'ok'
  }

  @Get('/teapot')
  @RateLimit({ limit: 1, windowMs: 60_000, handler: () => new HttpException('brewing', 418) })
  teapot() {
    return 'ok'
  }
}

@Controller('plain')
class PlainController {
  /** no @RateLimit: the module's defaults, when it has any */
  @Get()
  plain() {
    return 'plain'
  }
}

function appModule(store: Store | (() => Store | Promise<Store>), defaults?: object) {
  @Module({
    imports: [SluiceModule.forRoot({ store, defaults })],
    controllers: [LimitedController, PlainController],
    providers: [{ provide: APP_GUARD, useClass: SluiceGuard }],
  })
  class AppModule {}
  return AppModule
}

describe.each(['memory', 'redis'] as const)('issue-40-nestjs on %s', (kind) => {
  const open: { close(): Promise<unknown> }[] = []
  afterEach(async () => {
    for (const o of open.splice(0).reverse()) await o.close()
  })
  const served = async (platform: Platform, defaults?: object) => {
    const clock = new ManualClock(T0)
    const store = await makeStore(kind, { clock })
    open.push(store)
    const { url, app } = await start(appModule(store, defaults), platform)
    open.push(app)
    return { url, clock, store }
  }

  it.each(PLATFORMS)('%s: 10 a second is 10 a second (5 seconds of 30 requests); 3 a minute is 3', async (platform) => {
    const { url, clock } = await served(platform)
    for (let s = 0; s < 5; s++) {
      const codes = await statuses(`${url}/fast`, 30)
      expect(codes.filter((c) => c === 200)).toHaveLength(10)
      clock.advance(1000)
    }
    expect(await statuses(`${url}/`, 5)).toEqual([200, 200, 200, 429, 429])
    // a route without @RateLimit and no module defaults: not limited; @SkipRateLimit: not limited
    expect(await statuses(`${url}/plain`, 8)).toEqual(Array(8).fill(200))
    expect(await statuses(`${url}/free`, 8)).toEqual(Array(8).fill(200))
  })

  it.each(PLATFORMS)("%s: headers, the request's info, a refusal's status, Retry-After and body", async (platform) => {
    const { url } = await served(platform)
    const first = await get(`${url}/`)
    expect(first.status).toBe(200)
    expect(limitHeaders(first)).toEqual([
      ['x-ratelimit-limit', '3'],
      ['x-ratelimit-remaining', '2'],
      ['x-ratelimit-reset', String(Math.ceil((T0 + 60_000) / 1000))],
    ])
    expect(first.json().rateLimit).toMatchObject({
      limit: 3,
      used: 1,
      remaining: 2,
      key: expect.stringMatching(/127\.0\.0\.1$/),
    })
    await get(`${url}/`)
    await get(`${url}/`)
    const refused = await get(`${url}/`)
    expect(refused.status).toBe(429)
    expect(refused.header('retry-after')).toBe('60')
    expect(refused.json()).toEqual({ statusCode: 429, message: 'Too many requests, please try again later.' })
    // handler's body; an HttpException it returns is thrown as it is
    expect((await get(`${url}/handled`)).status).toBe(200)
    const handled = await get(`${url}/handled`)
    expect([handled.status, handled.json()]).toEqual([429, { error: 'slow down', path: '/handled' }])
    expect((await get(`${url}/teapot`)).status).toBe(200)
    const teapot = await get(`${url}/teapot`)
    expect([teapot.status, teapot.json().message]).toEqual([418, 'brewing'])
  })

  it.each(PLATFORMS)('%s: the module defaults limit every route without its own', async (platform) => {
    const { url } = await served(platform, { limit: 2, windowMs: 60_000, standardHeaders: 'draft-7' })
    expect(await statuses(`${url}/plain`, 4)).toEqual([200, 200, 429, 429])
    // a route's own limit replaces the defaults' numbers and keeps their other options
    const r = await get(`${url}/`)
    expect(r.header('ratelimit-policy')).toBe('3;w=60')
    expect(await statuses(`${url}/free`, 4)).toEqual([200, 200, 200, 200])
  })

  it.each(PLATFORMS)('%s: several windows of one key are all or nothing', async (platform) => {
    const { url, clock } = await served(platform)
    // 2 a second binds first, then 3 a minute: a refusal of one window charges neither
    expect(await statuses(`${url}/windows`, 4)).toEqual([200, 200, 429, 429])
    clock.advance(1000)
    expect(await statuses(`${url}/windows`, 3)).toEqual([200, 429, 429])
    clock.advance(1000)
    expect(await statuses(`${url}/windows`, 1)).toEqual([429])
  })

  it.each(PLATFORMS)('%s: several keys: what one admitted is given back when another refuses', async (platform) => {
    const { url, clock } = await served(platform)
    const a = { 'x-user': 'a' }
    // user a: 2 admitted (everyone's 2 a second used up), the third refused by everyone's limit:
    // a's count is given back, so after a second a has one request left of its 3
    expect(await statuses(`${url}/keys`, 3, a)).toEqual([200, 200, 429])
    clock.advance(1000)
    expect(await statuses(`${url}/keys`, 2, a)).toEqual([200, 429])
    // b has its own 3 a minute
    clock.advance(1000)
    expect(await statuses(`${url}/keys`, 2, { 'x-user': 'b' })).toEqual([200, 200])
  })

  it.each(PLATFORMS)('%s: a throwing keyGenerator fails its request only', async (platform) => {
    const { url } = await served(platform)
    expect((await get(`${url}/throws`)).status).toBe(200)
    expect((await get(`${url}/throws`, { 'x-bad': '1' })).status).toBe(500)
    expect(await statuses(`${url}/throws`, 5)).toEqual([200, 200, 200, 200, 429])
  })
})

describe('issue-40-nestjs-whendown: Redis killed', () => {
  it.each(PLATFORMS)(
    "%s: whenDown 'deny' refuses with 503, 'allow' and passOnStoreError let requests through, an error is a 500; the throttler storage blocks under 'deny'",
    async (platform) => {
      const port = await freePort()
      const server = await startRedis(port)
      const url = `redis://127.0.0.1:${port}`
      const deny = await RedisStore.connect({ url, commandTimeoutMs: 300, whenDown: 'deny' })
      const allow = await RedisStore.connect({ url, commandTimeoutMs: 300, whenDown: 'allow' })
      const error = await RedisStore.connect({ url, commandTimeoutMs: 300 })
      const apps: INestApplication[] = []
      try {
        const urls: string[] = []
        for (const [store, defaults] of [
          [deny, { limit: 5, windowMs: 60_000 }],
          [allow, { limit: 5, windowMs: 60_000 }],
          [error, { limit: 5, windowMs: 60_000 }],
          [error, { limit: 5, windowMs: 60_000, passOnStoreError: true }],
        ] as const) {
          const { url: appUrl, app } = await start(appModule(store, defaults), platform)
          apps.push(app)
          urls.push(appUrl)
        }
        for (const u of urls) expect((await get(`${u}/plain`)).status).toBe(200)
        await stop(server)
        expect(await statuses(`${urls[0]}/plain`, 2)).toEqual([503, 503])
        expect(await statuses(`${urls[1]}/plain`, 2)).toEqual([200, 200])
        expect(await statuses(`${urls[2]}/plain`, 2)).toEqual([500, 500])
        expect(await statuses(`${urls[3]}/plain`, 2)).toEqual([200, 200])
        const blocked = await new SluiceThrottlerStorage(deny).increment('k', 60_000, 5, 60_000, 'default')
        expect(blocked.isBlocked).toBe(true)
      } finally {
        for (const app of apps) await app.close()
        for (const s of [deny, allow, error]) await s.close()
      }
    },
  )
})

describe('issue-40-nestjs setup', () => {
  it('bad options are ERR_INVALID_CONFIG: in the decorator, in forRoot, and at app.init for a route', async () => {
    const invalid = expect.objectContaining({ code: 'ERR_INVALID_CONFIG' })
    expect(() => RateLimit(5 as any)).toThrow(invalid)
    expect(() => RateLimit([])).toThrow(invalid)
    expect(() => RateLimit({ store: new MemoryStore() } as any)).toThrow(invalid)
    expect(() => SluiceModule.forRoot({} as any)).toThrow(invalid)
    expect(() => SluiceModule.forRoot({ store: new MemoryStore(), defaults: { limit: -1 } })).toThrow(invalid)
    expect(() => SluiceModule.forRoot({ store: new MemoryStore(), nope: 1 } as any)).toThrow(invalid)
    expect(() => SluiceModule.forRootAsync({} as any)).toThrow(invalid)

    @Controller()
    class BadController {
      @Get()
      @RateLimit({ limit: 2, windowMs: -5 })
      bad() {
        return 'never'
      }
    }
    @Module({ imports: [SluiceModule.forRoot({ store: new MemoryStore() })], controllers: [BadController] })
    class BadModule {}
    await expect(
      NestFactory.create(BadModule, { logger: false, abortOnError: false }).then((app) => app.init()),
    ).rejects.toMatchObject({
      code: 'ERR_INVALID_CONFIG',
    })
  })

  it('a store the module made is closed with the app; a store given is left to its owner', async () => {
    let made: MemoryStore | undefined
    const given = new MemoryStore()
    const closed = (s: Store) => (s as any)._closed === true
    for (const store of [given, () => (made = new MemoryStore())]) {
      const { app } = await start(appModule(store), 'express')
      await app.close()
    }
    expect(closed(given)).toBe(false)
    expect(made && closed(made)).toBe(true)
    await given.close()
  })

  it('forRootAsync: options from a factory with injected dependencies; @UseGuards on one controller', async () => {
    const CONFIG = 'CONFIG'
    @Module({ providers: [{ provide: CONFIG, useValue: { limit: 2 } }], exports: [CONFIG] })
    class ConfigModule {}

    @Controller()
    @UseGuards(SluiceGuard)
    class GuardedController {
      @Get()
      @RateLimit({ windowMs: 60_000 })
      root() {
        return 'ok'
      }
    }
    @Controller('open')
    class OpenController {
      @Get()
      @RateLimit({ limit: 1, windowMs: 60_000 })
      open() {
        return 'not guarded'
      }
    }
    @Module({
      imports: [
        SluiceModule.forRootAsync({
          imports: [ConfigModule],
          inject: [CONFIG],
          useFactory: async (config: { limit: number }) => ({ store: () => new MemoryStore(), defaults: config }),
        }),
      ],
      controllers: [GuardedController, OpenController],
    })
    class AsyncModule {}
    const { url, app } = await start(AsyncModule, 'fastify')
    try {
      expect(await statuses(`${url}/`, 3)).toEqual([200, 200, 429])
      // no global guard: a controller without @UseGuards(SluiceGuard) is not limited
      expect(await statuses(`${url}/open`, 3)).toEqual([200, 200, 200])
    } finally {
      await app.close()
    }
  })

  it("a handler a subclass inherits is a route of its own there: its controller's limits, its own counters", async () => {
    @Controller('base')
    @RateLimit({ limit: 1, windowMs: 60_000 })
    class BaseController {
      @Get()
      list() {
        return 'ok'
      }
    }
    @Controller('derived')
    @RateLimit({ limit: 3, windowMs: 60_000 })
    class DerivedController extends BaseController {}
    @Module({
      imports: [SluiceModule.forRoot({ store: () => new MemoryStore() })],
      controllers: [BaseController, DerivedController],
      providers: [{ provide: APP_GUARD, useClass: SluiceGuard }],
    })
    class InheritModule {}
    const { url, app } = await start(InheritModule, 'express')
    try {
      expect(await statuses(`${url}/base`, 2)).toEqual([200, 429])
      expect(await statuses(`${url}/derived`, 4)).toEqual([200, 200, 200, 429])
    } finally {
      await app.close()
    }
  })

  it('a refusal is an HttpException the app can catch (SluiceRateLimitException)', () => {
    const e = new SluiceRateLimitException('slow', 429)
    expect(e).toBeInstanceOf(HttpException)
    expect([e.getStatus(), e.getResponse()]).toEqual([429, 'slow'])
  })
})

describe.each(['memory', ...REDIS_KINDS] as const)('issue-40-nestjs-throttler-storage on %s', (kind) => {
  const open: { close(): Promise<unknown> }[] = []
  afterEach(async () => {
    for (const o of open.splice(0).reverse()) await o.close()
  })
  const storage = async () => {
    const clock = new ManualClock(T0)
    const store = await makeStore(kind, { clock })
    open.push(store)
    return { clock, store, s: new SluiceThrottlerStorage(store) }
  }

  it("the peer's storage tests: a hit counted, keys independent over blocking and unblocking", async () => {
    const { s, clock } = await storage()
    // "should increment the request count"
    expect(await s.increment('test', 1000, 1, 0, 'test')).toEqual({
      totalHits: 1,
      timeToExpire: 1,
      isBlocked: false,
      timeToBlockExpire: 0,
    })
    // "keys should be independent of each other over blocking and unblocking" (its 50 ms sleeps on a clock)
    for (let i = 0; i < 10; i++) {
      expect((await s.increment('key1', 100, 3, 100, 'test')).isBlocked).toBe(false)
      await s.increment('key2', 100, 3, 100, 'test')
      await s.increment('key2', 100, 3, 100, 'test')
      clock.advance(50)
    }
  })

  it('counts, blocks for blockDuration past the window, refuses without counting, then starts over', async () => {
    const { s, clock } = await storage()
    const hit = () => s.increment('client', 10_000, 2, 30_000, 'default')
    expect(await hit()).toEqual({ totalHits: 1, timeToExpire: 10, isBlocked: false, timeToBlockExpire: 0 })
    clock.advance(1000)
    expect(await hit()).toEqual({ totalHits: 2, timeToExpire: 9, isBlocked: false, timeToBlockExpire: 0 })
    expect(await hit()).toEqual({ totalHits: 3, timeToExpire: 9, isBlocked: true, timeToBlockExpire: 30 })
    clock.advance(15_000) // the window ended, the block did not
    expect(await hit()).toMatchObject({ isBlocked: true, timeToBlockExpire: 15 })
    clock.advance(15_000)
    expect(await hit()).toEqual({ totalHits: 1, timeToExpire: 10, isBlocked: false, timeToBlockExpire: 0 })
    // named throttlers count apart; a blockDuration of 0 starts over at once (the peer's storage)
    const short = () => s.increment('client', 10_000, 1, 0, 'short')
    expect((await short()).isBlocked).toBe(false)
    expect(await short()).toMatchObject({ totalHits: 1, isBlocked: false })
    // hostile keys and names are data
    for (const key of ['a_b', '}{', 'k'.repeat(5000), '']) {
      expect((await s.increment(key, 1000, 1, 1000, 'x_y')).totalHits).toBe(1)
      expect((await s.increment(key, 1000, 1, 1000, 'x_y')).isBlocked).toBe(true)
      expect((await s.increment(key, 1000, 1, 1000, 'x')).isBlocked).toBe(false)
    }
    // a limit of 0 blocks every hit; bad numbers reject
    expect((await s.increment('z', 1000, 0, 1000, 'default')).isBlocked).toBe(true)
    const bad = expect.objectContaining({ code: 'ERR_INVALID_ARGUMENT' })
    await expect(s.increment('z', 0, 1, 0, 'default')).rejects.toEqual(bad)
    await expect(s.increment('z', 1000, 1.5, 0, 'default')).rejects.toEqual(bad)
    await expect(s.increment('z', 1000, 1, -1, 'default')).rejects.toEqual(bad)
  })

  it.each(PLATFORMS)(
    "%s: @nestjs/throttler's own guard on it: named throttlers, @Throttle, @SkipThrottle, headers",
    async (platform) => {
      const { store } = await storage()
      @Controller()
      class ThrottledController {
        @Get()
        root() {
          return 'ok'
        }
        @Get('skip')
        @SkipThrottle({ default: true, burst: true })
        skip() {
          return 'skip'
        }
        @Get('custom')
        @Throttle({ default: { limit: 1, ttl: 60_000 } })
        custom() {
          return 'custom'
        }
      }
      @Module({
        imports: [
          ThrottlerModule.forRoot({
            throttlers: [
              { name: 'default', limit: 3, ttl: 60_000 },
              { name: 'burst', limit: 2, ttl: 1000, blockDuration: 5000 },
            ],
            storage: new SluiceThrottlerStorage(store),
          }),
        ],
        controllers: [ThrottledController],
        providers: [{ provide: APP_GUARD, useClass: ThrottlerGuard }],
      })
      class ThrottledModule {}
      const { url, app } = await start(ThrottledModule, platform)
      open.push(app)
      const first = await get(`${url}/`)
      expect(limitHeaders(first)).toEqual([
        ['x-ratelimit-limit', '3'],
        ['x-ratelimit-limit-burst', '2'],
        ['x-ratelimit-remaining', '2'],
        ['x-ratelimit-remaining-burst', '1'],
        ['x-ratelimit-reset', '60'],
        ['x-ratelimit-reset-burst', '1'],
      ])
      expect((await get(`${url}/`)).status).toBe(200)
      const refused = await get(`${url}/`)
      expect(refused.status).toBe(429)
      expect(refused.header('retry-after-burst')).toBe('5')
      expect(await statuses(`${url}/skip`, 5)).toEqual(Array(5).fill(200))
      expect((await statuses(`${url}/custom`, 2))[1]).toBe(429)
    },
  )
})

/**
 * @nestjs/throttler 6's own e2e tests (test/controller.e2e-spec.ts, test/multi/), with
 * SluiceThrottlerStorage as the storage and the store's ManualClock for their sleeps.
 */
describe.each(['memory', 'redis'] as const)("issue-40-nestjs-throttler-e2e: the peer's e2e scenarios on %s", (kind) => {
  const open: { close(): Promise<unknown> }[] = []
  afterEach(async () => {
    for (const o of open.splice(0).reverse()) await o.close()
  })
  const remaining = (r: any, name?: string) => r.header(`x-ratelimit-remaining${name ? `-${name}` : ''}`)
  const limitOf = (r: any, name?: string) => r.header(`x-ratelimit-limit${name ? `-${name}` : ''}`)

  it.each(PLATFORMS)(
    '%s: controller and route overrides, module defaults, blockDuration, POST 1 a second',
    async (platform) => {
      const clock = new ManualClock(T0)
      const store = await makeStore(kind, { clock })
      open.push(store)
      @Controller('limit')
      @Throttle({ default: { limit: 2, ttl: 10_000, blockDuration: 5000 } })
      class LimitController {
        @Get()
        throttled() {
          return { success: true }
        }
        @Throttle({ default: { limit: 5, ttl: 10_000, blockDuration: 15_000 } })
        @Get('higher')
        higher() {
          return { success: true }
        }
      }
      @Controller('default')
      class DefaultController {
        @Get()
        default() {
          return { success: true }
        }
      }
      @Controller('test/throttle')
      class ThrottleTestController {
        @Throttle({ default: { limit: 1, ttl: 1000, blockDuration: 1000 } })
        @Post()
        throttle() {
          return { code: 'THROTTLE_TEST' }
        }
      }
      @Module({
        imports: [
          ThrottlerModule.forRoot({
            throttlers: [{ limit: 5, ttl: 60_000, blockDuration: 20_000 }],
            storage: new SluiceThrottlerStorage(store),
          }),
        ],
        controllers: [LimitController, DefaultController, ThrottleTestController],
        providers: [{ provide: APP_GUARD, useClass: ThrottlerGuard }],
      })
      class ControllerModule {}
      const { url, app } = await start(ControllerModule, platform)
      open.push(app)
      for (const [path, limit, blockDuration] of [
        ['/limit', 2, 5000],
        ['/limit/higher', 5, 15_000],
        ['/default', 5, 20_000],
      ] as const) {
        for (let i = 0; i < limit; i++) {
          const r = await get(`${url}${path}`)
          expect([r.status, limitOf(r), remaining(r)]).toEqual([200, String(limit), String(limit - (i + 1))])
          expect(r.header('x-ratelimit-reset')).toMatch(/^\d+$/)
        }
        const refused = await get(`${url}${path}`)
        expect([refused.status, refused.json().message]).toEqual([429, 'ThrottlerException: Too Many Requests'])
        expect(refused.header('retry-after')).toBe(String(blockDuration / 1000))
        clock.advance(blockDuration)
        // the block over: a new window, counting 1
        const after = await get(`${url}${path}`)
        expect([after.status, remaining(after)]).toEqual([200, String(limit - 1)])
      }
      const post = async () => (await fetch(`${url}/test/throttle`, { method: 'POST' })).status
      expect(await post()).toBe(201)
      clock.advance(1000)
      expect([await post(), await post(), await post()]).toEqual([201, 429, 429])
    },
  )

  it.each(PLATFORMS)('%s: three named throttlers (1/s, 2/5s, 5/min) and their skips', async (platform) => {
    const clock = new ManualClock(T0)
    const store = await makeStore(kind, { clock })
    open.push(store)
    @Controller()
    class MultiThrottlerController {
      @Get()
      simple() {
        return { success: true }
      }
      @SkipThrottle({ short: true })
      @Get('skip-short')
      skipShort() {
        return { success: true }
      }
      @SkipThrottle({ default: true, long: true })
      @Get('skip-default-and-long')
      skipDefaultAndLong() {
        return { success: true }
      }
    }
    @Module({
      imports: [
        ThrottlerModule.forRoot({
          throttlers: [
            { ttl: 5000, limit: 2 },
            { name: 'long', ttl: 60_000, limit: 5 },
            { name: 'short', limit: 1, ttl: 1000 },
          ],
          storage: new SluiceThrottlerStorage(store),
        }),
      ],
      controllers: [MultiThrottlerController],
      providers: [{ provide: APP_GUARD, useClass: ThrottlerGuard }],
    })
    class MultiModule {}
    const { url, app } = await start(MultiModule, platform)
    open.push(app)
    const root = () => get(`${url}/`)
    // 2 requests within a second: the short one refuses
    let r = await root()
    expect([r.status, remaining(r, 'short'), limitOf(r, 'short')]).toEqual([200, '0', '1'])
    r = await root()
    expect([r.status, r.header('retry-after-short')]).toEqual([429, '1'])
    clock.advance(1000)
    // two more within the first five seconds: the default one refuses
    r = await root()
    expect([r.status, remaining(r), limitOf(r)]).toEqual([200, '0', '2'])
    clock.advance(1000)
    r = await root()
    expect(r.status).toBe(429)
    expect(r.header('retry-after')).toMatch(/^\d+$/)
    clock.advance(5000)
    // 4 more, smartly spaced, within the minute: the long one refuses the last
    r = await root()
    expect([r.status, limitOf(r, 'long'), remaining(r, 'long'), remaining(r, 'short')]).toEqual([200, '5', '2', '0'])
    clock.advance(1000)
    r = await root()
    expect([r.status, remaining(r)]).toEqual([200, '0'])
    clock.advance(5000)
    r = await root()
    expect([r.status, remaining(r, 'long'), remaining(r, 'short'), remaining(r)]).toEqual([200, '0', '0', '1'])
    clock.advance(1000)
    r = await root()
    expect([r.status, r.header('retry-after-long')]).toEqual([429, '60'])
    // skips
    r = await get(`${url}/skip-short`)
    expect([r.status, remaining(r)]).toEqual([200, '1'])
    r = await get(`${url}/skip-short`)
    expect([r.status, remaining(r)]).toEqual([200, '0'])
    r = await get(`${url}/skip-default-and-long`)
    expect([r.status, remaining(r, 'short'), remaining(r), remaining(r, 'long')]).toEqual([
      200,
      '0',
      undefined,
      undefined,
    ])
  })
})

describe.each(REDIS_KINDS)('issue-40-nestjs-throttler-storage across 4 processes on %s', (kind) => {
  it('4 processes x 250 concurrent increments at a limit of 5: exactly 5 not blocked', async () => {
    const cfg = {
      ...(kind === 'redis' ? { url: redisUrl() } : { cluster: clusterNodes() }),
      prefix: freshPrefix(),
      startAt: Date.now() + 1500,
      concurrent: 250,
      limit: 5,
    }
    const worker = join(__dirname, 'helpers', 'throttler-worker.js')
    const results = await Promise.all(
      Array.from({ length: 4 }, () => {
        const child = fork(worker, [JSON.stringify(cfg)])
        return new Promise<{ admitted: number; hits: number[] }>((resolve, reject) => {
          child.once('message', (m) => resolve(m as any))
          child.once('exit', (code) => code !== 0 && reject(new Error(`worker exited with ${code}`)))
        })
      }),
    )
    expect(results.reduce((n, r) => n + r.admitted, 0)).toBe(5)
    // the admitted hits were counted 1..5, once each, across the processes
    const counted = results.flatMap((r) => r.hits.filter((h) => h <= 5)).sort()
    expect(counted).toEqual([1, 2, 3, 4, 5])
  })
})
