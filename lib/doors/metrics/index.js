'use strict'

// sluice/metrics: the statistics of a store's limiters as Prometheus metrics (prom-client)
// and OpenTelemetry instruments (@opentelemetry/api), both optional peer dependencies, loaded
// only here. Each process exports its own counts, as Prometheus expects (sum them across
// processes in the query: `sum by (limiter) (rate(sluice_decisions_total[5m]))`).

const { SluiceError, invalidConfig, knownOptions } = require('../../base/errors')
const { MemoryStore, RedisStore } = require('../../store')
const { BY_STATS_KIND, KINDS } = require('../../kinds')
const { limiterOf } = require('../inspect')
const { INDEX } = require('../../store/stats')

/** Seconds; the default buckets of `sluice_wait_seconds`. */
const WAIT_BUCKETS = [0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60]
const OPTIONS = ['registry', 'prefix', 'limiterLabel', 'buckets', 'meter']

function load(name, why) {
  try {
    return require(name)
  } catch (err) {
    throw new SluiceError('ERR_INVALID_CONFIG', `sluice/metrics needs ${name} for ${why}: npm install ${name}`, {
      cause: err,
    })
  }
}

function checkOptions(store, options) {
  if (!(store instanceof MemoryStore) && !(store instanceof RedisStore)) {
    throw invalidConfig('store must be a MemoryStore or a RedisStore')
  }
  if (store._stats === null) throw invalidConfig('the store was made with stats: false: there is nothing to export')
  const o = options === undefined ? {} : options
  if (o === null || typeof o !== 'object' || Array.isArray(o)) throw invalidConfig('options must be an object')
  knownOptions(o, OPTIONS, 'metrics')
  const own = (k) => (Object.prototype.hasOwnProperty.call(o, k) ? o[k] : undefined)
  const prefix = own('prefix') === undefined ? 'sluice_' : own('prefix')
  if (typeof prefix !== 'string' || !/^[a-zA-Z_:][a-zA-Z0-9_:]*$/.test(prefix)) {
    throw invalidConfig('prefix must match [a-zA-Z_:][a-zA-Z0-9_:]*')
  }
  const limiterLabel = own('limiterLabel') === undefined ? (name) => name : own('limiterLabel')
  if (typeof limiterLabel !== 'function') throw invalidConfig('limiterLabel must be a function (name, kind) => label')
  const buckets = own('buckets') === undefined ? WAIT_BUCKETS : own('buckets')
  if (!Array.isArray(buckets) || buckets.length === 0 || !buckets.every((b) => typeof b === 'number' && b > 0)) {
    throw invalidConfig('buckets must be a non-empty array of positive numbers (seconds)')
  }
  const meter = own('meter')
  if (
    meter !== undefined &&
    (meter === null || typeof meter !== 'object' || typeof meter.createObservableCounter !== 'function')
  ) {
    throw invalidConfig('meter must be an OpenTelemetry Meter')
  }
  return { prefix, limiterLabel, buckets, registry: own('registry'), meter }
}

/**
 * Sums this process's counts per (label, kind): several names may share a label (a
 * `limiterLabel` that maps per-user names to one family).
 */
function families(store, limiterLabel) {
  const out = new Map()
  for (const e of store._stats.totals()) {
    const label = String(limiterLabel(e.name, e.kind))
    const key = `${e.kind}\n${label}`
    let f = out.get(key)
    if (f === undefined) out.set(key, (f = { kind: e.kind, limiter: label, totals: new Float64Array(e.totals.length) }))
    for (let i = 0; i < e.totals.length; i++) f.totals[i] += e.totals[i]
  }
  return [...out.values()]
}

/**
 * Leases held now, per limiter this process has used whose kind holds leases (concurrent:
 * its `inspect.leasesHeld`, lib/kinds/), one read each.
 */
async function leasesHeld(store, limiterLabel) {
  const out = new Map()
  const holding = store._stats.totals().filter((e) => BY_STATS_KIND.get(e.kind)?.inspect?.leasesHeld !== undefined)
  await Promise.all(
    holding.map(async (e) => {
      const held = await BY_STATS_KIND.get(e.kind).inspect.leasesHeld(limiterOf(store, e))
      const label = String(limiterLabel(e.name, e.kind))
      out.set(label, (out.get(label) || 0) + held)
    }),
  )
  return out
}

