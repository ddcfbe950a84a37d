'use strict'
// The end-to-end scenario's load: cfg.conns keep-alive connections, each with one request at a
// time (GET /k<n>, n spread over cfg.keys keys), for cfg.warmup seconds unmeasured and then
// cfg.seconds measured. A separate process from the server, and lean (raw sockets, no HTTP
// client library), so its own CPU takes as little as it can of the two cores the server and
// Redis share with it. Tells the parent 'measuring' when the window opens, then the result.
const net = require('node:net')

const cfg = JSON.parse(process.argv[2])
const latencies = []
const statuses = {}
let measuring = false
let stopping = false
let completed = 0
let sent = 0

function connection() {
  return new Promise((resolve, reject) => {
    const socket = net.connect(cfg.port, '127.0.0.1')
    socket.setNoDelay(true)
    let buf = ''
    let start = 0
    const send = () => {
      if (stopping) return resolve(socket)
      const n = (sent++ * 7919) % cfg.keys
      start = performance.now()
      socket.write(`GET /k${n} HTTP/1.1\r\nHost: bench\r\n\r\n`)
    }
    socket.on('data', (data) => {
      buf += data.toString('latin1')
      for (;;) {
        const head = buf.indexOf('\r\n\r\n')
        if (head < 0) return
        const length = /content-length: *(\d+)/i.exec(buf.slice(0, head))
        const end = head + 4 + (length ? Number(length[1]) : 0)
        if (buf.length < end) return
        const status = buf.slice(9, 12)
        buf = buf.slice(end)
        if (measuring) {
          completed++
          latencies.push(performance.now() - start)
          statuses[status] = (statuses[status] || 0) + 1
        }
        send()
      }
    })
    socket.once('connect', send)
    socket.once('error', reject)
  })
}

const wait = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

async function main() {
  const done = Promise.all(Array.from({ length: cfg.conns }, connection))
  await wait(cfg.warmup * 1000)
  process.send('measuring')
  measuring = true
  const t0 = performance.now()
  await wait(cfg.seconds * 1000)
  measuring = false
  const seconds = (performance.now() - t0) / 1000
  stopping = true
  const sockets = await done
  for (const s of sockets) s.destroy()
  latencies.sort((a, b) => a - b)
  process.send({
    requests: completed,
    seconds,
    statuses,
    p50Us: latencies[Math.floor(latencies.length * 0.5)] * 1000,
    p99Us: latencies[Math.floor(latencies.length * 0.99)] * 1000,
  })
  process.exit(0)
}

main().catch((err) => {
  console.error(err)
  process.exit(1)
})
