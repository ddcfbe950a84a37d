'use strict'
// QuotaLimiter (Sentry's quotas): its options and results. Its calls are the quota kind's
// (lib/kinds/quota.js).

const { invalidConfig, invalidArgument, ownProps, describeValue, suggestion } = require('../base/errors')
const { checkInteger, checkStore, plainObject } = require('./base')
const { encodeParts } = require('../base/codec')
const QUOTA = require('../kinds/quota')
const { timestamp: TIMESTAMP, size: GRANTS } = QUOTA.RESULT.grants
const { granted: GRANTED, size: REQUEST } = QUOTA.RESULT.request
const { reached: REACHED, size: QUOTA_SIZE } = QUOTA.RESULT.quota
const { taggedKey } = require('../store/keys')

const QUOTA_KEYS = ['windowSeconds', 'granularitySeconds', 'limit', 'prefixOverride']
const MAX_QUOTA = 1e12
const { MAX_INTERVAL_S: MAX_WINDOW_S } = require('../store/bounds')
const MAX_TIMESTAMP = 1e11
const MODE = QUOTA.MODE

function checkPrefix(what, prefix) {
  if (
    typeof prefix !== 'string' ||
    prefix.length === 0 ||
    Buffer.byteLength(prefix) > 1024 ||
    /[{}\n]/.test(prefix) ||
    !prefix.isWellFormed()
  ) {
    throw invalidConfig(`${what} must be a string of 1..1024 bytes without braces, newlines or lone surrogates`)
  }
}

function checkQuota(q, where) {
  if (!plainObject(q)) throw invalidConfig(`${where} must be a Quota object`)
  for (const key of Object.keys(q)) {
    if (!QUOTA_KEYS.includes(key)) {
      throw invalidConfig(`unknown Quota field ${JSON.stringify(key)} in ${where}${suggestion(key, QUOTA_KEYS)}`)
    }
  }
  const window = checkInteger(`${where}.windowSeconds`, q.windowSeconds, 1, MAX_WINDOW_S)
  const granularity = checkInteger(`${where}.granularitySeconds`, q.granularitySeconds, 1, window)
  if (window % granularity !== 0) {
    throw invalidConfig(`${where}.granularitySeconds (${granularity}) must divide windowSeconds (${window})`)
  }
  // limit 0: an empty quota that rejects every request (Sentry uses it to switch a project off)
  checkInteger(`${where}.limit`, q.limit, 0, MAX_QUOTA)
  if (q.prefixOverride !== undefined && q.prefixOverride !== null) {
    checkPrefix(`${where}.prefixOverride`, q.prefixOverride)
  }
}

function checkTimestamp(timestamp, required) {
  if (timestamp === undefined || timestamp === null) {
    if (required) throw invalidArgument('timestamp is required (the one checkWithinQuotas returned)')
    return -1
  }
  if (typeof timestamp !== 'number' || !Number.isFinite(timestamp) || timestamp < 0 || timestamp > MAX_TIMESTAMP) {
    throw invalidArgument(`timestamp must be seconds in [0, ${MAX_TIMESTAMP}], got ${describeValue(timestamp)}`)
  }
  return Math.trunc(timestamp) // as Sentry's int()
}

/**
 * Sentry's sliding-window quotas (`sentry-redis-tools`), with the same granule arithmetic
 * and results, an atomic `checkAndUseQuotas`, validated quotas and a read cost that does not
 * grow with `windowSeconds / granularitySeconds`.
 */
class QuotaLimiter {
  constructor(store) {
    checkStore(store)
    this._store = store
  }

  /**
   * @internal encodes a call: validates the requests (and their amounts), numbers the
   * distinct counters (prefix or override, window, granularity)
   */
  _encode(requests, amounts) {
    if (!Array.isArray(requests)) throw invalidArgument('requests must be an array of RequestedQuota')
    const keys = []
    const index = new Map()
    const shapes = []
    const body = [requests.length]
    // indexes, not forEach: a hole in a sparse array is checked (and refused) like any value
    for (let i = 0; i < requests.length; i++) {
      if (!plainObject(requests[i])) throw invalidArgument(`requests[${i}] must be a RequestedQuota`)
      const r = ownProps(requests[i])
      checkPrefix(`requests[${i}].prefix`, r.prefix)
      if (!Array.isArray(r.quotas) || r.quotas.length === 0) {
        throw invalidConfig(`requests[${i}].quotas must be a non-empty array of Quota`)
      }
      const amount = amounts(r, i)
      body.push(amount, r.quotas.length)
      for (let j = 0; j < r.quotas.length; j++) {
        checkQuota(r.quotas[j], `requests[${i}].quotas[${j}]`)
        const q = ownProps(r.quotas[j])
        const prefix = q.prefixOverride === undefined || q.prefixOverride === null ? r.prefix : q.prefixOverride
        // a prefix holds no brace or newline (checkPrefix) and keeps its `%` as written: its
        // hash tag as it always was
        const key = taggedKey(this._store, 'quota', prefix, 0, [q.windowSeconds, q.granularitySeconds])
        let c = index.get(key)
        if (c === undefined) {
          c = keys.length
          index.set(key, c)
          keys.push(key)
          shapes.push(q.windowSeconds, q.granularitySeconds)
        }
        body.push(c, q.limit)
      }
    }
    return { keys: encodeParts(keys), nums: new Float64Array([keys.length, ...shapes, ...body]) }
  }