/** What the budget gauges hold (Prometheus help, OpenTelemetry description). */
const BUDGET_HELP = {
  used: 'Per budget dimension: charged and not yet replenished (queued and debt included).',
  reserved: 'Per budget dimension: held by open reservations, not yet settled.',
  excess:
    "Per budget dimension: settled beyond reservations past the dimension's maxDebt, counted and not charged (a total).",
  tenantUsed:
    'Per active budget tenant (at most 20 per budget, as stats() lists them) and dimension: charged within its share and not yet replenished.',
}

/**
 * Per-dimension use of each budget this process has used (kinds with `inspect.dimensionUse`,
 * lib/kinds/), one read each: `[label, dimension, used, reserved, excess]`.
 */
async function dimensionUse(store, limiterLabel) {
  const out = []
  await eachRead(store, limiterLabel, 'dimensionUse', (label, use) => {
    for (const [dimension, d] of Object.entries(use)) out.push([label, dimension, d.used, d.reserved, d.excess])
  })
  return out
}

/**
 * For each limiter this process has used whose kind's `inspect` section has `read` (one of its
 * reads of a limiter), that read, all at once: `each(label, answer)` as each answer comes.
 */
async function eachRead(store, limiterLabel, read, each) {
  const entries = store._stats.totals().filter((e) => BY_STATS_KIND.get(e.kind)?.inspect?.[read] !== undefined)
  await Promise.all(
    entries.map(async (e) => {
      const answer = await BY_STATS_KIND.get(e.kind).inspect[read](limiterOf(store, e))
      each(String(limiterLabel(e.name, e.kind)), answer)
    }),
  )
}

/** Whether statistics of `kind` count `field` (one of lib/store/stats.js' EXTRA_FIELDS). */
const counts = (kind, field) => BY_STATS_KIND.get(kind)?.statsFields?.includes(field) === true

/**
 * The rates of the keys this process paces (kinds with `inspect.rates`: sluice/fetch's),
 * by label: `[label, qps, learnedQps]` (a label of several keys: the sum of their rates; a key
 * of several doors: its highest; null rates left out).
 */
function pacedRates(store, limiterLabel) {
  const out = new Map()
  for (const k of KINDS) {
    if (k.inspect?.rates === undefined) continue
    // one key seen by several doors of this process: one rate (the highest heard)
    const byKey = new Map()
    for (const r of k.inspect.rates(store)) {
      const had = byKey.get(r.key)
      const most = (a, b) => (a === null ? b : b === null ? a : Math.max(a, b))
      byKey.set(
        r.key,
        had === undefined
          ? r
          : { key: r.key, qps: most(had.qps, r.qps), learnedQps: most(had.learnedQps, r.learnedQps) },
      )
    }
    for (const r of byKey.values()) {
      for (const kind of k.statsKinds) {
        const label = String(limiterLabel(r.key, kind))
        let row = out.get(label)
        if (row === undefined) out.set(label, (row = [label, null, null]))
        if (r.qps !== null) row[1] = (row[1] ?? 0) + r.qps
        if (r.learnedQps !== null) row[2] = (row[2] ?? 0) + r.learnedQps
      }
    }
  }
  return [...out.values()]
}

/**
 * Per active tenant of each budget this process has used (at most 20 per budget, as its
 * `stats()` lists them, whichever process made their views), per dimension its use (charged
 * within its share and not yet replenished): `[label, tenant, dimension, used]`.
 */
async function tenantUse(store, limiterLabel) {
  const out = []
  await eachRead(store, limiterLabel, 'tenantUse', (label, use) => {
    for (const [tenant, t] of Object.entries(use))
      for (const [dimension, used] of Object.entries(t.used)) out.push([label, tenant, dimension, used])
  })
  return out
}

