// sluice/ws (issue 40, DESIGN §10): message limits on real `ws` servers and clients and on a
// real Socket.IO server and client, memory store and Redis: per connection by default, per key
// across connections and processes, 'close' (1008), 'drop', a callback; order kept; a flood of
// 10,000 messages counted exactly, one decision per message at most.
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import { afterEach, describe, expect, it } from 'vitest'
import { WebSocket, WebSocketServer } from 'ws'
import { Server as IoServer } from 'socket.io'
import { io as ioClient } from 'socket.io-client'
import { ManualClock, type Store } from '../lib/entries/index.js'
import { limitEvents, limitMessages } from '../lib/entries/ws.js'
import { REDIS_KINDS, STORE_KINDS, makeStore, makeStores } from './helpers/stores.js'

const T0 = 1_800_000_000_000

/** A ws server on loopback: what each connection received, in order; `attach` limits it. */
async function wsServer(attach: (socket: any, req: any) => void) {
  const server = http.createServer()
  const wss = new WebSocketServer({ server })
  const received: string[][] = []
  wss.on('connection', (socket, req) => {
    attach(socket, req)
    const mine: string[] = []
    received.push(mine)
    socket.on('message', (data) => {
      mine.push(String(data))
      if (String(data) === 'ping') socket.send('pong')
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()))
  const { port } = server.address() as AddressInfo
  return {
    url: `ws://127.0.0.1:${port}`,
    received,
    close: async () => {
      for (const c of wss.clients) c.terminate()
      wss.close()
      server.closeAllConnections()
      await new Promise((r) => server.close(r))
    },
  }
}

async function client(url: string, headers: Record<string, string> = {}) {
  const ws = new WebSocket(url, { headers })
  await new Promise((resolve, reject) => {
    ws.once('open', resolve)
    ws.once('error', reject)
  })
  const closed = new Promise<number>((resolve) => ws.once('close', (code) => resolve(code)))
  return { ws, closed }
}

/** Sends `n` messages, then a 'ping' the server answers once every earlier message was decided. */
async function sendAll(ws: WebSocket, messages: string[]) {
  for (const m of messages) ws.send(m)
}

/** Waits until `ok()`, at most 5 s (real I/O: messages on a socket). */
async function until(ok: () => boolean) {
  const end = Date.now() + 5000
  while (!ok()) {
    if (Date.now() > end) throw new Error('not within 5 s')
    await new Promise((r) => setTimeout(r, 5))
  }
}

describe.each(STORE_KINDS.filter((k) => k !== 'cluster'))('issue-40-ws on %s', (kind) => {
  const open: { close(): Promise<unknown> }[] = []
  afterEach(async () => {
    for (const o of open.splice(0).reverse()) await o.close()
  })
  const store = async () => {
    const s = await makeStore(kind, { clock: new ManualClock(T0) })
    open.push(s)
    return s
  }

  it("'drop': each connection its own count; the first `limit` delivered, in order", async () => {
    const s = await store()
    const server = await wsServer(limitMessages({ store: s, limit: 5, windowMs: 60_000, onLimit: 'drop' }))
    open.push(server)
    const a = await client(server.url)
    const b = await client(server.url)
    const messages = Array.from({ length: 20 }, (_, i) => `m${i}`)
    await sendAll(a.ws, messages)
    await sendAll(b.ws, messages)
    await until(() => server.received.length === 2 && server.received.every((r) => r.length >= 5))
    await new Promise((r) => setTimeout(r, 100)) // nothing more arrives
    expect(server.received).toEqual([messages.slice(0, 5), messages.slice(0, 5)])
    a.ws.close()
    b.ws.close()
  })

  it("'close' (the default): the message over the limit closes the socket with 1008", async () => {
    const s = await store()
    const server = await wsServer(limitMessages({ store: s, limit: 3, windowMs: 60_000 }))
    open.push(server)
    const a = await client(server.url)
    await sendAll(a.ws, ['a', 'b', 'c', 'd', 'e'])
    expect(await a.closed).toBe(1008)
    expect(server.received).toEqual([['a', 'b', 'c']])
  })

  it('a key: one count over all its connections; a callback gets the refusal', async () => {
    const s = await store()
    const refused: number[] = []
    const server = await wsServer(
      limitMessages({
        store: s,
        limit: 4,
        windowMs: 60_000,
        key: (_socket, req) => req.headers['x-user'],
        onLimit: (_socket, info) => refused.push(info.remaining),
      }),
    )
    open.push(server)
    const a1 = await client(server.url, { 'x-user': 'ann' })
    const a2 = await client(server.url, { 'x-user': 'ann' })
    const bob = await client(server.url, { 'x-user': 'bob' })
    await sendAll(a1.ws, ['1', '2', '3'])
    await until(() => server.received[0]?.length === 3)
    await sendAll(a2.ws, ['4', '5', '6'])
    await sendAll(bob.ws, ['x', 'y'])
    await until(() => refused.length === 2 && server.received[2]?.length === 2)
    expect(server.received).toEqual([['1', '2', '3'], ['4'], ['x', 'y']])
    expect(refused).toEqual([0, 0])
    for (const c of [a1, a2, bob]) c.ws.close()
  })

  it('a flood of 10,000 messages on one socket: exactly the limit delivered, each message one decision', async () => {
    const s = await store()
    const limit = 250
    const server = await wsServer(
      limitMessages({ store: s, limit, windowMs: 60_000, identifier: 'flood', onLimit: 'drop' }),
    )
    open.push(server)
    const a = await client(server.url)
    const messages = Array.from({ length: 10_000 }, (_, i) => String(i))
    await sendAll(a.ws, messages)
    await until(() => (server.received[0]?.length ?? 0) >= limit)
    await new Promise((r) => setTimeout(r, 300))
    expect(server.received[0]).toEqual(messages.slice(0, limit))
    // the door counts each message once: admitted + refused = 10,000
    await (s as any)._flushStats?.()
    const stats = await (s as any)._statsOf('door', 'flood')
    expect([stats.admitted, stats.refused]).toEqual([limit, 10_000 - limit])
    a.ws.close()
  })

  it('a callback that throws fails its message or connection only: a warning, never an unhandled rejection', async () => {
    const clock = new ManualClock(T0)
    const s = await makeStore(kind, { clock })
    open.push(s)
    const warnings: string[] = []
    const onWarning = (w: any) => w.code === 'SLUICE_CALLBACK_THREW' && warnings.push(w.message)
    process.on('warning', onWarning)
    try {
      const server = await wsServer(
        limitMessages({
          store: s,
          limit: 2,
          windowMs: 1000,
          key: (_socket, req) => {
            if (req.headers['x-bad']) throw new Error('no user')
            return req.headers['x-user'] ?? 'anon'
          },
          onLimit: () => {
            throw new Error('app bug')
          },
        }),
      )
      open.push(server)
      const bad = await client(server.url, { 'x-bad': '1' })
      expect(await bad.closed).toBe(1011)
      const a = await client(server.url)
      await sendAll(a.ws, ['1', '2', '3', '4'])
      await until(() => warnings.length === 3)
      clock.advance(1000)
      await sendAll(a.ws, ['5'])
      await until(() => server.received.some((r) => r.includes('5')))
      expect(server.received.find((r) => r.length > 0)).toEqual(['1', '2', '5'])
      expect(warnings).toEqual([
        'sluice/ws: key(socket, req) threw: no user',
        'sluice/ws: onLimit threw: app bug',
        'sluice/ws: onLimit threw: app bug',
      ])
      a.ws.close()
    } finally {
      process.off('warning', onWarning)
    }
  })

  it('keys of any bytes are data: each its own count', async () => {
    const s = await store()
    // the key is the connection's path, decoded: any characters, a long one hashed
    const key = (_socket: any, req: any) => decodeURIComponent(String(req.url).slice(1))
    const server = await wsServer(limitMessages({ store: s, limit: 1, windowMs: 60_000, key, onLimit: 'drop' }))
    open.push(server)
    const users = ['a_b', 'a', 'b', '}{', '%7B', '', 'k'.repeat(3000), 'é€😀', 'a\u0000b']
    for (const [i, user] of users.entries()) {
      const c = await client(`${server.url}/${encodeURIComponent(user)}`)
      await sendAll(c.ws, ['first', 'second'])
      await until(() => server.received[i]?.length === 1)
      c.ws.close()
    }
    await new Promise((r) => setTimeout(r, 100))
    expect(server.received).toEqual(users.map(() => ['first']))
  })

  it('bad options are ERR_INVALID_CONFIG at setup', async () => {
    const s = await store()
    for (const bad of [
      { limit: 0.5 },
      { limit: 1, onLimit: 'kick' },
      { limit: 1, key: 'user' },
      { limit: 1, nope: 1 },
      {},
    ]) {
      expect(() => limitMessages({ store: s, ...bad } as any), JSON.stringify(bad)).toThrow(
        expect.objectContaining({ code: 'ERR_INVALID_CONFIG' }),
      )
    }
  })

  it('Socket.IO: events limited per socket through socket.use; drop, then close', async () => {
    const s = await store()
    const server = http.createServer()
    const io = new IoServer(server)
    const got: string[] = []
    const limitDrop = limitEvents({ store: s, limit: 3, windowMs: 60_000, onLimit: 'drop', identifier: 'io-drop' })
    io.on('connection', (socket) => {
      limitDrop(socket)
      socket.on('chat', (text: string, ack?: () => void) => {
        got.push(text)
        ack?.()
      })
    })
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()))
    const { port } = server.address() as AddressInfo
    open.push({ close: () => new Promise<void>((r) => io.close(() => r())) })
    const c = ioClient(`http://127.0.0.1:${port}`, { transports: ['websocket'] })
    await new Promise<void>((r) => c.once('connect', () => r()))
    for (let i = 0; i < 8; i++) c.emit('chat', `t${i}`)
    await until(() => got.length >= 3)
    await new Promise((r) => setTimeout(r, 150))
    expect(got).toEqual(['t0', 't1', 't2'])
    c.close()
  })
})

describe.each(REDIS_KINDS)('issue-40-ws-processes on %s', (kind) => {
  it('two processes, one key: 6 messages of a user over both servers in a window of 6', async () => {
    const stores: Store[] = await makeStores(kind, 2, new ManualClock(T0))
    const servers = await Promise.all(
      stores.map((store) =>
        wsServer(
          limitMessages({
            store,
            limit: 6,
            windowMs: 60_000,
            key: () => 'user-1',
            onLimit: 'drop',
            identifier: 'shared-ws',
          }),
        ),
      ),
    )
    try {
      const clients = await Promise.all(servers.map((s) => client(s.url)))
      for (const c of clients)
        await sendAll(
          c.ws,
          Array.from({ length: 10 }, (_, i) => String(i)),
        )
      await until(() => servers.reduce((n, s) => n + (s.received[0]?.length ?? 0), 0) >= 6)
      await new Promise((r) => setTimeout(r, 200))
      expect(servers.reduce((n, s) => n + (s.received[0]?.length ?? 0), 0)).toBe(6)
      for (const c of clients) c.ws.close()
    } finally {
      for (const s of servers) await s.close()
      for (const s of stores) await s.close()
    }
  })
})
