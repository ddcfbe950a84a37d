// The kind contract: what a kind file (lib/kinds/<kind>.js) gives the stores and the sites
// above them, once per kind. Every kind file's object is checked against `Kind` by tsc
// (`@satisfies`, tsconfig.contracts.json); lib/kinds/kind.js holds what the kind files share.
//
// A kind is a plain object with three parts:
// - what the stores run (lib/store/store.d.ts `BatchedKind`: code, name, lane, memory, encode,
//   settle, keyOf, whenDown; optional cached, alone);
// - what the registry and statistics read (`statsKinds`, `lifetimeMs`, optional `statsFields`);
// - optional sections for the sites above the stores: `door` (the HTTP doors), `inspect` (the
//   CLI, sluice/dashboard, sluice/metrics), `bullmq` (sluice/bullmq). A kind with nothing to
//   say for a site omits its section.
//
// The classes a kind builds are a layer above it: a site passes them in as `classes` (the
// package's exports, lib/classes/index.js), so a kind file names them and never requires them.
// See lib/kinds/index.js `classEntry` for how a limiter object finds its section's entry.

import type { BatchedKind, Store } from '../store/store'
import type { LimiterStats } from '../entries/types/store'

export type { Batch, BatchedKind, AloneKind, StoreKind, WhenDownPolicy } from '../store/store'

/** The names of the public classes (lib/classes/index.js), as the package exports them. */
export type ClassName =
  | 'DistributedPacer'
  | 'PacerComposite'
  | 'BucketLimiter'
  | 'WindowLimiter'
  | 'LeakyLimiter'
  | 'PointsLimiter'
  | 'UnlimitedLimiter'
  | 'ConcurrentLimiter'
  | 'Lease'
  | 'SlidingWindowLimiter'
  | 'SlidingCounterLimiter'
  | 'QuotaLimiter'
  | 'FairTenant'
  | 'Budget'

/**
 * The public classes by name, as a site passes them to a kind's sections. (Typed loosely: the
 * classes are a layer above the kinds; what a kind calls on the limiters it makes is theirs.)
 */
export type Classes = { readonly [N in ClassName]: new (...args: any[]) => any }

/** A limiter object a section makes or is given (an instance of one of `Classes`). */
export type Limiter = any

/** A registry entry (`store.limiters()`): `{ kind, name, options, lastUse? }`, options as the kind wrote them. */
export interface Info {
  kind: string
  name: string
  options: any
  lastUse?: number
}

// --- The kind ------------------------------------------------------------------------------

/**
 * A kind of store call, as listed in the registry (lib/kinds/index.js `KINDS`, in the order and
 * with the codes of src/store/kinds/mod.rs). `C` is its call, `R` its decoded result.
 */
export interface Kind<C = any, R = any> extends BatchedKind<C, R>, Registered {
  /** The class of its calls (what its classes construct and pass to `store._call`). */
  readonly Call: new (...args: any[]) => C
  /**
   * Optional: its operation codes by name, as the native registry exports them
   * (src/store/kinds/<kind>: `OPS`, lib/kinds/kind.js `OPS`).
   */
  readonly OP?: Readonly<Record<string, number>>
}

/** What the registry, statistics and the sites read of a kind (a store kind or `door`). */
export interface Registered {
  /** Its name (the native registry's, for a store kind). */
  readonly name: string
  /** The statistics kinds it counts under (`store.limiters()`' `kind`), one or more. */
  readonly statsKinds: readonly string[]
  /**
   * How long the store keeps a limiter's state, ms, from its registry options (its
   * `_statsOptions()`): what its statistics live at least (0: unknown).
   */
  lifetimeMs(options: any): number
  /** Optional: counters its statistics hold besides the common ones (lib/store/stats.js). */
  readonly statsFields?: readonly string[]
  /** Optional: what the HTTP doors make and decide with it (lib/doors/http/). */
  readonly door?: DoorSection
  /** Optional: what the inspecting tools read of its limiters (lib/doors/inspect.js, sluice/metrics). */
  readonly inspect?: InspectSection
  /** Optional: how sluice/bullmq uses its classes, by class name. */
  readonly bullmq?: { readonly [N in ClassName]?: BullmqEntry }
}

/**
 * Members a kind gives beyond the contract, named where its object is checked: constants and
 * call classes its own classes read (`OP`, `MODE`, `ALGORITHM`, ...), sub-kinds (`limit.group`).
 * Anything else in a kind's object is a mistake tsc reports.
 */
export type Own<K extends string> = { readonly [P in K]: unknown }

// --- door: the HTTP doors ------------------------------------------------------------------

