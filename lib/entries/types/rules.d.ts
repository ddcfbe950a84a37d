// Public types of the store's rules (`store.rules`, DESIGN §9): live control of limits.

/**
 * What a rule applies to. Structured, never one string: names may hold any character.
 * - `{ kind, name }`: one limiter, pacer key, budget or sluice/fetch key (`kind` as
 *   `store.limiters()` names it: 'bucket', 'pacer', ...);
 * - `{ kind, prefix }`: every name of that kind starting with `prefix` (`''`: every name);
 * - `{ door, key }` / `{ door, keyPrefix }` / `{ door }`: one client key of an HTTP door (by
 *   the door's identifier), the keys starting with a prefix, the whole door;
 * - `{ budget, tenant }`: one tenant of a budget.
 */
export type RuleTarget =
  | { kind: RuleKind; name: string }
  | { kind: RuleKind; prefix: string }
  | { door: string; key?: string; keyPrefix?: string }
  | { budget: string; tenant: string }

/** The kinds a `{ kind }` target names. */
export type RuleKind =
  | 'bucket'
  | 'window'
  | 'leaky'
  | 'points'
  | 'sliding'
  | 'sliding-counter'
  | 'concurrent'
  | 'pacer'
  | 'adaptive'
  | 'budget'
  | 'fair'
  | 'quota'

/** What a rule does. The fields a target's kind does not have are refused (ERR_INVALID_ARGUMENT). */
export interface RuleFields {
  /** The limit instead of the limiter's own (Bucket, Window, Leaky, Points, SlidingCounter, Concurrent, a door). */
  limit?: number
  /** The interval instead of the limiter's own, ms (with `limit`, or alone). */
  intervalMs?: number
  /** A sliding window limiter's (or a door's) windows instead of its own. */
  windows?: { limit: number; intervalMs: number }[]
  /** A pacer's (or a sluice/fetch key's) rate and burst. */
  qps?: number
  maxBurst?: number
  /** A budget's (or a budget tenant's) limit per dimension. */
  dimensions?: Record<string, { limit: number }>
  /** 'shadow': decide and count as if enforced, refuse nothing and never wait (`reason: 'shadow'`). */
  mode?: 'enforce' | 'shadow'
  /** 'allow': admitted, nothing charged; 'deny': refused with `reason: 'denied'` (no round trip for either). */
  access?: 'allow' | 'deny'
  /** Who and why (at most 1,024 UTF-8 bytes): shown by the CLI and the dashboard, kept in the history. */
  note?: string
}

/** A rule as listed: its target, its fields, and when it ends (epoch ms, the store's clock). */
export type Rule = RuleFields & { target: RuleTarget; expiresAt?: number }

/** One operator change (`history()`): a rule set, or `rule: null` for a delete. */
export interface RuleChange {
  /** When, epoch ms on the store's clock. */
  at: number
  target: RuleTarget
  rule: Rule | null
  note?: string
}

/**
 * A store's rules (`store.rules`), kept in the store and cached in every process: a change is
 * in force in the process that made it at once, and in every other within a second. The most
 * specific rule applies whole (exact beats prefix, a longer prefix a shorter one); a deny at
 * any level beats everything. At most 100,000 rules (ERR_INVALID_ARGUMENT past it).
 */
export interface Rules {
  /** Sets the target's rule (replacing its rule); `ttlMs`: it ends that long from now. */
  set(target: RuleTarget, rule: RuleFields, options?: { ttlMs?: number }): Promise<void>
  /** Deletes the target's rule; whether there was one. */
  delete(target: RuleTarget): Promise<boolean>
  /** The operator rules in force. */
  list(): Promise<Rule[]>
  /** The HTTP doors' automatic bans in force (as deny rules). */
  bans(): Promise<Rule[]>
  /**
   * Lifts the ban a door's `ban` put on client `key` of door `door` (its identifier), in every
   * process; whether there was one. The client is banned again at its next `after` refusals.
   */
  unban(target: { door: string; key: string }): Promise<boolean>
  /** The last 1,000 operator changes, newest first. */
  history(): Promise<RuleChange[]>
}
