'use strict'
// The per-key gate of sluice/fetch: waits for a key's slot (a DistributedPacer shared by every
// process on the store), reads each response (Retry-After, learned limits) and blocks the key
// fleet-wide when the upstream asks, and counts what happened per key. `Door` holds the gates
// of one pacedFetch or interceptor.

const { DistributedPacer } = require('../pacer')
const { OverLimitError, SluiceError } = require('../errors')
const { nowMs, sleep, aborted } = require('../limiter')
const { learn } = require('./headers')
const { keyLimits, MAX_QPS } = require('./options')

/** A key with no rate of its own still has a pacer: it holds the fleet's blocks. */
const UNPACED_QPS = MAX_QPS
/** A learned rate is paced at this share of what the upstream states (jitter on the way there). */
const LEARNED_SHARE = 0.98
/** A learned limit is forgotten this long after the last response that stated it (at least one window). */
const LEARNED_TTL_MS = 60_000
const MAX_KEY_LENGTH = 500
/** Gates kept per door; the oldest is dropped past this (its counts with it). */
const MAX_GATES = 10_000
/** Without Retry-After, a retry waits this long (doubling per attempt, capped by maxBlockMs) in this process. */
const BACKOFF_MS = 250
/** Two blocks of one key whose ends are this close are the same block (reported twice). */
const SAME_BLOCK_MS = 5

class Gate {
  constructor(door, key, limits) {
    this.door = door
    this.key = key
    this.qps = limits ? limits.qps : door.config.qps // the ceiling (undefined: none)
    this.maxBurst = limits ? limits.maxBurst : door.config.maxBurst
    this.learned = null // { limit, windowMs, untilMs }
    this.windowMs = 0 // the longest reset seen while no window is stated, and until when
    this.windowUntilMs = 0
    this.blockedUntilMs = 0 // the latest block this process recorded, on the store's clock
    this.blockSetMs = -Infinity // when it was recorded
    this.counts = {
      calls: 0,
      waited: 0,
      waitTimeMs: 0,
      throttled: 0,
      blocks: 0,
      retries: 0,
      refused: 0,
      hostile: 0,
      degraded: 0,
      errors: 0,
    }
    this._pacer = null
  }

  /** The rate this key is paced at now, per second (Infinity: unpaced, blocks only). */
  rate(now) {
    let r = this.qps === undefined ? Infinity : this.qps
    const l = this.learned
    if (l !== null) {
      if (l.untilMs <= now) this.learned = null
      else r = Math.min(r, ((l.limit * 1000) / l.windowMs) * LEARNED_SHARE)
    }
    return r
  }

  pacer(now) {
    const r = this.rate(now)
    const qps = Number.isFinite(r) ? r : UNPACED_QPS
    if (this._pacer === null || this._pacer._qps !== qps) {
      // unpaced: calls go at once (a burst as large as the rate), and wait only for blocks
      const maxBurst = Number.isFinite(r) ? this.maxBurst : UNPACED_QPS
      this._pacer = new DistributedPacer(this.door.store, { key: `fetch:${this.key}`, qps, maxBurst })
    }
    return this._pacer
  }

  overLimit(delayMs) {
    this.counts.refused++
    return new OverLimitError(`${this.key}: the next slot is ${delayMs} ms away, over maxWaitMs`, {
      limiter: this.key,
      retryAfterMs: delayMs,
    })
  }

  /**
   * Waits for this key's slot (and past any block) for a call or a retry, honouring `signal` (ERR_ABORTED); over
   * `maxWaitMs`: OverLimitError, nothing reserved when it can be told up front.
   */
  async admit(signal) {
    const { store, config } = this.door
    const maxWaitMs = config.maxWaitMs
    for (let round = 0; ; round++) {
      const reservedMs = nowMs(store)
      const p = this.pacer(reservedMs)
      if (maxWaitMs !== Infinity) {
        // a probe charges nothing: no slot is taken that would not be waited for
        const probe = await p.rateLimit(0)
        if (probe.delayMs > maxWaitMs) throw this.overLimit(probe.delayMs)
      }
      if (signal && signal.aborted) throw aborted(signal)
      const o = await p.pace()
      if (o.degraded && round === 0) this.counts.degraded++
      if (o.delayMs > maxWaitMs) throw this.overLimit(o.delayMs)
      if (o.delayMs > 0) {
        this.counts.waited++
        this.counts.waitTimeMs += o.delayMs
      }
      // unpaced, slots are a nanosecond apart: a 1 ms delay is only the rounding up to whole ms
      if (o.delayMs > 1 || p._qps !== UNPACED_QPS) await sleep(store, o.delayMs, signal)
      // a block recorded after this slot was taken (by a response of this process) and not
      // over yet: the slot is spent, take one after the block
      if (this.blockSetMs >= reservedMs && this.blockedUntilMs > nowMs(store) && round < 8) continue
      return
    }
  }

