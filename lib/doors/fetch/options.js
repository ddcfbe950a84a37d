'use strict'
// The options of sluice/fetch (`pacedFetch(options)`, `interceptor(options)`), checked at setup
// (ERR_INVALID_CONFIG for anything unknown or out of range) and given their defaults.

const { invalidConfig, ownProps, describeValue, knownOptions } = require('../../base/errors')
const { modeOption } = require('../../classes/ruled')
const { isStore } = require('../../store/options')

const { MAX_LIMIT: MAX_QPS, MAX_INTERVAL_MS: MAX_MS } = require('../../store/bounds')
const DEFAULT_MAX_BLOCK_MS = 3_600_000
/**
 * The longest a call waits for its slot by default, ms: a queue longer than this outlives
 * what callers wait for (browsers' and SDKs' request timeouts are 10-60 s), so an overloaded
 * fleet refuses early (OverLimitError, nothing sent) instead of queueing calls whose callers
 * have gone; a slot given up is given back either way.
 */
const DEFAULT_MAX_WAIT_MS = 30_000
const DEFAULT_STATUSES = Object.freeze([429, 503])
/** RFC 9110 §9.2.2: the idempotent methods (a retry cannot do twice what the first call did). */
const IDEMPOTENT = Object.freeze(['GET', 'HEAD', 'OPTIONS', 'TRACE', 'PUT', 'DELETE'])
const OPTIONS = [
  'store',
  'key',
  'qps',
  'maxBurst',
  'limits',
  'maxWaitMs',
  'retry',
  'learn',
  'adaptive',
  'maxBlockMs',
  'blockStatuses',
  'mode',
]
/** pacedFetch's only (the interceptor has no Request nor Response to give them): a Budget per call. */
const BUDGET_OPTIONS = ['budget', 'estimate', 'settle']
const RETRY = ['statuses', 'methods', 'maxRetries']
const ADAPTIVE = ['minQps', 'maxQps', 'startQps', 'decrease', 'increase']

function plainObject(v) {
  return v !== null && typeof v === 'object' && !Array.isArray(v)
}

function rate(name, v, { min = 0, minExclusive = true, max = MAX_QPS } = {}) {
  if (typeof v !== 'number' || !Number.isFinite(v) || (minExclusive ? v <= min : v < min) || v > max) {
    throw invalidConfig(
      `${name} must be a finite number in ${minExclusive ? '(' : '['}${min}, ${max}], got ${describeValue(v)}`,
    )
  }
  return v
}

function wholeMs(name, v, min, max) {
  if (typeof v !== 'number' || !Number.isInteger(v) || v < min || v > max) {
    throw invalidConfig(`${name} must be whole ms in [${min}, ${max}], got ${describeValue(v)}`)
  }
  return v
}

/** Statuses (100..599), at most 100 of them, as a Set. */
function statusSet(name, statuses) {
  if (!Array.isArray(statuses) || statuses.length > 100) throw invalidConfig(`${name} must be an array of status codes`)
  for (const s of statuses) {
    if (!Number.isInteger(s) || s < 100 || s > 599) {
      throw invalidConfig(`${name} must hold HTTP status codes (100..599), got ${describeValue(s)}`)
    }
  }
  return new Set(statuses)
}

function retryOption(retry) {
  if (retry === false) return null
  if (retry === undefined) retry = {}
  if (!plainObject(retry)) throw invalidConfig('retry must be false or { statuses, methods, maxRetries }')
  retry = ownProps(retry)
  knownOptions(retry, RETRY, 'retry')
  const { statuses = DEFAULT_STATUSES, methods = IDEMPOTENT, maxRetries = 3 } = retry
  const statusesSet = statusSet('retry.statuses', statuses)
  if (!Array.isArray(methods) || methods.length > 100)
    throw invalidConfig('retry.methods must be an array of method names')
  for (const m of methods) {
    if (typeof m !== 'string' || !/^[A-Za-z]{1,32}$/.test(m)) {
      throw invalidConfig(`retry.methods must hold method names, got ${describeValue(m)}`)
    }
  }
  if (!Number.isInteger(maxRetries) || maxRetries < 0 || maxRetries > 100) {
    throw invalidConfig(`retry.maxRetries must be an integer in [0, 100], got ${describeValue(maxRetries)}`)
  }
  return {
    statuses: statusesSet,
    methods: new Set(methods.map((m) => m.toUpperCase())),
    maxRetries,
  }
}

function adaptiveOption(adaptive, qps) {
  if (adaptive === undefined) return null
  if (!plainObject(adaptive))
    throw invalidConfig('adaptive must be an object { maxQps, minQps, startQps, decrease, increase }')
  adaptive = ownProps(adaptive)
  knownOptions(adaptive, ADAPTIVE, 'adaptive')
  const maxQps = rate('adaptive.maxQps', adaptive.maxQps === undefined && qps !== undefined ? qps : adaptive.maxQps)
  const minQps = rate('adaptive.minQps', adaptive.minQps ?? Math.min(1, maxQps), { max: maxQps })
  const startQps = rate('adaptive.startQps', adaptive.startQps ?? maxQps, {
    min: minQps,
    minExclusive: false,
    max: maxQps,
  })
  const decrease = rate('adaptive.decrease', adaptive.decrease ?? 0.05, { max: 0.9 })
  // default: 0.2 % of the rate per second (lib/doors/fetch/gate.js), probing slowly past where it settled
  const increase =
    adaptive.increase === undefined ? undefined : rate('adaptive.increase', adaptive.increase, { minExclusive: false })
  // a stated minQps is also the floor of a learned rate (else one call per maxBlockMs)
  return { minQps, maxQps, startQps, decrease, increase, minQpsGiven: adaptive.minQps !== undefined }
}

