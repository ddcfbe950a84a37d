'use strict'
// FairTenant: routes a tenant's jobs to slower queues past a rule's threshold. Its calls are the
// fair kind's (lib/kinds/fair.js).

const { invalidConfig, invalidArgument, knownOptions, gotValue } = require('../base/errors')
const { classOptions, checkInteger, plainObject, MAX_MS, DAY_MS } = require('./base')
const FAIR = require('../kinds/fair')
const { MAX_LIMIT } = require('../store/bounds')
const { escapeKey, taggedKey } = require('../store/keys')

const MAX_RULES = 64
const MAX_TENANT = 256
const MAX_JOB_ID = 256
/** Granules per rule window by default ('approximate'). */
const DEFAULT_GRANULES = 60
/** Most granules a rule window may span (the store's bound). */
const MAX_GRANULES = 100_000
const MODES = ['exact', 'approximate']

const has = (o, k) => Object.prototype.hasOwnProperty.call(o, k)

function own(o, k) {
  return has(o, k) ? o[k] : undefined
}

/** `text` as a key part that cannot leave its hash tag: well-formed UTF-16 required. */
function keyPart(what, text, max) {
  if (typeof text === 'number' && Number.isSafeInteger(text) && text >= 0) text = String(text)
  if (typeof text !== 'string' || text.length < 1 || text.length > max) {
    throw invalidArgument(`${what} must be a string of 1..${max} characters`)
  }
  if (!text.isWellFormed()) throw invalidArgument(`${what} must not hold a lone surrogate`)
  if (text.includes('\n')) throw invalidArgument(`${what} must not hold a newline`)
  return text
}

/**
 * Fair multi-tenant routing (sidekiq-fair_tenant's idea): each job of a tenant is registered
 * by its id, and when the tenant has enqueued more than a rule's `threshold` jobs within the
 * rule's sliding window of `perMs`, the job is routed to the rule's (slower) queue instead of
 * the default one. Every rule is evaluated and the last matching one wins, so order them
 * from least to most restrictive. A job is counted in the tenant's windows whatever queue it
 * gets. One store round trip per assignment, atomic (registration and counts together).
 *
 * Modes:
 * - `'exact'` (default): a log of job ids per tenant, as the gem. Registering an id again (a
 *   retried or re-added job) never counts twice. Memory: one entry per job within the longest
 *   window (Redis: about 60-120 bytes each).
 * - `'approximate'`: counters per granule per tenant, each rule's window in 60 granules
 *   (`perMs / 60`) unless `granularityMs` sets one length for all. Memory is bounded by the
 *   granules (about 61 counters per rule), whatever the number of jobs; a window counts its
 *   newest whole granules, so a count can miss the jobs of up to two granules at the window's
 *   old edge (one when the granularity divides the window), never counts a job older than
 *   the window, and a re-added id counts again.
 */
class FairTenant {
  constructor(store, options) {
    const known = ['name', 'rules', 'maxWindowMs', 'mode', 'granularityMs']
    const o = classOptions(store, options, known, 'fair tenant')
    const name = o.name
    const maxWindow = o.maxWindowMs
    const maxWindowMs = maxWindow === undefined ? DAY_MS : checkInteger('maxWindowMs', maxWindow, 1, MAX_MS)
    const mode = o.mode === undefined ? 'exact' : o.mode
    if (!MODES.includes(mode)) throw invalidConfig(`mode must be 'exact' or 'approximate', ${gotValue(mode, MODES)}`)
    const rules = o.rules
    if (!Array.isArray(rules) || rules.length < 1 || rules.length > MAX_RULES) {
      throw invalidConfig(`rules must be an array of 1..${MAX_RULES} { queue, threshold, perMs }`)
    }
    this._rules = Object.freeze(
      Array.from(rules, (rule, i) => {
        if (!plainObject(rule)) throw invalidConfig(`rules[${i}] must be an object { queue, threshold, perMs }`)
        knownOptions(rule, ['queue', 'threshold', 'perMs'], 'rule', { where: ` in rules[${i}]` })
        const queue = own(rule, 'queue')
        if (typeof queue !== 'string' || queue.length === 0) {
          throw invalidConfig(`rules[${i}].queue must be a non-empty string`)
        }
        const threshold = checkInteger(`rules[${i}].threshold`, own(rule, 'threshold'), 0, MAX_LIMIT)
        const per = own(rule, 'perMs')
        const perMs =
          per === undefined
            ? maxWindowMs
            : checkInteger(`rules[${i}].perMs`, per, 1, maxWindowMs, (m) =>
                invalidConfig(`${m} (at most maxWindowMs: older jobs are not kept)`),
              )
        return Object.freeze({ queue, threshold, perMs })
      }),
    )
    const pers = rules.map((r, i) => this._rules[i].perMs)
    const shortest = Math.min(...pers)
    const granularity = o.granularityMs
    let granularities = pers.map(() => 0)
    if (mode === 'approximate') {
      if (granularity === undefined) {
        // each rule counts in 60 granules of its own window
        granularities = pers.map((per) => Math.max(1, Math.floor(per / DEFAULT_GRANULES)))
      } else {
        checkInteger('granularityMs', granularity, 1, shortest, (m) =>
          invalidConfig(`${m} (at most the shortest rule window)`),
        )
        for (const per of pers) {
          if (per / granularity > MAX_GRANULES) {
            throw invalidConfig(
              `a rule window of ${per} ms holds more than ${MAX_GRANULES} granules of ${granularity} ms: raise granularityMs`,
            )
          }
        }
        granularities = pers.map(() => granularity)
      }
      this._rules = Object.freeze(this._rules.map((r, i) => Object.freeze({ ...r, granularityMs: granularities[i] })))
    } else if (granularity !== undefined) {
      throw invalidConfig("granularityMs applies to mode 'approximate' only")
    }
    this._store = store
    this._name = name
    this._mode = mode
    this._maxWindowMs = maxWindowMs
    this._granularityMs = mode === 'approximate' ? Math.min(...granularities) : 0
    this._segment = mode === 'exact' ? 'fair' : 'fair-approx'
    this._statsKind = 'fair'
    this._statsName = name
    const nums = [FAIR.MODE[mode], pers.length]
    pers.forEach((per, i) => nums.push(per, granularities[i]))
    this._nums = Float64Array.from(nums)
  }

