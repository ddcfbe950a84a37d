// The store interface: what the layers above the stores (the kinds, the public classes, the
// doors) call on a MemoryStore or a RedisStore, beyond the public surface
// (lib/entries/types/store.d.ts). lib/store/memory.js and lib/store/redis.js are checked
// against it by tsc (`@implements`, tsconfig.contracts.json). Members with `_` are internal to
// the package: no user calls them, and no module above the stores writes them.

import type { ManualClock } from '../base/clock'
import type { StatsBook } from './stats'
import type { Waiters } from './waiters'
import type { DenyCache } from './denycache'
import type { Spares } from './spares'
import type { LimiterInfo, LimiterStats } from '../entries/types/store'

export type { LimiterInfo, LimiterStats } from '../entries/types/store'
import type { SluiceError } from '../base/errors'
import type { ExternalObject } from '../native'

/** A RedisStore's policy while Redis is down (lib/store/whendown.js). */
export type WhenDownMode = 'error' | 'allow' | 'deny' | 'local'

// --- What a store runs: a kind of call ------------------------------------------------------
//
// The stores run the kinds they are given and require none (lib/kinds/ is a layer above):
// this is the part of a kind (lib/kinds/kind.d.ts `Kind`) the stores call. `C` is the kind's
// call (an object its classes make), `R` its decoded result (what `store._call` resolves with).

/** A batch of calls for native (`native.redisCall` / `redisDirect`), in the kind's call layout. */
export interface Batch {
  /** The calls' keys (and other strings) in the codec's encoding (lib/base/codec.js). */
  keys: string
  /** The calls' numbers, in the kind's layout (read by native during the call that sends them). */
  nums: Float64Array
  /** The time to decide at, µs; -1: the server's clock (Redis `TIME`). */
  nowUs: number
}

/**
 * What a kind's `whenDown` answers by while a RedisStore's circuit is open (lib/store/whendown.js
 * `WhenDown`). Batched calls reach `whenDown` under 'allow', 'deny' and 'local' only (under
 * 'error' they reject with `error` before); a call sent alone reaches it under every mode.
 */
export interface WhenDownPolicy {
  readonly mode: WhenDownMode
  /** How long a refusal asks to wait: until the next probe, µs. */
  readonly retryUs: number
  /** The local clock, µs. */
  nowUs(): number
  /** The error of the outage (ERR_STORE_UNAVAILABLE): throw it for a call that needs Redis. */
  readonly error: SluiceError | null
  /** Under 'local', the embedded store deciding during this outage (from zero); else null. */
  readonly local: MemoryStoreInternals | null
}

/** What both sorts of kinds give a store. */
export interface RunsCalls<C, R> {
  /** Its number in the native registry (src/store/kinds/mod.rs): the `kind` of every native call. */
  readonly code: number
  /** Its name, in errors and the registry. */
  readonly name: string
  /** The RedisStore pool connection its calls use (when not on the direct connection). */
  readonly lane: number
  /**
   * Runs one call on an embedded store, synchronously; answers the decoded result. `degraded`:
   * answered for a RedisStore whose Redis is down (whenDown 'local'). Throws what `_call`
   * rejects with (ERR_CLOSED from `store._begin()`, a native error).
   */
  memory(store: MemoryStoreInternals, call: C, degraded: boolean): R
  /** A store key of the call: when it fails, the circuit's probes read a key of its hash slot. */
  keyOf(call: C): string
  /**
   * The answer while Redis is down, by the store-down policy (flagged degraded), or throws (the
   * call rejects: e.g. `policy.error` for what cannot be answered without Redis).
   */
  whenDown(policy: WhenDownPolicy, call: C): R
}

/** A kind whose calls a RedisStore batches (one queue per kind, lib/store/lanes.js). */
export interface BatchedKind<C, R> extends RunsCalls<C, R> {
  /** The batch of `calls` for native, in the kind's call layout. */
  encode(calls: C[], nowUs: number): Batch
  /**
   * Decodes a batch's reply and settles each call (`resolve[i]`/`reject[i]` for `calls[i]`); a
   * call whose wrong-type marker is set rejects with ERR_SCRIPT (lib/kinds/kind.js `wrongType`).
   * `reply`: the numbers (a buffer reused once this returns: copy what is kept), or `{ values,
   * text }` for a kind that answers strings. May throw: every call of the batch then rejects.
   */
  settle(
    store: RedisStoreInternals,
    reply: any,
    calls: C[],
    resolve: ((value: R) => void)[],
    reject: ((error: Error) => void)[],
  ): void
  /**
   * Optional (a kind the local deny cache serves): before a call is queued, the answer of the
   * deny cache (a refusal), or undefined to send it. `atUs`: the local clock.
   */
  cached?(cache: DenyCache, call: C, atUs: number): R | undefined
  /** Optional: how a call with `alone: true` (never batched) is sent, as `AloneKind.alone`. */
  alone?(store: RedisStoreInternals, call: C, nowUs: number): Promise<R>
}

/** A kind whose every call is sent alone, never batched (its calls have `alone: true`). */
export interface AloneKind<C, R> extends RunsCalls<C, R> {
  /** Sends one call on the kind's pool lane (`store._poolCall`); resolves with its decoded result. */
  alone(store: RedisStoreInternals, call: C, nowUs: number): Promise<R>
}

