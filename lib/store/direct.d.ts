// Internal: the direct lane's reply framing and URL parsing (tested on their own).

/** The end offset of `count` complete RESP2 replies in `buf` from `at`, or -1. */
export declare function frame(buf: Uint8Array, at: number, count: number): number

/** The parts of a plain `redis://` URL, or null for anything else. */
export declare function parseUrl(
  url: string,
): { host: string; port: number; user: string; password: string; db: number } | null
