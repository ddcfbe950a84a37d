'use strict'
// A node:cluster of WORKERS Express 5 (or Fastify 5) workers behind one port, each with its own
// store, limited by one sluice door. argv[2]: JSON config { workers, framework, store:
// { url | cluster, keyPrefix, whenDown, commandTimeoutMs, probeIntervalMs, localDenyCache },
// door: { ...rateLimit options } }. The primary prints `port <n>` once every worker listens.
// Every reply carries `x-worker` (the worker's pid) and the door's headers.
const cluster = require('node:cluster')
const http = require('node:http')

const config = JSON.parse(process.argv[2])

if (cluster.isPrimary) {
  const server = http.createServer().listen(0, '127.0.0.1', () => {
    const { port } = server.address()
    server.close(() => {
      let ready = 0
      for (let i = 0; i < config.workers; i++) {
        const worker = cluster.fork({ SLUICE_TEST_PORT: String(port) })
        worker.on('message', (m) => {
          if (m === 'listening' && ++ready === config.workers) console.log(`port ${port}`)
          if (typeof m === 'object' && m.event) console.log(`event ${m.event} ${worker.process.pid}`)
        })
      }
    })
  })
  process.on('SIGTERM', () => {
    for (const w of Object.values(cluster.workers)) w.kill()
    process.exit(0)
  })
} else {
  const { RedisStore } = require('../../lib/entries/index.js')
  const port = Number(process.env.SLUICE_TEST_PORT)
  ;(async () => {
    const store = await RedisStore.connect(config.store)
    store.on('down', () => process.send({ event: 'down' }))
    store.on('up', () => process.send({ event: 'up' }))
    const door = { ...config.door, store }
    if (config.framework === 'fastify') {
      const app = require('fastify')()
      app.addHook('onRequest', (req, reply, done) => {
        reply.header('x-worker', String(process.pid))
        done()
      })
      await app.register(require('../../lib/entries/fastify.js'), door)
      app.get('/', async (req, reply) => {
        reply.header('x-reset-epoch', String(Math.ceil(req.rateLimit.resetTime.getTime() / 1000)))
        return { degraded: req.rateLimit.degraded }
      })
      await app.listen({ port, host: '127.0.0.1' })
    } else {
      const express = require('express')
      const { rateLimit } = require('../../lib/entries/express.js')
      const app = express()
      app.use((req, res, next) => {
        res.setHeader('x-worker', String(process.pid))
        next()
      })
      app.use(rateLimit(door))
      app.get('/', (req, res) => res.json({ degraded: req.rateLimit.degraded }))
      app.use((err, req, res, _next) => res.status(500).json({ code: err.code }))
      await new Promise((resolve) => app.listen(port, '127.0.0.1', resolve))
    }
    process.send('listening')
  })().catch((err) => {
    console.error(err)
    process.exit(1)
  })
}