/** A window of a door's decision, filled by the kind (`remaining`, `resetMs`) for the headers. */
export interface DoorWindow {
  /** The policy's name in the draft-8/10 headers. */
  name: string
  limit: number
  windowMs: number
  /** What is left after this request (filled by the kind). */
  remaining?: number
  /** ms until the window is full again (refused: until a retry would be admitted). */
  resetMs?: number
  /** The count, when the door counts every request (past the limit after refusals). */
  used?: number
}

/**
 * An HTTP door's answer for a request (lib/doors/http/outcome.js `outcome`): made by
 * `DoorSite.outcome`, returned by a section's `check`.
 */
export interface DoorOutcome {
  allowed: boolean
  /** Decided without Redis (whenDown). */
  degraded: boolean
  key: string
  weight: number
  windows: DoorWindow[]
  /** The window the single-window headers describe: the one with fewest remaining. */
  main: number
  retryAfterMs: number
  /** Gives the charge back (skipFailedRequests, skipSuccessfulRequests), or null. */
  refund: (() => Promise<unknown>) | null
  /** When the request was decided, ms on the store's clock. */
  at: number
  /** @fastify/rate-limit's count over the limit (continueExceeding, ban). */
  exceeded?: number
  /** Past `ban` refusals (a 403). */
  banned?: boolean
  /**
   * A door's `ban: { after, withinMs, forMs }`: the refusals of this client counted fleet-wide
   * within `withinMs`, this one included, when the kind tallied them in its decision's call.
   */
  refusals?: number
}

/** Where a door's `ban` tallies a client's refusals: a window key in the slot of its counters. */
export interface DoorTally {
  key: string
  /** The tally's limit (no count reaches it): the refusals are `limit - remaining`. */
  limit: number
  intervalUs: number
}

/** What a door's section is given as `door`: the HTTP door deciding (lib/doors/http/door.js `Door`). */
export interface DoorSite {
  readonly config: {
    /** skipFailedRequests or skipSuccessfulRequests: admitted charges may be given back. */
    readonly refunds: boolean
    /** `ban: { after, withinMs, forMs }`, or null: refusals are to be tallied (tallyOf). */
    readonly ban: { after: number; withinMs: number; forMs: number } | null
  }
  /**
   * Where the refusals of counter `name` (a door key's) are tallied for `ban`, in its hash
   * slot: a kind whose script can count them with the decision does (DoorOutcome.refusals);
   * the door counts them apart otherwise.
   */
  tallyOf(name: string): DoorTally
  /** The outcome of a decision; `refund`: what gives the charge back, or null. */
  outcome(
    key: string,
    weight: number,
    windows: DoorWindow[],
    allowed: boolean,
    degraded: boolean,
    retryAfterMs: number,
    refund: (() => Promise<unknown>) | null,
    at: number,
  ): DoorOutcome
  /**
   * What gives an admitted counter decision `d` of `limiter` back when the door refunds (else
   * null), tied to the window charged (`at`: when the request was decided).
   */
  refundOf(limiter: Limiter, weight: number, d: any, at: number): (() => Promise<unknown>) | null
  /** `at` (the store's clock, ms) on the monotonic clock refunds measure time with. */
  elapsedAt(at: number): number
  /** Windows of a limiter(req) limiter, named for the headers (from the door's identifier). */
  named(windows: DoorWindow[]): DoorWindow[]
  /** The error of a limiter(req) limiter that cannot refund while the door is asked to. */
  noRefund(): Error
}

/** A door `algorithm` (`algorithm: 'fixed'`, ...): the limiters made per door key and their decision. */
export interface DoorAlgorithm {
  /** Where it is listed in messages (ascending). */
  readonly order: number
  /** Whether skipFailedRequests / skipSuccessfulRequests are allowed (its charges can be given back). */
  readonly refunds: boolean
  /** Optional, default true: false when a door of it has no `resetKey` (its counters cannot be named back). */
  readonly resettable?: boolean
  /** Optional, default false: a door of one window of it may lease (the door's `lease` option, DESIGN §11). */
  readonly leases?: boolean
  /**
   * The limiter (or an object holding several) of counter `name` for a door key of `windows`
   * (1..16, each `{ limit, windowMs }`), on `store`. Each limiter object made (`members`) has
   * `_uncounted()`: the door keeps its clients' counters out of statistics. `lease`: the door's
   * (`{ maxTokens (null: adaptive), maxAgeMs }`) when it leases, given to an algorithm that `leases`.
   */
  make(
    classes: Classes,
    store: Store,
    name: string,
    windows: { limit: number; windowMs: number }[],
    lease?: { maxTokens: number | null; maxAgeMs: number } | null,
  ): Limiter
  /** Optional: the limiter objects `make` made (what a cache entry holds); default: the limiter itself. */
  members?(limiter: Limiter): Limiter[]
  /** Decides a request of `weight` on `limiter`: fills each window's `remaining` and `resetMs`. */
  check(
    door: DoorSite,
    limiter: Limiter,
    key: string,
    weight: number,
    windows: DoorWindow[],
    at: number,
  ): Promise<DoorOutcome>
}

