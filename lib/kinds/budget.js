// @ts-check
'use strict'
// The budget's kind (Budget, lib/classes/budget.js): reservations of several dimensions charged all or
// nothing in one fleet-wide FIFO, settled, cancelled, or expired as spent. Call: `{ owner, op,
// id, amounts, ttlUs, maxWaitUs, tenant }`, the dimensions from the owner's `_spec`, `tenant`
// (the reserve-as and stats-of ops) `{ id, sharePpm, maxPpm, aheadUs }`. Result per call, in
// the groups of the kind's fields (`RESULT`, named in src/store/kinds/budget.rs): `call`, then
// `dimension` per dimension; for the tenant ops then `tenant` and `tenant_dimension` per
// dimension; for stats then `tenants` (active, k listed) and TOP slots of (`tenant`,
// `tenant_dimension` per dimension), with the k listed ids in the reply's text (every stats
// call's, in call order); the wrong-type marker in `status`.

const native = require('../native')
const { encodeParts, decodeParts } = require('../base/codec')
const { OPS, WRONG_TYPE, wrongType, resultFields } = require('./kind')

const NATIVE_NAME = 'budget'
const CODE = native.kinds().find((k) => k.name === NATIVE_NAME).code
const OP = OPS[NATIVE_NAME]
/** A call's status (src/core/budget/mod.rs): done, refused (over its max wait), not open. */
const STATUS = Object.freeze({ ok: 1, refused: 0, notOpen: 3 })
/** Tenants a stats call lists at most (src/core/budget/tenants.rs `TOP`). */
const TOP = 20

/** A result's groups of fields (offsets) and widths, as Rust names them. */
const RESULT = Object.fromEntries(
  ['call', 'dimension', 'tenant', 'tenant_dimension', 'tenants'].map((g) => [g, resultFields(NATIVE_NAME, g)]),
)
const { status: C_STATUS, delay_us: C_DELAY_US, now_us: C_NOW_US, open: C_OPEN, expired: C_EXPIRED } = RESULT.call
const CALL = RESULT.call.size
const { used: D_USED, reserved: D_RESERVED, excess: D_EXCESS, size: DIMENSION } = RESULT.dimension
const { share_ppm: T_SHARE, max_ppm: T_MAX, size: TENANT } = RESULT.tenant
const { used: TD_USED, size: TENANT_DIMENSION } = RESULT.tenant_dimension
const { active: ACTIVE, listed: LISTED, size: TENANTS } = RESULT.tenants

class BudgetCall {
  constructor(owner, op, id, amounts, ttlUs, maxWaitUs, tenant = null) {
    this.owner = owner
    this.op = op
    this.id = id
    this.amounts = amounts
    this.ttlUs = ttlUs
    this.maxWaitUs = maxWaitUs
    this.tenant = tenant
  }
}

/** Numbers of the result of a call. */
const resultLength = (c) => {
  const n = c.owner._names.length
  const tenant = TENANT + TENANT_DIMENSION * n
  return CALL + DIMENSION * n + (c.tenant === null ? 0 : tenant) + (c.op === OP.stats ? TENANTS + TOP * tenant : 0)
}

function encode(calls, nowUs) {
  let length = 0
  const text = []
  for (const c of calls) {
    length += 7 + 5 * c.owner._names.length
    text.push(c.owner._storeKey, c.id, c.tenant === null ? '' : c.tenant.id)
  }
  const nums = new Float64Array(length)
  let at = 0
  for (const c of calls) {
    const spec = c.owner._spec
    const n = spec.length / 4
    nums[at] = c.op
    nums[at + 1] = c.ttlUs
    nums[at + 2] = c.maxWaitUs
    nums[at + 3] = n
    const t = c.tenant
    nums[at + 4] = t === null ? 0 : t.sharePpm
    nums[at + 5] = t === null ? 0 : t.maxPpm
    nums[at + 6] = t === null ? 0 : t.aheadUs
    at += 7
    for (let d = 0; d < n; d++) {
      nums[at] = spec[4 * d]
      nums[at + 1] = spec[4 * d + 1]
      nums[at + 2] = spec[4 * d + 2]
      nums[at + 3] = spec[4 * d + 3]
      nums[at + 4] = c.amounts === null ? 0 : c.amounts[d]
      at += 5
    }
  }
  return { keys: encodeParts(text), nums, nowUs }
}

/**
 * The decoded result at `o` of a flat result of call `c`; `ids` (a stats call): the listed
 * tenants' ids still to be read, in order (taken from its front).
 */
