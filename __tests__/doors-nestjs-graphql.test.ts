// sluice/nestjs in a GraphQL context (issue 40): SluiceGuard with getRequest/getResponse
// overridden reads the request and the response from GraphQL's context, on a real NestJS app
// with @nestjs/graphql and Apollo (Express platform) and a real HTTP client. Counted: the limit of
// a query's resolver is its limit; the refusal is a GraphQL error carrying the status; the
// headers reach the client. (NestJS 12 only: @nestjs/graphql 14 needs it.)
import 'reflect-metadata'
import { Injectable, Module, type ExecutionContext } from '@nestjs/common'
import { APP_GUARD, NestFactory } from '@nestjs/core'
import { GqlExecutionContext, GraphQLModule, Query, Resolver } from '@nestjs/graphql'
import { ApolloDriver, type ApolloDriverConfig } from '@nestjs/apollo'
import { describe, expect, it } from 'vitest'
import { ManualClock, MemoryStore } from '../lib/entries/index.js'
import { RateLimit, SluiceGuard, SluiceModule } from '../lib/entries/nestjs.js'

@Injectable()
class GqlSluiceGuard extends SluiceGuard {
  getRequest(context: ExecutionContext) {
    return context.getType<string>() === 'graphql'
      ? GqlExecutionContext.create(context).getContext().req
      : super.getRequest(context)
  }
  getResponse(context: ExecutionContext) {
    return context.getType<string>() === 'graphql'
      ? GqlExecutionContext.create(context).getContext().res
      : super.getResponse(context)
  }
}

@Resolver()
class HelloResolver {
  @Query(() => String)
  @RateLimit({ limit: 2, windowMs: 60_000, standardHeaders: 'draft-7' })
  hello() {
    return 'world'
  }

  @Query(() => String)
  free() {
    return 'free'
  }
}

describe('issue-40-nestjs-graphql', () => {
  it('a resolver limited through GraphQL context: 2 a minute is 2, a refusal is an error with status 429, headers sent', async () => {
    const clock = new ManualClock(1_800_000_000_000)
    @Module({
      imports: [
        GraphQLModule.forRoot<ApolloDriverConfig>({
          driver: ApolloDriver,
          autoSchemaFile: true,
          context: ({ req, res }: any) => ({ req, res }),
        }),
        SluiceModule.forRoot({ store: () => new MemoryStore({ clock }) }),
      ],
      providers: [HelloResolver, { provide: APP_GUARD, useClass: GqlSluiceGuard }],
    })
    class AppModule {}
    const app = await NestFactory.create(AppModule, { logger: ['error'], abortOnError: false })
    await app.listen(0, '127.0.0.1')
    const { port } = app.getHttpServer().address()
    try {
      const query = async (q: string) => {
        const res = await fetch(`http://127.0.0.1:${port}/graphql`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ query: `{ ${q} }` }),
        })
        return { res, body: (await res.json()) as any }
      }
      const answers = []
      for (let i = 0; i < 4; i++) answers.push(await query('hello'))
      expect(answers.map((a) => a.body.data?.hello ?? null)).toEqual(['world', 'world', null, null])
      expect(answers[0].res.headers.get('ratelimit')).toBe('limit=2, remaining=1, reset=60')
      const refused = answers[2]
      expect(refused.body.errors[0].message).toBe('Too many requests, please try again later.')
      expect(refused.body.errors[0].extensions).toMatchObject({
        code: 'RATE_LIMITED',
        status: 429,
        retryAfterSeconds: 60,
      })
      expect(refused.res.headers.get('retry-after')).toBe('60')
      // a query without @RateLimit (and no module defaults): not limited
      for (let i = 0; i < 4; i++) expect((await query('free')).body.data.free).toBe('free')
      clock.advance(60_000)
      expect((await query('hello')).body.data.hello).toBe('world')
    } finally {
      await app.close()
    }
  })

  it("a resolver's bad options fail app.init() with ERR_INVALID_CONFIG", async () => {
    @Resolver()
    class BadResolver {
      @Query(() => String)
      @RateLimit({ limit: 1, windowMs: 0 })
      bad() {
        return 'never'
      }
    }
    @Module({
      imports: [
        GraphQLModule.forRoot<ApolloDriverConfig>({ driver: ApolloDriver, autoSchemaFile: true }),
        SluiceModule.forRoot({ store: () => new MemoryStore() }),
      ],
      providers: [BadResolver],
    })
    class BadModule {}
    await expect(
      NestFactory.create(BadModule, { logger: false, abortOnError: false }).then((app) => app.init()),
    ).rejects.toMatchObject({ code: 'ERR_INVALID_CONFIG' })
  })
})
