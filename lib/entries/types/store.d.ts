// Public types of the stores (MemoryStore, RedisStore) and the statistics they answer.

import type { ManualClock } from './clock'
import type { SluiceError } from './errors'
import type { Rules } from './rules'

export interface StoreOptions {
  /** Prefix of every key, default "sluice". No braces or newlines. */
  keyPrefix?: string
  /** Decide with this clock instead of the system clock (memory) or Redis `TIME` (Redis). */
  clock?: ManualClock
  /** Count statistics of every limiter (`stats()`, `store.limiters()`); default true. */
  stats?: boolean
}

/** Statistics of one limiter, over every process (see `stats()`). */
export interface LimiterStats {
  /** Decisions that admitted. */
  admitted: number
  /** Decisions that refused (a tryAcquire() that returned null, a job re-routed by a FairTenant...). */
  refused: number
  admittedWeight: number
  refusedWeight: number
  /** Admissions after which at most 20 % of the limit remained (a pacer's bucket 80 % full). */
  nearLimit: number
  /** Admissions that waited for their turn (withinLimit, pace), and the time they waited. */
  waited: number
  waitTimeMs: number
  /** Answers given without Redis (RedisStore `whenDown`). */
  degraded: number
  /** Jobs moved back to delayed by sluice/bullmq's limitProcessor. */
  rescheduled: number
  /** sluice/fetch keys (kind 'adaptive') only: answers 429/503 seen. */
  throttled?: number
  /** sluice/fetch keys (kind 'adaptive') only: blocks recorded from answers (Retry-After, an exhausted quota). */
  blocks?: number
  /**
   * The kinds that honour `store.rules` (the rate limiters, sliding windows and counters, the
   * semaphore, the pacers): decisions shadow mode admitted that enforcing would have refused.
   */
  shadowRefused?: number
  /** Those kinds: calls a `deny` rule of `store.rules` refused (counted in `refused` too). */
  denied?: number
  /** The rate limiters (bucket, window, leaky, points): lease calls made (`lease` option), every process. */
  leaseCalls?: number
  /** The rate limiters: leased tokens given back unused, every process. */
  returned?: number
  /** A leasing rate limiter on a RedisStore: tokens this process holds now. */
  leased?: number
  /**
   * A leasing rate limiter on a RedisStore: tokens every process holds now (other processes'
   * as their last statistics flush wrote it, within statsFlushMs).
   */
  leasedOutstanding?: number
}

/** A limiter a store has seen (`store.limiters()`). */
export interface LimiterInfo {
  kind:
    | 'pacer'
    | 'bucket'
    | 'window'
    | 'leaky'
    | 'points'
    | 'concurrent'
    | 'sliding'
    | 'quota'
    | 'fair'
    | 'sliding-counter'
    | 'budget'
    /** a sluice/fetch key: admitted = calls and retries sent, refused = over maxWaitMs */
    | 'adaptive'
    /**
     * an HTTP door (sluice/express, sluice/fastify, sluice/http): one limiter over all its
     * clients, named by its identifier; options `{ algorithm, windows: [{ limit, windowMs }] }`
     */
    | 'door'
  /** The limiter's name (a pacer's key, a quota's prefix, a door's identifier). */
  name: string
  options: Record<string, unknown>
  /** Last use, ms since the epoch (the store's clock). */
  lastUse: number
}

/** The embedded store: state in this process, synchronous native decisions, no Redis. */
export declare class MemoryStore {
  constructor(options?: StoreOptions)
  readonly keyPrefix: string
  /** The operators' rules (limit overrides, shadow mode, allow and deny): live control, DESIGN §9. */
  readonly rules: Rules
  readonly clock: ManualClock | null
  /**
   * The limiters used through this store, most recently used first (at most 10,000; a full
   * registry forgets names used in one period of 5 s before names used in two or more).
   */
  limiters(): Promise<LimiterInfo[]>
  /** Statistics events forgotten (a limiter forgotten by a full registry); 0 otherwise. */
  readonly statsDropped: number
  close(): Promise<void>
}