function result(c, out, o, degraded, ids) {
  const owner = c.owner
  const n = owner._names.length
  const used = new Array(n)
  const reserved = new Array(n)
  const excess = new Array(n)
  for (let d = 0; d < n; d++) {
    const at = o + CALL + DIMENSION * d
    used[d] = out[at + D_USED]
    reserved[d] = out[at + D_RESERVED]
    excess[d] = out[at + D_EXCESS]
  }
  const status = out[o + C_STATUS]
  const delayUs = out[o + C_DELAY_US]
  const nowUs = out[o + C_NOW_US]
  const open = out[o + C_OPEN]
  const expired = out[o + C_EXPIRED]
  /** The tenant (share, max, use per dimension) whose fields start at `out[at]`. */
  const tenantAt = (at) => {
    const tenantUsed = new Array(n)
    for (let d = 0; d < n; d++) tenantUsed[d] = out[at + TENANT + TENANT_DIMENSION * d + TD_USED]
    return { sharePpm: out[at + T_SHARE], maxPpm: out[at + T_MAX], used: tenantUsed }
  }
  const t = o + CALL + DIMENSION * n
  const tenant = c.tenant === null ? null : tenantAt(t)
  let active = 0
  let listed = null
  if (c.op === OP.stats) {
    active = out[t + ACTIVE]
    listed = []
    for (let k = 0; k < out[t + LISTED]; k++) {
      listed.push({ id: ids.shift(), ...tenantAt(t + TENANTS + k * (TENANT + TENANT_DIMENSION * n)) })
    }
  }
  return { status, delayUs, nowUs, open, expired, used, reserved, excess, tenant, active, listed, degraded }
}

// --- How the sites above the stores see it (lib/kinds/contract.d.ts)

/** @satisfies {import('./contract').InspectSection} */
const inspectSection = {
  limiter(classes, store, { name, options: o }) {
    return new classes.Budget(store, { name, dimensions: o.dimensions })
  },
  async state(limiter) {
    const s = await limiter.stats()
    const dims = Object.entries(s.dimensions)
    const out = {
      dimensions: s.dimensions,
      reservations: s.reservations,
      fill: Math.max(0, ...dims.map(([, d]) => Math.min(1, d.used / d.limit))),
    }
    if (s.activeTenants > 0) {
      out.tenants = s.tenants
      out.activeTenants = s.activeTenants
    }
    return out
  },
  /** sluice/metrics: per active tenant (at most the first 20 `stats()` lists), per dimension its use, read now */
  tenantUse: async (limiter) => (await limiter.stats()).tenants || {},
  /** sluice/metrics: per dimension `{ used, reserved }`, read now */
  dimensionUse: async (limiter) => (await limiter.stats()).dimensions,
  limitText: (o, per) =>
    Object.entries(o.dimensions || {})
      .map(([name, d]) => `${d.limit} ${name} / ${per(d.intervalMs)}`)
      .join(', '),
  words: (st, f) =>
    Object.entries(st.dimensions)
      .map(([name, d]) => `${f.count(d.used)}/${f.count(d.limit)} ${name} used`)
      .concat(`${f.count(st.reservations)} open`)
      .concat(st.activeTenants ? [`${f.count(st.activeTenants)} active tenants`] : [])
      .join(', '),
}

/** @satisfies {import('./contract').Kind<BudgetCall> & import('./contract').Own<'STATUS'>} */
const budget = {
  code: CODE,
  name: 'budget',
  lane: CODE,
  OP,
  STATUS,
  Call: BudgetCall,
  statsKinds: ['budget'],
  statsFields: ['shadowRefused', 'denied'],
  // a dimension drains in interval * (1 + (maxBurst + maxDebt) / limit); reservations live 10 minutes by default
  lifetimeMs: (o) =>
    600_000 +
    Math.max(
      0,
      ...Object.values(o.dimensions || {}).map((d) => {
        const burst = d.maxBurst || 0
        return d.intervalMs * (1 + (burst + (d.maxDebt ?? d.limit + burst)) / d.limit)
      }),
    ),

  memory(store, c, degraded) {
    const b = encode([c], store._begin())
    const out = /** @type {import('../native').MemoryReply} */ (
      native.memoryCall(store._handle, CODE, b.keys, b.nums, b.nowUs)
    )
    return result(c, out.values, 0, degraded, decodeParts(out.text))
  },

  encode,
  keyOf: (c) => c.owner._storeKey,

  settle(store, reply, calls, resolve, reject) {
    const out = reply.values
    const ids = decodeParts(reply.text)
    let o = 0
    for (let e = 0; e < calls.length; e++) {
      const c = calls[e]
      if (out[o + C_STATUS] === WRONG_TYPE) reject[e](wrongType('budget', store.keyPrefix))
      else resolve[e](result(c, out, o, false, ids))
      o += resultLength(c)
    }
  },

  /**
   * 'local' decides on the embedded store (from zero); 'allow' admits a reservation at once,
   * 'deny' refuses it until the next probe; a settle or cancel is answered done (a reservation
   * made on Redis keeps its charge: it expires as spent); stats need Redis.
   */
  whenDown(policy, c) {
    if (policy.mode === 'local') return budget.memory(policy.local, c, true)
    if (c.op === OP.stats || c.op === OP.statsOf) throw policy.error
    const out = new Float64Array(resultLength(c))
    out[C_STATUS] = STATUS.ok
    out[C_NOW_US] = policy.nowUs()
    if ((c.op === OP.reserve || c.op === OP.reserveAs) && policy.mode === 'deny') {
      out[C_STATUS] = STATUS.refused
      out[C_DELAY_US] = policy.retryUs
    }
    return result(c, out, 0, true)
  },
  inspect: inspectSection,
}

module.exports = budget