/**
 * Registers sluice's metrics in a prom-client registry (default: prom-client's global one):
 * `sluice_decisions_total{limiter,kind,result}` (result: admitted | refused),
 * `sluice_decision_weight_total{limiter,kind,result}`, `sluice_near_limit_total{limiter,kind}`,
 * `sluice_degraded_total{limiter,kind}`, `sluice_rescheduled_total{limiter,kind}`,
 * `sluice_wait_seconds{limiter,kind}` (a histogram of waits for a turn), `sluice_leases_held{limiter}`
 * (concurrent limiters, read at scrape time), `sluice_budget_used{limiter,dimension}` and
 * `sluice_budget_reserved{limiter,dimension}`, `sluice_budget_excess{limiter,dimension}` (budgets:
 * charged and not yet replenished, held by open reservations, settled past maxDebt and not charged;
 * read at scrape time), `sluice_budget_tenant_used{limiter,tenant,dimension}`
 * (per active tenant, at most 20 per budget: its use, read at scrape time; OpenTelemetry:
 * `sluice.budget.used`, `sluice.budget.reserved`, `sluice.budget.excess`, `sluice.budget.tenant.used`), `sluice_throttled_total{limiter,kind}` and `sluice_blocks_total{limiter,kind}`
 * (sluice/fetch: answers 429/503 seen and blocks recorded, per key), `sluice_shadow_refused_total{limiter,kind}`
 * and `sluice_denied_total{limiter,kind}` (store.rules: refusals shadow mode admitted, calls a
 * rule denied; OpenTelemetry `sluice.shadow_refused`, `sluice.denied`), `sluice_lease_calls_total`
 * and `sluice_lease_returned_total{limiter,kind}` (lease mode; `sluice.lease.calls`,
 * `sluice.lease.returned`), `sluice_paced_rate{limiter}`
 * and `sluice_paced_learned_rate{limiter}` (sluice/fetch: the rate a key is paced at now and
 * the rate its upstream stated, per second, as this process last heard), `sluice_waiters` (this process's queued
 * waiters) and `sluice_store_up` (1 while the store reaches Redis). The `limiter` label is
 * the limiter's name: give per-user names a `limiterLabel(name, kind)` that maps them to
 * their family, so no label holds a tenant or a key. When `@opentelemetry/api` is installed
 * (or a `meter` is given), the same numbers go to OpenTelemetry instruments too.
 * Returns `{ close() }`, which stops observing waits.
 */
