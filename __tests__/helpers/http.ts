// Real servers on loopback for the HTTP doors: Express 5, Express 4 and Fastify 5 apps with
// one limited route set, and a raw HTTP client that keeps the response headers as sent.
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import Fastify from 'fastify'
import express5 from 'express'
import express4 from 'express4'
import { rateLimit } from '../../lib/entries/express.js'
import sluiceFastify from '../../lib/entries/fastify.js'

export const FRAMEWORKS = ['express5', 'express4', 'fastify'] as const
export type Framework = (typeof FRAMEWORKS)[number]

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