/** The checked configuration of a paced fetch or interceptor (`withFetch`: the `fetch` option is allowed). */
function fetchConfig(options, withFetch) {
  if (!plainObject(options)) throw invalidConfig('options must be an object')
  const o = ownProps(options)
  if (!withFetch) {
    for (const name of BUDGET_OPTIONS) {
      if (o[name] !== undefined) {
        throw invalidConfig(
          `${name} is pacedFetch's only: undici's interceptor has no Request nor Response to estimate or settle from`,
        )
      }
    }
  }
  knownOptions(o, withFetch ? [...OPTIONS, ...BUDGET_OPTIONS, 'fetch'] : OPTIONS, 'fetch')
  if (!isStore(o.store)) throw invalidConfig('store must be a MemoryStore or a RedisStore')
  if (o.key !== undefined && typeof o.key !== 'function')
    throw invalidConfig('key must be a function (url, init) => string')
  if (o.limits !== undefined && typeof o.limits !== 'function') {
    throw invalidConfig('limits must be a function (key) => { qps, maxBurst } | null')
  }
  const qps = o.qps === undefined ? undefined : rate('qps', o.qps)
  const maxBurst = o.maxBurst === undefined ? 0 : rate('maxBurst', o.maxBurst, { minExclusive: false })
  if (o.maxBurst !== undefined && qps === undefined && o.limits === undefined) {
    throw invalidConfig('maxBurst needs qps (or limits)')
  }
  const maxWaitMs =
    o.maxWaitMs === undefined
      ? DEFAULT_MAX_WAIT_MS
      : o.maxWaitMs === Infinity
        ? Infinity
        : wholeMs('maxWaitMs', o.maxWaitMs, 0, MAX_MS)
  const maxBlockMs = o.maxBlockMs === undefined ? DEFAULT_MAX_BLOCK_MS : wholeMs('maxBlockMs', o.maxBlockMs, 1, MAX_MS)
  if (o.learn !== undefined && typeof o.learn !== 'boolean')
    throw invalidConfig(`learn must be a boolean, got ${describeValue(o.learn)}`)
  const fetch = withFetch ? (o.fetch ?? globalThis.fetch) : null
  if (withFetch && typeof fetch !== 'function') throw invalidConfig('fetch must be a function (no global fetch here)')
  const { Budget } = require('../../classes/budget')
  if (o.budget !== undefined && !(o.budget instanceof Budget)) throw invalidConfig('budget must be a Budget')
  if (o.budget !== undefined && typeof o.estimate !== 'function') {
    throw invalidConfig('budget needs estimate(req) => { [dimension]: amount }')
  }
  if (o.budget === undefined && (o.estimate !== undefined || o.settle !== undefined)) {
    throw invalidConfig('estimate and settle need a budget')
  }
  if (o.estimate !== undefined && typeof o.estimate !== 'function') {
    throw invalidConfig('estimate must be a function (req) => { [dimension]: amount }')
  }
  if (o.settle !== undefined && typeof o.settle !== 'function') {
    throw invalidConfig('settle must be a function (res, req) => { [dimension]: amount }')
  }
  return {
    budget: o.budget ?? null,
    estimate: o.estimate ?? null,
    settle: o.settle ?? null,
    store: o.store,
    key: o.key ?? null,
    qps,
    maxBurst,
    limits: o.limits ?? null,
    maxWaitMs,
    retry: retryOption(o.retry),
    learn: o.learn ?? true,
    adaptive: adaptiveOption(o.adaptive, qps),
    maxBlockMs,
    blockStatuses: statusSet('blockStatuses', o.blockStatuses ?? DEFAULT_STATUSES),
    /** 'enforce', or 'shadow': paced as if enforced, a call that would wait or be refused goes at once */
    mode: modeOption(o.mode),
    fetch,
  }
}

/** The `{ qps, maxBurst }` that `limits(key)` returned, checked (a bad answer fails that call). */
function keyLimits(answer, make) {
  if (answer === null || answer === undefined) return null
  if (!plainObject(answer)) throw make('limits(key) must return { qps, maxBurst } or null')
  const { qps, maxBurst = 0 } = ownProps(answer)
  const ok = (v, min) => typeof v === 'number' && Number.isFinite(v) && v >= min && v <= MAX_QPS
  if (!ok(qps, Number.MIN_VALUE) || !ok(maxBurst, 0)) {
    throw make(`limits(key) must return { qps: (0, ${MAX_QPS}], maxBurst: [0, ${MAX_QPS}] }`)
  }
  return { qps, maxBurst }
}

module.exports = { fetchConfig, keyLimits, IDEMPOTENT, MAX_QPS, DEFAULT_MAX_WAIT_MS }