  /** The name. */
  get name() {
    return this._name
  }

  /** The rules, as configured (with `perMs` filled in, and `granularityMs` in 'approximate' mode). */
  get rules() {
    return this._rules
  }

  /** `'exact'` or `'approximate'`. */
  get mode() {
    return this._mode
  }

  /** The finest granule length of `'approximate'` mode, ms (0 in `'exact'` mode). */
  get granularityMs() {
    return this._granularityMs
  }

  /** @internal the options shown by `store.limiters()` */
  _statsOptions() {
    return { mode: this._mode, rules: this._rules }
  }

  /**
   * Statistics over every process: `admitted` counts jobs left in their default queue,
   * `refused` jobs re-routed by a rule.
   */
  stats() {
    return this._store._statsOf('fair', this._name)
  }

  /** The store key of `tenant`'s record. */
  _storeKey(tenant) {
    return taggedKey(this._store, this._segment, `${escapeKey(this._name)}:${encodeURIComponent(tenant)}`)
  }

  /**
   * Registers job `jobId` of `tenant` and routes it: the queue of the last rule whose
   * threshold the tenant's count in the rule's window (this job included) exceeds, or
   * `defaultQueue`. Resolves with `{ queue, rule, counts, degraded }`: `rule` is the index
   * of the rule that matched (-1: none), `counts` the tenant's count per rule, `degraded`
   * true when counted without Redis (see RedisStore's `whenDown`).
   */
  route(tenant, jobId, defaultQueue) {
    let call
    try {
      tenant = keyPart('tenant', tenant, MAX_TENANT)
      jobId = keyPart('jobId', jobId, MAX_JOB_ID)
      if (typeof defaultQueue !== 'string' || defaultQueue.length === 0) {
        throw invalidArgument('defaultQueue must be a non-empty string')
      }
      call = new FAIR.Call(this._storeKey(tenant), jobId, this._nums)
    } catch (err) {
      return Promise.reject(err)
    }
    // no await: a MemoryStore's answer is ready, and one promise per route is enough
    return this._store._call(FAIR, call).then((counts) => this._routed(counts, defaultQueue))
  }

  /** @internal the route of a job whose tenant counts are `counts` (counted in statistics) */
  _routed(counts, defaultQueue) {
    let rule = -1
    for (let i = 0; i < this._rules.length; i++) {
      if (counts[i] > this._rules[i].threshold) rule = i
    }
    const book = this._store._stats
    if (book !== null) book.decision(this, rule < 0, 1, false, counts.degraded === true)
    return {
      queue: rule < 0 ? defaultQueue : this._rules[rule].queue,
      rule,
      counts: Array.from(counts),
      degraded: counts.degraded === true,
    }
  }

  /** Registers job `jobId` of `tenant` and resolves with the queue it should go to (see `route`). */
  async assign(tenant, jobId, defaultQueue) {
    return (await this.route(tenant, jobId, defaultQueue)).queue
  }
}

module.exports = { FairTenant }