function collectMetrics(store, options) {
  const o = checkOptions(store, options)
  const client = load('prom-client', 'Prometheus metrics')
  const registry = o.registry === undefined ? client.register : o.registry
  if (!(registry instanceof client.Registry)) throw invalidConfig('registry must be a prom-client Registry')
  const p = o.prefix
  for (const name of ['decisions_total', 'wait_seconds', 'store_up']) {
    if (registry.getSingleMetric(`${p}${name}`) !== undefined) {
      throw invalidConfig(`the registry already has ${p}${name}: collectMetrics once per registry (or another prefix)`)
    }
  }
  const registers = [registry]
  const counter = (name, help, labelNames, field) =>
    new client.Counter({
      name: `${p}${name}`,
      help,
      labelNames,
      registers,
      collect() {
        this.reset()
        for (const f of families(store, o.limiterLabel)) field(this, f)
      },
    })
  const byResult = (i, j) => (metric, f) => {
    metric.inc({ limiter: f.limiter, kind: f.kind, result: 'admitted' }, f.totals[i])
    metric.inc({ limiter: f.limiter, kind: f.kind, result: 'refused' }, f.totals[j])
  }
  const single = (i) => (metric, f) => metric.inc({ limiter: f.limiter, kind: f.kind }, f.totals[i])
  counter(
    'decisions_total',
    'Limiter decisions made in this process, by result.',
    ['limiter', 'kind', 'result'],
    byResult(0, 1),
  )
  counter(
    'decision_weight_total',
    'Weight (units) of the decisions made in this process, by result.',
    ['limiter', 'kind', 'result'],
    byResult(2, 3),
  )
  counter(
    'near_limit_total',
    'Admissions after which at most 20 % of the limit remained.',
    ['limiter', 'kind'],
    single(4),
  )
  counter('degraded_total', 'Answers given without Redis (whenDown).', ['limiter', 'kind'], single(7))
  counter('rescheduled_total', 'Jobs moved back to delayed by limitProcessor.', ['limiter', 'kind'], single(8))
  const extra = (field) => (metric, f) => {
    if (counts(f.kind, field)) metric.inc({ limiter: f.limiter, kind: f.kind }, f.totals[INDEX[field]])
  }
  counter(
    'throttled_total',
    'Outgoing calls answered 429 or 503 (sluice/fetch), per key.',
    ['limiter', 'kind'],
    extra('throttled'),
  )
  counter(
    'blocks_total',
    'Blocks recorded from answers (Retry-After, an exhausted quota; sluice/fetch), per key.',
    ['limiter', 'kind'],
    extra('blocks'),
  )
  counter(
    'shadow_refused_total',
    'Refusals that shadow mode admitted (store.rules, a mode option).',
    ['limiter', 'kind'],
    extra('shadowRefused'),
  )
  counter('denied_total', 'Calls a rule of store.rules denied.', ['limiter', 'kind'], extra('denied'))
  counter(
    'lease_calls_total',
    'Lease calls a leasing rate limiter made (lease mode: a run of tokens taken in one store call).',
    ['limiter', 'kind'],
    extra('leaseCalls'),
  )
  counter(
    'lease_returned_total',
    'Leased tokens given back unused (lease mode).',
    ['limiter', 'kind'],
    extra('returned'),
  )
  for (const [name, help, at] of [
    ['paced_rate', 'Outgoing calls per second a key is paced at now, over the fleet (sluice/fetch).', 1],
    ['paced_learned_rate', 'Calls per second the upstream stated for a key, while remembered (sluice/fetch).', 2],
  ]) {
    new client.Gauge({
      name: `${p}${name}`,
      help,
      labelNames: ['limiter'],
      registers,
      collect() {
        this.reset()
        for (const row of pacedRates(store, o.limiterLabel))
          if (row[at] !== null) this.set({ limiter: row[0] }, row[at])
      },
    })
  }
  const waits = new client.Histogram({
    name: `${p}wait_seconds`,
    help: 'How long admissions waited for their turn (withinLimit, pace).',
    labelNames: ['limiter', 'kind'],
    buckets: o.buckets,
    registers,
  })
  new client.Gauge({
    name: `${p}leases_held`,
    help: 'Leases held now, per concurrent limiter used by this process (all processes).',
    labelNames: ['limiter'],
    registers,
    async collect() {
      this.reset()
      if (store._closed || store.status === 'down') return
      for (const [limiter, held] of await leasesHeld(store, o.limiterLabel)) this.set({ limiter }, held)
    },
  })
  for (const [name, help, at] of [
    ['budget_used', BUDGET_HELP.used, 2],
    ['budget_reserved', BUDGET_HELP.reserved, 3],
    ['budget_excess', BUDGET_HELP.excess, 4],
  ]) {
    new client.Gauge({
      name: `${p}${name}`,
      help,
      labelNames: ['limiter', 'dimension'],
      registers,
      async collect() {
        this.reset()
        if (store._closed || store.status === 'down') return
        for (const row of await dimensionUse(store, o.limiterLabel))
          this.set({ limiter: row[0], dimension: row[1] }, row[at])
      },
    })
  }
  new client.Gauge({
    name: `${p}budget_tenant_used`,
    help: BUDGET_HELP.tenantUsed,
    labelNames: ['limiter', 'tenant', 'dimension'],
    registers,
    async collect() {
      this.reset()
      if (store._closed || store.status === 'down') return
      for (const row of await tenantUse(store, o.limiterLabel))
        this.set({ limiter: row[0], tenant: row[1], dimension: row[2] }, row[3])
    },
  })
  new client.Gauge({
    name: `${p}waiters`,
    help: 'Concurrent-limiter waiters queued in this process.',
    registers,
    collect() {
      this.set(store._waiters ? store._waiters.size : 0)
    },
  })
  new client.Gauge({
    name: `${p}store_up`,
    help: '1 while the store reaches Redis (always 1 for the memory store).',
    registers,
    collect() {
      this.set(store._closed || store.status === 'down' ? 0 : 1)
    },
  })
  const observers = [
    (kind, name, ms) => waits.observe({ limiter: String(o.limiterLabel(name, kind)), kind }, ms / 1000),
  ]
  const otel = openTelemetry(store, o)
  if (otel !== null) observers.push(otel.onWait)
  const previous = store._stats.onWait
  store._stats.onWait = (kind, name, ms) => {
    if (previous !== null) previous(kind, name, ms)
    for (const observe of observers) observe(kind, name, ms)
  }
  return {
    close() {
      store._stats.onWait = previous
      if (otel !== null) otel.close()
    },
  }
}