  /**
   * Reads a response: counts a throttled status, learns the key's limits (with `learn`), and
   * blocks the key fleet-wide for what Retry-After or an exhausted quota asks (capped at
   * `maxBlockMs`). Returns the block's ms (0: none). Never throws.
   */
  async observe(status, get) {
    const { store, config } = this.door
    const throttled = status === 429 || status === 503
    if (throttled) this.counts.throttled++
    const now = nowMs(store)
    let l
    try {
      l = learn(get, now, config.maxBlockMs)
    } catch {
      this.counts.hostile++
      return 0
    }
    this.counts.hostile += l.hostile
    if (config.learn) this.remember(l, now)
    // Retry-After counts on a throttled answer; an exhausted quota (learned) on any
    const blockMs = throttled || config.learn ? l.blockMs : 0
    if (blockMs > 0) await this.block(blockMs, now)
    return blockMs
  }

  /** Keeps what a response stated about the key's limits, for `LEARNED_TTL_MS` (or a window) after it. */
  remember(l, now) {
    let policy = l.policy
    if (policy === null && l.quota !== null) {
      // no window stated: the longest reset seen lately stands for it
      if (this.windowUntilMs <= now) this.windowMs = 0
      this.windowMs = Math.max(this.windowMs, l.quota.resetMs, 1000)
      this.windowUntilMs = now + Math.max(LEARNED_TTL_MS, this.windowMs)
      policy = { limit: l.quota.limit, windowMs: this.windowMs }
    }
    if (policy !== null) {
      this.learned = {
        limit: policy.limit,
        windowMs: policy.windowMs,
        untilMs: now + Math.max(LEARNED_TTL_MS, policy.windowMs),
      }
    }
  }

  /** Blocks the key for `ms` in every process; a block this process already recorded is not sent again. */
  async block(ms, now) {
    const until = now + ms
    if (until <= this.blockedUntilMs + SAME_BLOCK_MS) return
    this.blockedUntilMs = until
    this.blockSetMs = now
    this.counts.blocks++
    try {
      await this.pacer(now).block(ms)
    } catch {
      this.counts.errors++ // the response still reaches the caller; the store's state is its own concern
    }
  }

  /** ms a retry waits in this process beyond the key's pacer (no Retry-After nor reset was given). */
  backoffMs(attempt, blockMs) {
    if (blockMs > 0) return 0
    return Math.min(BACKOFF_MS * 2 ** attempt, this.door.config.maxBlockMs)
  }

  stats() {
    const now = nowMs(this.door.store)
    const r = this.rate(now)
    const out = { key: this.key, ...this.counts, qps: Number.isFinite(r) ? r : null }
    if (this.learned !== null) out.learned = { limit: this.learned.limit, windowMs: this.learned.windowMs }
    if (this.blockedUntilMs > now) out.blockedMs = this.blockedUntilMs - now
    return out
  }
}

/** The gates of one pacedFetch or interceptor, by key. */
class Door {
  constructor(config) {
    this.config = config
    this.store = config.store
    this.gates = new Map()
  }

  /** The key of a call (`key(url, init)` or the origin), checked: a bad one fails the call. */
  keyOf(url, init) {
    const key = this.config.key === null ? url.origin : this.config.key(url, init)
    if (typeof key !== 'string' || key.length === 0 || key.length > MAX_KEY_LENGTH || !key.isWellFormed()) {
      throw new SluiceError(
        'ERR_INVALID_ARGUMENT',
        `key(url, init) must return a non-empty string of at most ${MAX_KEY_LENGTH} characters, with no lone surrogate`,
      )
    }
    return key
  }

  /** The gate of `key`, made on first use (`limits(key)` asked then). */
  async gate(key) {
    let g = this.gates.get(key)
    if (g !== undefined) return g
    const make = (m) => new SluiceError('ERR_INVALID_ARGUMENT', m)
    const limits = this.config.limits === null ? null : keyLimits(await this.config.limits(key), make)
    g = this.gates.get(key) // made by another call meanwhile
    if (g !== undefined) return g
    if (this.gates.size >= MAX_GATES) this.gates.delete(this.gates.keys().next().value)
    g = new Gate(this, key, limits)
    this.gates.set(key, g)
    return g
  }

  /** Whether a call answered `status` with `method` may be retried, as attempt `attempt` (0-based). */
  retries(status, method, attempt) {
    const r = this.config.retry
    return r !== null && attempt < r.maxRetries && r.statuses.has(status) && r.methods.has(method)
  }

  async stats(key) {
    if (key !== undefined) {
      const g = this.gates.get(key)
      return g === undefined ? [] : [g.stats()]
    }
    return [...this.gates.values()].map((g) => g.stats())
  }
}

module.exports = { Door, Gate }
