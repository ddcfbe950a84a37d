// The types of sluice/ws (lib/doors/ws/index.js): message limits for `ws` sockets and Socket.IO
// events. Structural socket types: no framework's types are needed to use them.
import type { DoorOptions, RateLimitInfo } from '../http/types.js'

export type { RateLimitInfo } from '../http/types.js'

/** A `ws` socket as the limit reaches it: its events, and close. */
export interface MessageSocket {
  emit(event: string | symbol, ...args: any[]): boolean
  close(code?: number, reason?: string): void
}

/** A Socket.IO socket as the limit reaches it: its middleware, and disconnect. */
export interface EventSocket {
  use(fn: (packet: any[], next: (err?: Error) => void) => void): unknown
  disconnect(close?: boolean): unknown
  readonly request?: unknown
}

export interface MessageLimitOptions<Socket, Req = unknown> extends Pick<
  DoorOptions<unknown, Socket>,
  'store' | 'limits' | 'algorithm' | 'identifier' | 'cacheBytes' | 'mode' | 'ban'
> {
  /** Messages per window (or give `limits`). */
  limit?: number
  /** The window, ms (default 1000). */
  windowMs?: number
  /** A message's weight (default 1): `(data, socket)`. */
  cost?: (data: unknown, socket: Socket) => number | Promise<number>
  /** One count per key (a user, in every process); default: each connection its own. */
  key?: (socket: Socket, req: Req) => string | number
  /**
   * Over the limit: 'close' (default: close 1008 / disconnect), 'drop' (this message only), or
   * a function (the message dropped).
   */
  onLimit?: 'close' | 'drop' | ((socket: Socket, info: RateLimitInfo) => void)
}

/** `wss.on('connection', limitMessages({ store, limit: 20, windowMs: 1000 }))`: each message one decision. */
export declare function limitMessages<Socket extends MessageSocket = any, Req = any>(
  options: MessageLimitOptions<Socket, Req>,
): (socket: Socket, req?: Req) => void

/** `io.on('connection', limitEvents({ store, limit: 20, windowMs: 1000 }))`: each event one decision. */
export declare function limitEvents<Socket extends EventSocket = any>(
  options: MessageLimitOptions<Socket, unknown>,
): (socket: Socket) => void