/** What `store._call` runs. A call with `alone: true` goes to `alone`; any other is batched. */
export type StoreKind<C, R> = BatchedKind<C, R> | AloneKind<C, R>

/**
 * What a limiter is to statistics (lib/store/stats.js `StatsBook`): its statistics kind and
 * name, and the options the registry lists with them.
 */
export interface StatsOwner {
  /** The statistics kind (`bucket`, `pacer`, `door`, ...: a `statsKinds` entry of a kind). */
  readonly _statsKind: string
  /** Its name in statistics and the registry (a pacer's key, a door's counter identifier). */
  readonly _statsName: string
  /** The options the registry shows (`store.limiters()`), read when its entry is made. */
  _statsOptions(): object
  /**
   * Absent: counted as itself. null: not counted (an HTTP door's per-client counters, set by
   * the owner's own `_uncounted()`). Another owner: counted as that one.
   */
  readonly _statsAs?: StatsOwner | null
}

/** `{ stats, history }` of one limiter, as the dashboard reads it (`_statsDetail`). */
export interface StatsDetail {
  stats: LimiterStats
  /** One entry per minute of the last 30: admitted and refused in it. */
  history: { t: number; admitted: number; refused: number }[]
}

/** What every store gives the layers above it. */
export interface Store {
  /** Prefix of every key the store writes (public). */
  readonly keyPrefix: string
  /** The clock decisions are made with, or null for the system clock (Redis `TIME`) (public). */
  readonly clock: ManualClock | null

  /**
   * Runs one call of `kind` (a kind object of lib/kinds/, or a sub-kind such as `limit.group`):
   * resolves with the kind's decoded result (`memory`/`settle`/`alone`/`whenDown`'s value),
   * rejects with a SluiceError (ERR_CLOSED once closed, the store's failures, the kind's own).
   * Never throws synchronously.
   */
  _call<C, R>(kind: StoreKind<C, R>, call: C): Promise<R>

  /** The statistics counted in this process, or null when the store was made with `stats: false`. */
  readonly _stats: StatsBook | null
  /**
   * The statistics of `kind:name` (over every process, on Redis); rejects with ERR_CLOSED, or
   * ERR_INVALID_CONFIG when statistics are off.
   */
  _statsOf(kind: string, name: string): Promise<LimiterStats>
  /** Statistics and per-minute history of each `{ kind, name }`, in order (the dashboard). */
  _statsDetail(list: readonly { kind: string; name: string }[]): Promise<StatsDetail[]>

  /** Concurrent limiters' waiters in this process (a RedisStore's also listen on pub/sub). */
  readonly _waiters: Waiters
  /** Slots given back in this process, for the next caller of their key (lib/store/spares.js). */
  readonly _spares: Spares
  /**
   * The local deny cache (`localDenyCache`, a RedisStore's only); null when there is none.
   * The kinds read and fill it in `cached` and `settle`; a door counts refusals only without it.
   */
  readonly _denyCache: DenyCache | null
  /** Whether `close()` has begun: calls reject with ERR_CLOSED. */
  readonly _closed: boolean

  /** A RedisStore's circuit (public): 'down' while Redis is found unreachable. None on a MemoryStore. */
  readonly status?: 'up' | 'down'
  /** A RedisStore's store-down policy (public). None on a MemoryStore. */
  readonly whenDown?: WhenDownMode

  /** The limiters used through the store, newest first (public, lib/entries/types/store.d.ts). */
  limiters(): Promise<LimiterInfo[]>
  /** Statistics events lost (public). */
  readonly statsDropped: number
  /** Closes the store (public): later calls reject with ERR_CLOSED. */
  close(): Promise<void>
}

/**
 * What a kind's `memory` uses of the embedded store (a MemoryStore, or the one a RedisStore
 * decides on under whenDown 'local'): its native handle and the shared I/O buffer of
 * `native.memoryStep`.
 */
export interface MemoryStoreInternals extends Store {
  /** The native embedded store (`native.memoryCall`, `memoryStep`). */
  readonly _handle: ExternalObject<'MemoryStore'>
  /** The numbers in and out of `native.memoryStep` (6): written, stepped, read at once. */
  readonly _io: Float64Array
  /** A call begins: throws ERR_CLOSED once closed; answers the time to decide at, µs (-1: the system clock). */
  _begin(): number
  /** The interned id of `key` for `memoryStep` (interning it, now and then sweeping expired keys). */
  _id(key: string, nowUs: number): number
  /** A call names `keys` keys not interned: sweeps expired keys when that many new keys are due. */
  _sweepFor(keys: number, nowUs: number): void
}

/** What a kind's `settle` and `alone` use of a RedisStore. */
export interface RedisStoreInternals extends Store {
  /**
   * One call of kind `code` outside any batch, on pool lane `lane` (`alone` calls): its
   * numbers (a `MemoryReply`-like `{ values, text }` for kinds that answer strings).
   */
  _poolCall(code: number, text: string, nums: Float64Array, nowUs: number, lane: number): Promise<any>
}