/** The OpenTelemetry instruments, when a meter is given or @opentelemetry/api is installed. */
function openTelemetry(store, o) {
  let meter = o.meter
  if (meter === undefined) {
    let api
    try {
      api = require('@opentelemetry/api')
    } catch {
      return null
    }
    meter = api.metrics.getMeter('sluice')
  }
  const counter = (name, description) => meter.createObservableCounter(name, { description })
  const gauge = (name, description) => meter.createObservableGauge(name, { description })
  const decisions = counter('sluice.decisions', 'Limiter decisions made in this process, by result.')
  const weight = counter('sluice.decision.weight', 'Weight (units) of the decisions made in this process, by result.')
  const waiters = gauge('sluice.waiters', 'Concurrent-limiter waiters queued in this process.')
  const up = gauge('sluice.store.up', '1 while the store reaches Redis.')
  const throttled = counter('sluice.fetch.throttled', 'Outgoing calls answered 429 or 503 (sluice/fetch), per key.')
  const blocks = counter('sluice.fetch.blocks', 'Blocks recorded from answers (sluice/fetch), per key.')
  const shadowRefused = counter('sluice.shadow_refused', 'Refusals that shadow mode admitted (store.rules, a mode option).')
  const denied = counter('sluice.denied', 'Calls a rule of store.rules denied.')
  const leaseCalls = counter('sluice.lease.calls', 'Lease calls a leasing rate limiter made (lease mode).')
  const leaseReturned = counter('sluice.lease.returned', 'Leased tokens given back unused (lease mode).')
  const rate = gauge('sluice.fetch.rate', 'Outgoing calls per second a key is paced at now (sluice/fetch).')
  const learnedRate = gauge(
    'sluice.fetch.learned_rate',
    'Calls per second the upstream stated for a key (sluice/fetch).',
  )
  const budgetUsed = gauge('sluice.budget.used', BUDGET_HELP.used)
  const budgetReserved = gauge('sluice.budget.reserved', BUDGET_HELP.reserved)
  const budgetExcess = gauge('sluice.budget.excess', BUDGET_HELP.excess)
  const tenantUsed = gauge('sluice.budget.tenant.used', BUDGET_HELP.tenantUsed)
  const waits = meter.createHistogram('sluice.wait', {
    description: 'How long admissions waited for their turn.',
    unit: 's',
  })
  const callback = async (result) => {
    for (const f of families(store, o.limiterLabel)) {
      const attrs = { limiter: f.limiter, kind: f.kind }
      result.observe(decisions, f.totals[0], { ...attrs, result: 'admitted' })
      result.observe(decisions, f.totals[1], { ...attrs, result: 'refused' })
      result.observe(weight, f.totals[2], { ...attrs, result: 'admitted' })
      result.observe(weight, f.totals[3], { ...attrs, result: 'refused' })
      if (counts(f.kind, 'throttled')) result.observe(throttled, f.totals[INDEX.throttled], attrs)
      if (counts(f.kind, 'blocks')) result.observe(blocks, f.totals[INDEX.blocks], attrs)
      if (counts(f.kind, 'shadowRefused')) result.observe(shadowRefused, f.totals[INDEX.shadowRefused], attrs)
      if (counts(f.kind, 'denied')) result.observe(denied, f.totals[INDEX.denied], attrs)
      if (counts(f.kind, 'leaseCalls')) result.observe(leaseCalls, f.totals[INDEX.leaseCalls], attrs)
      if (counts(f.kind, 'returned')) result.observe(leaseReturned, f.totals[INDEX.returned], attrs)
    }
    for (const [limiter, qps, learnedQps] of pacedRates(store, o.limiterLabel)) {
      if (qps !== null) result.observe(rate, qps, { limiter })
      if (learnedQps !== null) result.observe(learnedRate, learnedQps, { limiter })
    }
    result.observe(waiters, store._waiters ? store._waiters.size : 0)
    const down = store._closed || store.status === 'down'
    result.observe(up, down ? 0 : 1)
    // budgets: read from the store at collection time, as the Prometheus gauges are
    if (down) return
    const [dims, tenants] = await Promise.all([dimensionUse(store, o.limiterLabel), tenantUse(store, o.limiterLabel)])
    for (const [limiter, dimension, used, reserved, excess] of dims) {
      result.observe(budgetUsed, used, { limiter, dimension })
      result.observe(budgetReserved, reserved, { limiter, dimension })
      result.observe(budgetExcess, excess, { limiter, dimension })
    }
    for (const [limiter, tenant, dimension, used] of tenants)
      result.observe(tenantUsed, used, { limiter, tenant, dimension })
  }
  const observables = [decisions, weight, waiters, up, throttled, blocks, shadowRefused, denied, rate, learnedRate]
  observables.push(leaseCalls, leaseReturned)
  observables.push(budgetUsed, budgetReserved, budgetExcess, tenantUsed)
  meter.addBatchObservableCallback(callback, observables)
  return {
    onWait: (kind, name, ms) => waits.record(ms / 1000, { limiter: String(o.limiterLabel(name, kind)), kind }),
    close: () => meter.removeBatchObservableCallback(callback, observables),
  }
}

module.exports = { collectMetrics, WAIT_BUCKETS }
