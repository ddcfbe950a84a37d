// Internal: the direct lane's reply framing and URL parsing (tested on their own).

/** The end offset of `count` complete RESP2 replies in `buf` from `at`, or -1. */
export declare function frame(buf: Uint8Array, at: number, count: number): number

/** The parts of a plain `redis://` URL, or null for anything else. */
export declare function parseUrl(
  url: string,
): { host: string; port: number; user: string; password: string; db: number } | null

/**
 * A RedisStore's direct connection on the JS thread (lib/store/direct.js): the one declaration
 * of it, so the JS that requires it (lib/store/redis.js, lanes.js) is checked against it.
 */
export declare class DirectConnection {
  /** Opens it (AUTH, SELECT); null when the URL is not a plain `redis://` one or it cannot connect in time. */
  static open(
    url: string,
    timeouts: { connectTimeoutMs: number; commandTimeoutMs: number },
  ): Promise<DirectConnection | null>
  /** One not dialled yet (Redis was down at start); null when the URL is not a plain `redis://` one. */
  static idle(url: string, timeouts: { commandTimeoutMs: number }): DirectConnection | null
  /** Whether it is connected and can take calls. */
  readonly ready: boolean
  /** Redials in the background, at most once a second. */
  redial(connectTimeoutMs: number): void
  /** Runs a direct task: `done(out)` with its result, or `fail(error)`, once, never from this call. */
  run(task: unknown, done: (out: any) => void, fail: (error: unknown) => void): void
  /** Moves it to another server (behind Sentinel: the promoted replica). */
  retarget(host: string, port: number): void
  close(): void
}