  /** @internal runs a call; resolves with the flat result */
  _run(requests, amounts, mode, timestamp) {
    const { keys, nums } = this._encode(requests, amounts)
    const store = this._store
    return store._call(QUOTA, new QUOTA.Call(store, keys, nums, mode, timestamp))
  }

  /** @internal each request's grant, from a result (the quota kind's `RESULT` past its `call`) */
  static _grants(requests, out) {
    let o = GRANTS
    const degraded = out.degraded === true
    return requests.map((r) => {
      const granted = out[o + GRANTED]
      o += REQUEST
      const reachedQuotas = r.quotas.filter(() => {
        const reached = out[o + REACHED] === 1
        o += QUOTA_SIZE
        return reached
      })
      return { prefix: r.prefix, granted, reachedQuotas, degraded }
    })
  }

  static _requested(r, i) {
    return checkInteger(`requests[${i}].requested`, r.requested, 0, MAX_QUOTA, invalidArgument)
  }

  /**
   * What each request would be granted at `timestamp` (seconds; default the store's clock),
   * reading only. Requests are decided in order, each seeing what the earlier ones would be
   * granted on every counter they share. Resolves with the timestamp used, for `useQuotas`.
   */
  async checkWithinQuotas(requests, timestamp) {
    const t = checkTimestamp(timestamp, false)
    if (Array.isArray(requests) && requests.length === 0) return { timestamp: t === -1 ? this._now() : t, grants: [] }
    const out = await this._run(requests, QuotaLimiter._requested, MODE.check, t)
    const grants = QuotaLimiter._grants(requests, out)
    this._count(requests, grants)
    return { timestamp: out[TIMESTAMP], grants }
  }

  /**
   * @internal counts each request's decision under its prefix: admitted when granted in full
   * (weight: the units granted), refused otherwise (weight: the units not granted)
   */
  _count(requests, grants) {
    const book = this._store._stats
    if (book === null) return
    requests.forEach((r, i) => {
      const g = grants[i]
      const owner = { _statsKind: 'quota', _statsName: r.prefix, _statsOptions: () => ({ quotas: r.quotas }) }
      const full = g.granted >= r.requested
      book.decision(owner, full, full ? g.granted : r.requested - g.granted, false, g.degraded)
    })
  }

  /**
   * Statistics of the requests made under `prefix` (decisions of checkWithinQuotas and
   * checkAndUseQuotas), over every process.
   */
  stats(prefix) {
    checkPrefix('prefix', prefix)
    return this._store._statsOf('quota', prefix)
  }

  /**
   * Charges `grants[i].granted` to every quota of `requests[i]` at `timestamp` (the one
   * `checkWithinQuotas` returned), unconditionally: the second half of check, work, use.
   */
  async useQuotas(requests, grants, timestamp) {
    const t = checkTimestamp(timestamp, true)
    if (!Array.isArray(requests) || !Array.isArray(grants) || requests.length !== grants.length) {
      throw invalidArgument('requests and grants must be arrays of the same length')
    }
    if (requests.length === 0) return
    const amounts = (r, i) => {
      const g = grants[i]
      if (!plainObject(g) || g.prefix !== r.prefix) {
        throw invalidArgument(`grants[${i}] must be the GrantedQuota of requests[${i}] (same prefix)`)
      }
      checkInteger(`grants[${i}].granted`, g.granted, 0, MAX_QUOTA, invalidArgument)
      if (g.granted > r.requested) {
        throw invalidArgument(
          `grants[${i}].granted (${g.granted}) is more than requests[${i}].requested (${r.requested})`,
        )
      }
      return g.granted
    }
    await this._run(requests, amounts, MODE.use, t)
  }

  /**
   * Checks and charges in one atomic step (on a Redis Cluster, atomic when the requests'
   * counters share a hash slot; otherwise never over a limit, see the README): concurrent
   * callers cannot over-spend. A request granted 0 writes nothing.
   */
  async checkAndUseQuotas(requests, timestamp) {
    const t = checkTimestamp(timestamp, false)
    if (Array.isArray(requests) && requests.length === 0) return []
    const out = await this._run(requests, QuotaLimiter._requested, MODE.checkAndUse, t)
    const grants = QuotaLimiter._grants(requests, out)
    this._count(requests, grants)
    return grants
  }

  _now() {
    const store = this._store
    return Math.floor((store.clock ? store.clock.now() : Date.now()) / 1000)
  }
}

module.exports = { QuotaLimiter }
