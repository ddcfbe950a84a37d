'use strict'
// The HTTP doors suite's load: autocannon (its programmatic API), in a separate process from the
// servers. argv[2] = JSON { ports, conns, seconds, warmup, clients }: on every port at once,
// cfg.conns keep-alive connections, each with one request at a time (no pipelining), GET / with
// an `x-client` header naming the client: with cfg.clients > 1, a client id drawn at random
// from cfg.clients for every request (as many clients sharing the connections of a proxy or a
// load balancer would: the keys vary from one request to the next, on every connection); with
// cfg.clients = 1, the same id on every request (one hot key). First cfg.warmup seconds
// unmeasured, then it tells the parent 'warm' and waits for 'go' (the parent reads Redis'
// counters and tells the servers to start counting), then cfg.seconds measured; then it sends
// the result (the statuses counted over every port, latency percentiles of every response).
const autocannon = require('autocannon')

const cfg = JSON.parse(process.argv[2])
const okPerSecond = new Map()

function requests() {
  if (cfg.clients <= 1) return [{ method: 'GET', path: '/', headers: { 'x-client': 'hot' } }]
  const setupRequest = (req) => {
    req.headers['x-client'] = `c${Math.floor(Math.random() * cfg.clients)}`
    return req
  }
  return [{ method: 'GET', path: '/', setupRequest }]
}

/** autocannon on every port at once for `seconds`; `latencies` (ms) gets every response's. */
function load(seconds, latencies) {
  return Promise.all(
    cfg.ports.map(
      (port) =>
        new Promise((resolve, reject) => {
          const instance = autocannon(
            { url: `http://127.0.0.1:${port}`, connections: cfg.conns, duration: seconds, requests: requests() },
            (err, result) => (err ? reject(err) : resolve(result)),
          )
          if (latencies) {
            instance.on('response', (client, status, bytes, ms) => {
              latencies.push(ms)
              // 200s per wall-clock second, on the hot key (to check the limit is kept)
              if (cfg.clients <= 1 && Number(status) === 200) {
                const second = Math.floor(Date.now() / 1000)
                okPerSecond.set(second, (okPerSecond.get(second) || 0) + 1)
              }
            })
          }
        }),
    ),
  )
}

const percentile = (sorted, p) =>
  sorted.length ? sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))] : NaN

async function main() {
  await load(cfg.warmup)
  process.send('warm')
  await new Promise((resolve) => process.once('message', resolve))
  const latencies = []
  const first = Math.floor(Date.now() / 1000)
  const results = await load(cfg.seconds, latencies)
  const last = Math.floor(Date.now() / 1000)
  const statuses = {}
  let errors = 0
  for (const r of results) {
    errors += r.errors + r.timeouts
    for (const [status, { count }] of Object.entries(r.statusCodeStats))
      statuses[status] = (statuses[status] || 0) + count
  }
  const sorted = Float64Array.from(latencies).sort()
  const result = {
    requests: results.reduce((n, r) => n + r.requests.total, 0),
    // autocannon's own duration (its timer), the longest of the instances
    seconds: Math.max(...results.map((r) => r.duration)),
    statuses,
    errors,
    p50Ms: percentile(sorted, 0.5),
    p99Ms: percentile(sorted, 0.99),
    // hot key: the 200s of each whole second of the window (0 for a second with none; the
    // first and last seconds, partly measured, left out)
    okPerSecond:
      cfg.clients <= 1
        ? Array.from({ length: Math.max(0, last - first - 1) }, (_, i) => okPerSecond.get(first + 1 + i) || 0)
        : [],
  }
  process.send(result, () => process.exit(0))
}

main().catch((err) => {
  console.error(err)
  process.exit(1)
})