/** A class `limiter(req)` may return, and how a door decides with it. */
export interface DoorLimiterEntry {
  /** Whether skipFailedRequests / skipSuccessfulRequests are allowed with it. */
  readonly refunds: boolean
  /** Decides a request on it; its windows named by `door.named(...)`; null: not limited. */
  check(door: DoorSite, limiter: Limiter, key: string, weight: number, at: number): Promise<DoorOutcome | null>
}

export interface DoorSection {
  /** The door algorithms this kind serves, by the name users give (`algorithm`). */
  readonly algorithms?: Readonly<Record<string, DoorAlgorithm>>
  /** What `limiter(req)` may return of this kind's classes, by class name. */
  readonly limiters?: { readonly [N in ClassName]?: DoorLimiterEntry }
}

// --- inspect: the CLI, sluice/dashboard, sluice/metrics -------------------------------------

/** A live state: what the limiter holds now, read without charging; `fill` 0..1 (null: no single fill). */
export type InspectState = { fill: number | null } & Record<string, unknown>

/** Words for numbers and durations (lib/doors/inspect.js `WORDS`). */
export interface Words {
  count(n: number): string
  ms(ms: number): string
  interval(ms: number): string
}

/** What the HTTP doors give the door kind's `keyLimiter` (lib/doors/inspect.js). */
export interface HttpDoors {
  /** Every door algorithm by name (every kind's `door.algorithms`). */
  readonly algorithms: ReadonlyMap<string, DoorAlgorithm>
  /** The name of the counter of door `name`'s client `key`. */
  counterName(name: string, key: string): string
}

export interface InspectSection {
  /** A limiter object for a registry entry (null: the kind has none, e.g. a quota prefix, a door). */
  limiter(classes: Classes, store: Store, info: Info): Limiter | null
  /** Optional: the entry's statistics (default: the limiter's `stats()`). */
  stats?(classes: Classes, store: Store, info: Info): Promise<LimiterStats>
  /** Optional: one client's counter of an HTTP door's entry, by the client's key (null: none). */
  keyLimiter?(classes: Classes, store: Store, info: Info, key: string, http: HttpDoors): Limiter | null
  /** Optional: the limiter's live state (default: `{ fill: null }`). */
  state?(limiter: Limiter, info: Info): Promise<InspectState>
  /** Its limit in words, from its registry options (`per(ms)`: an interval in words). */
  limitText(options: any, per: (ms: number) => string, info: Info): string
  /** Optional: a state (`state`'s) in words (default ''). */
  words?(state: any, f: Words): string
  /** Optional, default false: `reset()` forgets its counts (the CLI's `reset`). */
  readonly resettable?: boolean
  /** Optional: leases held now (sluice/metrics' `sluice_leases_held`). */
  leasesHeld?(limiter: Limiter): Promise<number>
  /** Optional: per dimension `{ used, reserved, excess }`, read now (sluice/metrics). */
  dimensionUse?(limiter: Limiter): Promise<Record<string, { used: number; reserved: number; excess: number }>>
  /** Optional: per active tenant, its use per dimension (`{ used: { [dimension]: n } }`), read now (sluice/metrics). */
  tenantUse?(limiter: Limiter): Promise<Record<string, { used: Record<string, number> }>>
  /** Optional: this process's keys on `store` with their rates (sluice/metrics). */
  rates?(store: Store): { key: string; qps: number | null; learnedQps: number | null }[]
}

// --- bullmq: sluice/bullmq ------------------------------------------------------------------

/** How sluice/bullmq uses a class. */
export interface BullmqEntry {
  /** 'rate': a limit per interval; 'pacer': spaced starts; 'concurrent': a lease per job. */
  readonly role: 'rate' | 'pacer' | 'concurrent'
  /** A rate limiter's sustained rate, per second (role 'rate'). */
  rateOf?(limiter: Limiter): number
  /** A pacer's spacing of starts, ms (role 'pacer'; default 1000 / rateOf). */
  spacingMs?(limiter: Limiter): number
  /** Optional: its admissions can be taken ahead (Bucket, Window). */
  readonly prefetch?: boolean
  /** Optional: it charges later slots (Leaky, Points): a job waits for its slot. */
  readonly reserves?: boolean
  /** Optional: it paces (`pace()`), a DistributedPacer. */
  readonly paces?: boolean
  /** Optional: the limiters it is made of (a PacerComposite's pacers); default: itself. */
  members?(limiter: Limiter): Limiter[]
}
