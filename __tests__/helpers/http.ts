// Real servers on loopback for the HTTP doors: Express 5, Express 4, Fastify 5, Hono 4 (on
// @hono/node-server), Koa 3 and Koa 2 apps with one limited route set, and a raw HTTP client
// that keeps the response headers as sent.
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import Fastify from 'fastify'
import express5 from 'express'
import express4 from 'express4'
import { Hono } from 'hono'
import { serve as serveHono } from '@hono/node-server'
import Koa3 from 'koa'
import Koa2 from 'koa2'
import { rateLimit } from '../../lib/entries/express.js'
import sluiceFastify from '../../lib/entries/fastify.js'
import { rateLimiter as honoLimiter } from '../../lib/entries/hono.js'
import { rateLimit as koaLimit } from '../../lib/entries/koa.js'

export const FRAMEWORKS = ['express5', 'express4', 'fastify'] as const
/** The doors of issue 40, served by the same helper (not in FRAMEWORKS: their own tests name them). */
export const MORE_FRAMEWORKS = ['hono', 'koa', 'koa2'] as const
export type Framework = (typeof FRAMEWORKS)[number] | (typeof MORE_FRAMEWORKS)[number]

export interface Served {
  url: string
  close: () => Promise<void>
  /** the express middleware (for resetKey) */
  middleware?: any
}

/**
 * An app limited by `options`: GET / answers `{ rateLimit }` (what the door put on the
 * request), /fail answers 500, /free is exempt on Fastify (config.rateLimit false); errors
 * go to the framework's error handler, which answers 500 with the error's code.
 */
export async function serve(framework: Framework, options: any, routes?: (app: any) => void): Promise<Served> {
  if (framework === 'fastify') {
    const app = Fastify()
    app.setErrorHandler((err: any, _req: any, reply: any) => {
      // a refusal comes as an error with its status (@fastify/rate-limit's errorResponseBuilder)
      const status = err.statusCode
      if (status >= 400 && status < 500) {
        return reply.code(status).send({ statusCode: status, error: http.STATUS_CODES[status], message: err.message })
      }
      reply.code(500).send({ code: err.code, message: err.message })
    })
    await app.register(sluiceFastify as any, options)
    app.get('/', async (req: any) => ({ rateLimit: req.rateLimit }))
    app.get('/fail', async (_req: any, reply: any) => reply.code(500).send('failed'))
    app.get('/free', { config: { rateLimit: false } }, async () => 'free')
    if (routes) routes(app)
    await app.listen({ port: 0, host: '127.0.0.1' })
    const { port } = app.server.address() as AddressInfo
    return { url: `http://127.0.0.1:${port}`, close: () => app.close() }
  }
  if (framework === 'hono') return serveHonoApp(options, routes)
  if (framework === 'koa' || framework === 'koa2') return serveKoa(framework === 'koa' ? Koa3 : Koa2, options, routes)
  const express: any = framework === 'express4' ? express4 : express5
  const app = express()
  const middleware = rateLimit(options)
  if (routes) routes(app)
  app.use(middleware)
  app.get('/', (req: any, res: any) => res.json({ rateLimit: req.rateLimit }))
  app.get('/fail', (_req: any, res: any) => res.status(500).send('failed'))
  app.use((err: any, _req: any, res: any, _next: any) => res.status(500).json({ code: err.code, message: err.message }))
  const server: http.Server = await new Promise((resolve) => {
    const s = app.listen(0, '127.0.0.1', () => resolve(s))
  })
  const { port } = server.address() as AddressInfo
  return {
    url: `http://127.0.0.1:${port}`,
    middleware,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections()
        server.close(() => resolve())
      }),
  }
}

/** Closes a Node server, its keep-alive connections too. */
const closeServer = (server: http.Server) =>
  new Promise<void>((resolve) => {
    server.closeAllConnections()
    server.close(() => resolve())
  })

/** A Hono app: GET / answers `{ rateLimit }` (c.get), /fail 500, /throw throws (onError: 500 with the code). */
async function serveHonoApp(options: any, routes?: (app: any) => void): Promise<Served> {
  const app = new Hono()
  app.onError((err: any, c) => c.json({ code: err.code, message: err.message }, 500))
  if (routes) routes(app)
  const middleware = honoLimiter(options)
  app.use(middleware)
  app.get('/', (c) => c.json({ rateLimit: (c as any).get('rateLimit') }))
  app.get('/fail', (c) => c.text('failed', 500))
  app.get('/throw', () => {
    throw new Error('handler failed')
  })
  const server = serveHono({ fetch: app.fetch, port: 0, hostname: '127.0.0.1' }) as http.Server
  await new Promise((resolve) => server.once('listening', resolve))
  const { port } = server.address() as AddressInfo
  return { url: `http://127.0.0.1:${port}`, middleware, close: () => closeServer(server) }
}

/** A Koa app: GET / answers `{ rateLimit }` (ctx.state), /fail 500; errors answer 500 with the code (or their status). */
async function serveKoa(Koa: any, options: any, routes?: (app: any) => void): Promise<Served> {
  const app = new Koa()
  app.silent = true
  app.use(async (ctx: any, next: any) => {
    try {
      await next()
    } catch (err: any) {
      ctx.status = err.status ?? 500
      ctx.set(err.headers ?? {})
      ctx.body = err.status ? err.message : { code: err.code, message: err.message }
    }
  })
  if (routes) routes(app)
  const middleware = koaLimit(options)
  app.use(middleware)
  app.use((ctx: any) => {
    if (ctx.path === '/fail') {
      ctx.status = 500
      ctx.body = 'failed'
    } else ctx.body = { rateLimit: ctx.state.rateLimit }
  })
  const server: http.Server = await new Promise((resolve) => {
    const s = app.listen(0, '127.0.0.1', () => resolve(s))
  })
  const { port } = server.address() as AddressInfo
  return { url: `http://127.0.0.1:${port}`, middleware, close: () => closeServer(server) }
}

/** `server` listening on a free loopback port: its URL, and close() that ends its connections too. */
export async function listen(server: http.Server): Promise<Served> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()))
  const { port } = server.address() as AddressInfo
  return { url: `http://127.0.0.1:${port}`, close: () => closeServer(server) }
}

export interface Reply {
  status: number
  /** [lower-case name, value] as sent, in order */
  headers: [string, string][]
  body: string
  header(name: string): string | undefined
  json(): any
}

/** One GET with its raw headers. */
export function get(url: string, headers: Record<string, string> = {}, agent?: http.Agent): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const req = http.get(url, { headers, agent: agent ?? false }, (res) => {
      let body = ''
      res.setEncoding('utf8')
      res.on('data', (c) => (body += c))
      res.on('end', () => {
        const raw = res.rawHeaders
        const pairs: [string, string][] = []
        for (let i = 0; i < raw.length; i += 2) pairs.push([raw[i].toLowerCase(), raw[i + 1]])
        resolve({
          status: res.statusCode!,
          headers: pairs,
          body,
          header: (name) => pairs.find(([n]) => n === name.toLowerCase())?.[1],
          json: () => JSON.parse(body),
        })
      })
    })
    req.on('error', reject)
  })
}

/** The rate-limit headers of a reply (and Retry-After), sorted by name. */
export function limitHeaders(r: Reply): [string, string][] {
  return r.headers.filter(([n]) => /ratelimit|retry-after/.test(n)).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
}
