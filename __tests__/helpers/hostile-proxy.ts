// A TCP proxy in front of a real Redis that forwards every byte, except one reply it replaces
// with a hostile one when armed: what a broken server, or anything on the path, could send.
// Commands and replies are framed (RESP2) to know which reply answers which command; a
// connection that subscribes is forwarded raw from then on.
import net from 'node:net'
import type { AddressInfo } from 'node:net'
// eslint-disable-next-line @typescript-eslint/no-require-imports
const { frame } = require('../../lib/store/direct.js') as { frame: (b: Buffer, at: number, n: number) => number }

export interface Trap {
  /** Which reply to replace: by its command's name (upper case), or the first reply of a connection. */
  command: string | 'FIRST'
  /** What the client gets instead. */
  payload: Buffer
  /** Afterwards: go on forwarding, stop forwarding on this connection (a stall), or close it. */
  then: 'continue' | 'stall' | 'close'
}

/** The name of the command in a framed RESP2 array of bulk strings (upper case). */
function commandName(buf: Buffer): string {
  // *<n>\r\n$<len>\r\n<name>\r\n...
  const first = buf.indexOf('\r\n')
  const second = buf.indexOf('\r\n', first + 2)
  const third = buf.indexOf('\r\n', second + 2)
  if (first < 0 || second < 0 || third < 0) return ''
  return buf
    .subarray(second + 2, third)
    .toString('latin1')
    .toUpperCase()
}

export class HostileProxy {
  private server: net.Server
  private sockets = new Set<net.Socket>()
  private trap: Trap | null = null
  /** Replies replaced so far. */
  fired = 0
  /** Connections accepted so far. */
  connections = 0
  port = 0

  constructor(private upstream: { host: string; port: number }) {
    this.server = net.createServer((client) => this.accept(client))
  }

  async listen(): Promise<number> {
    await new Promise<void>((r) => this.server.listen(0, '127.0.0.1', r))
    this.port = (this.server.address() as AddressInfo).port
    return this.port
  }

  /** Replaces the next reply that matches (once). */
  arm(trap: Trap) {
    this.trap = trap
  }

  disarm() {
    this.trap = null
  }

  /** Connections to clients, open now, whose first command had this name (upper case). */
  private clients = new Map<net.Socket, string>()

  /**
   * Writes `payload` now to every client connection whose first command was one of `firstCommands`
   * (all when empty), between replies: bytes no command asked for. Resolves with how many got it.
   */
  inject(payload: Buffer, firstCommands: string[] = []): number {
    let sent = 0
    for (const [client, first] of this.clients) {
      if (client.destroyed || (firstCommands.length > 0 && !firstCommands.includes(first))) continue
      client.write(payload)
      sent++
    }
    return sent
  }

  private accept(client: net.Socket) {
    this.connections++
    const server = net.connect(this.upstream)
    this.sockets.add(client).add(server)
    const names: string[] = []
    let raw = false
    let stalled = false
    let replies = 0
    let fromClient = Buffer.alloc(0)
    let fromServer = Buffer.alloc(0)
    const drop = () => {
      this.clients.delete(client)
      client.destroy()
      server.destroy()
    }
    client.on('error', drop).on('close', drop)
    server.on('error', drop).on('close', drop)
    client.on('data', (chunk) => {
      server.write(chunk)
      if (raw) return
      fromClient = Buffer.concat([fromClient, chunk])
      for (;;) {
        const end = frame(fromClient, 0, 1)
        if (end < 0) break
        const name = commandName(fromClient.subarray(0, end))
        names.push(name)
        if (!this.clients.has(client)) this.clients.set(client, name)
        if (/SUBSCRIBE$/.test(name)) raw = true
        fromClient = fromClient.subarray(end)
      }
    })
    server.on('data', (chunk) => {
      if (stalled) return
      if (raw) return void client.write(chunk)
      fromServer = Buffer.concat([fromServer, chunk])
      for (;;) {
        const end = frame(fromServer, 0, 1)
        if (end < 0) break
        const reply = fromServer.subarray(0, end)
        fromServer = fromServer.subarray(end)
        const name = names.shift() ?? ''
        const trap = this.trap
        if (trap !== null && (trap.command === name || (trap.command === 'FIRST' && replies === 0))) {
          this.trap = null
          this.fired++
          client.write(trap.payload)
          if (trap.then === 'close') return void client.end()
          if (trap.then === 'stall') {
            stalled = true
            return
          }
        } else {
          client.write(reply)
        }
        replies++
      }
    })
  }

  async close() {
    for (const s of this.sockets) s.destroy()
    await new Promise<void>((r) => this.server.close(() => r()))
  }
}

/** The hostile replies of issue 15, by name. */
export function payloads(seed = 1): Record<string, { payload: Buffer; then: Trap['then'] }> {
  let x = seed
  const random = (n: number) =>
    Buffer.from(
      Array.from({ length: n }, () => {
        x = (x * 1103515245 + 12345) % 2 ** 31
        return x % 256
      }),
    )
  return {
    // the report: `*1\r\n` 2,000 times, 8 KB
    nested: { payload: Buffer.from('*1\r\n'.repeat(2000) + ':1\r\n'), then: 'continue' },
    // 200,000 deep (800 KB): past any thread's stack without the cap
    'nested-deep': { payload: Buffer.from('*1\r\n'.repeat(200_000) + ':1\r\n'), then: 'continue' },
    // deeper than any reply of ours, far below the decoder's cap
    'nested-16': { payload: Buffer.from('*1\r\n'.repeat(16) + ':1\r\n'), then: 'continue' },
    // a 2 GB bulk string announced, a little sent, then nothing
    'huge-bulk': { payload: Buffer.from('$2147483647\r\n' + 'x'.repeat(4096)), then: 'stall' },
    // a 2-billion-element array announced, some elements sent, then nothing
    'huge-array': { payload: Buffer.from('*2147483647\r\n' + ':1\r\n'.repeat(1000)), then: 'stall' },
    // half a reply, then the connection closes
    truncated: { payload: Buffer.from('*3\r\n:1\r\n$5\r\nab'), then: 'close' },
    // bytes that are not RESP at all
    garbage: {
      payload: Buffer.concat([Buffer.from('\x00\xff\x13garbage'), random(64), Buffer.from('\r\n')]),
      then: 'continue',
    },
    random: { payload: random(512), then: 'continue' },
  }
}