export interface RedisStoreOptions extends StoreOptions {
  /** Standalone server URL, default "redis://127.0.0.1:6379"; `rediss://` = TLS. */
  url?: string
  /** Seed node URLs of a Redis Cluster (cluster mode). */
  cluster?: string[]
  /**
   * A master behind Redis Sentinel (instead of `url` and `cluster`): `name` is the master group
   * the sentinels monitor, `sentinels` their `redis://host:port` URLs (port 26379 by default,
   * no credentials in them), `password` the master's, `sentinelPassword` the sentinels' own.
   * The store follows a failover at the sentinels' `+switch-master`; from the moment a sentinel
   * starts promoting a replica until the store is on it, calls fail with ERR_STORE_UNAVAILABLE
   * (answered by `whenDown`): what the old master would count then could be lost.
   */
  sentinel?: {
    name: string
    sentinels: string[]
    password?: string
    sentinelPassword?: string
  }
  /**
   * TLS for `rediss://` URLs: PEM text (strings or Buffers). `ca`: the CAs to trust instead of
   * the system's; `cert` + `key`: a client certificate (`tls-auth-clients`);
   * `rejectUnauthorized: false` accepts any server certificate (default true). The key is kept
   * in no property and shown in no error.
   */
  tls?: {
    ca?: string | Buffer | (string | Buffer)[]
    cert?: string | Buffer
    key?: string | Buffer
    rejectUnauthorized?: boolean
  }
  /**
   * A server whose maxmemory-policy may evict sluice's keys (anything but `noeviction`):
   * 'warn' (default) emits a 'warning' (ERR_CONFIG_RISK) after connect; 'refuse' makes
   * connect reject with ERR_INVALID_CONFIG. A policy that cannot be read (INFO refused) is a
   * warning either way, never a failure.
   */
  evictingServer?: 'warn' | 'refuse'
  /** Connections in the pool, 1..64, default 2. */
  poolSize?: number
  /** Deadline of every call, ms, default 2000: ERR_TIMEOUT past it. */
  commandTimeoutMs?: number
  /** Deadline of connect(), ms, default 5000: ERR_STORE_UNAVAILABLE past it. */
  connectTimeoutMs?: number
  /**
   * Default true: a standalone `redis://` store also opens one connection driven on the JS
   * thread (no thread hand-off per round trip) and sends its calls there while it is up; the
   * pool serves while it is down, and always for clusters and `rediss://`.
   */
  directConnection?: boolean
  /**
   * What calls get while Redis is down (default 'error'). 'error': they reject with
   * ERR_STORE_UNAVAILABLE; 'allow': admitted (fail open); 'deny': refused until the next
   * probe (fail closed; pace() rejects, it cannot refuse); 'local': decided by an embedded
   * store in this process with the same options, counting from zero when the outage began.
   * Every answer given without Redis has `degraded: true`.
   */
  whenDown?: 'error' | 'allow' | 'deny' | 'local'
  /** While Redis is down, how often a probe checks whether it is back, ms (10..600000), default 1000. */
  probeIntervalMs?: number
  /**
   * Hot-key relief: a key Redis refused with a retry hint is refused in this process until
   * then, with no round trip (check(), rateLimit(), sliding check()). Never admits more than
   * Redis would; a reset() made by another process is not seen until the hint runs out.
   * true keeps up to 100000 keys; `{ maxKeys }` sets the bound.
   */
  localDenyCache?: boolean | { maxKeys?: number }
  /** How often this process writes its statistics, ms (10..600000), default 5000; and on close(). */
  statsFlushMs?: number
  /** How long statistics and the limiter list live after their last write, ms, default 7 days. */
  statsTtlMs?: number
}

/** How a store's calls went out: `calls` in `batches` native calls, `direct` of them on the direct connection. */
export interface Batching {
  calls: number
  batches: number
  direct: number
}

/**
 * A Redis or Redis Cluster store over one native connection pool. Once a call finds Redis
 * unreachable, the circuit opens (`status` 'down', event 'down'): no call waits for Redis
 * until a probe finds it back ('up'); meanwhile `whenDown` answers.
 */
export declare class RedisStore {
  private constructor()
  /** 'down' from the call that found Redis unreachable until a probe gets an answer. */
  readonly status: 'up' | 'down'
  readonly whenDown: 'error' | 'allow' | 'deny' | 'local'
  /** Calls the local deny cache answered (refused) without a round trip. */
  readonly localDenials: number
  /**
   * What connect found risky (each an ERR_CONFIG_RISK SluiceError, also emitted as 'warning'
   * just after connect resolves): a server whose maxmemory-policy evicts keys, or a policy
   * that could not be read (said once).
   */
  readonly warnings: readonly SluiceError[]
  on(event: 'down', listener: (error: SluiceError) => void): this
  on(event: 'up', listener: () => void): this
  on(event: 'warning', listener: (warning: SluiceError) => void): this
  once(event: 'down', listener: (error: SluiceError) => void): this
  once(event: 'up', listener: () => void): this
  once(event: 'warning', listener: (warning: SluiceError) => void): this
  off(event: 'down' | 'up' | 'warning', listener: (...args: any[]) => void): this
  /**
   * Connects and waits until every connection is up. Redis unreachable within
   * connectTimeoutMs: ERR_STORE_UNAVAILABLE under whenDown 'error' (the default); under any
   * other policy the store is returned with `status` 'down' and keeps dialling.
   */
  static connect(options?: RedisStoreOptions | string): Promise<RedisStore>
  readonly keyPrefix: string
  /** The operators' rules (limit overrides, shadow mode, allow and deny): live control, DESIGN §9. */
  readonly rules: Rules
  readonly clock: ManualClock | null
  readonly isCluster: boolean
  /** How the calls made so far were batched (calls per native call = calls / batches). */
  readonly batching: Batching
  /** The limiters used within statsTtlMs through any store with this key prefix, most recently used first. */
  limiters(): Promise<LimiterInfo[]>
  /** Statistics events this store could not write (it closed while Redis was down). */
  readonly statsDropped: number
  /** Closes the pool; later calls reject with ERR_CLOSED. */
  close(): Promise<void>
}

export type Store = MemoryStore | RedisStore
