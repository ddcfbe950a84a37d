// @ts-check
'use strict'
// What every kind file shares: the operation codes, the wrong-type marker of a result and
// its error, and small helpers. What a kind is (every member, its optionality and meaning) is
// the kind contract, lib/kinds/contract.d.ts (`Kind`), which each kind file's object is checked
// against by tsc (tsconfig.contracts.json); what the stores run of it is lib/store/store.d.ts.

const native = require('../native')
const { SluiceError } = require('../base/errors')

/**
 * The operation codes and other numbers of each kind's calls, by kind name, as the native
 * registry exports them (src/store/kinds/<kind>: `OPS`): defined once, in Rust.
 */
const OPS = Object.fromEntries(native.kinds().map((k) => [k.name, Object.freeze({ ...k.ops })]))

/**
 * Each kind's result layout, by kind name then group (src/store/kinds/<kind>: `RESULTS`):
 * named once, in Rust, and resolved to offsets here, once, at load. Read through `resultFields`.
 * @type {Record<string, Record<string, Readonly<Record<string, number>>>>}
 */
const RESULTS = Object.fromEntries(
  native
    .kinds()
    .map((k) => [
      k.name,
      Object.fromEntries(
        Object.entries(k.results).map(([group, fields]) => [
          group,
          Object.freeze({ size: fields.length, ...Object.fromEntries(fields.map((f, i) => [f, i])) }),
        ]),
      ),
    ]),
)

/**
 * The group `group` of kind `kind`'s result: each field's offset in the group by its name (as
 * Rust names it), and `size`, the group's width. Destructure it into constants at load: a name
 * Rust does not give throws then, never a decision later.
 * @param {string} kind
 * @param {string} group
 * @returns {Readonly<Record<string, number>>}
 */
function resultFields(kind, group) {
  const fields = RESULTS[kind]?.[group]
  if (fields === undefined) throw new Error(`the native kind ${kind} has no result group ${group}`)
  return new Proxy(fields, {
    get(target, name) {
      if (typeof name !== 'string' || !(name in target)) {
        throw new Error(`the native kind ${kind}'s result group ${group} has no field ${String(name)}`)
      }
      return target[name]
    },
  })
}

/**
 * A call's marker in its result from Redis (the field that is never negative otherwise: a
 * limiter's `remaining`, a pacer member's delay, a sliding call's retry, a quota call's
 * timestamp, a fair call's first count, a concurrent operation's first value; see
 * src/store/kinds/mod.rs `WRONG_TYPE`): its key holds a value of another type, another
 * writer's, and nothing of the call was applied. Only that call rejects, with `wrongType`.
 */
const WRONG_TYPE = -2

/**
 * The error of such a call: ERR_SCRIPT, naming the limiter's kind and the key prefix, never
 * the key (a name can be a user's data).
 */
const wrongType = (what, keyPrefix) =>
  new SluiceError(
    'ERR_SCRIPT',
    `the key of this ${what} holds a value of another type: another writer uses sluice's key prefix ` +
      `${JSON.stringify(keyPrefix)}; this call was not applied`,
  )

/** `out[from..to)` copied (the result buffer is reused once a batch is settled). */
function numbers(out, from, to) {
  const copy = new Float64Array(to - from)
  for (let i = from; i < to; i++) copy[i - from] = out[i]
  return copy
}

/**
 * `out` (a kind's numbers answered without Redis) flagged `degraded`, as the classes read it.
 * @template {Float64Array} T
 * @param {T} out
 * @returns {T & { degraded: true }}
 */
const degraded = (out) => Object.assign(out, { degraded: /** @type {const} */ (true) })

/** The longest of `f(x)` over `list` (0 for an empty or missing list). */
const longest = (list, f) => (Array.isArray(list) ? list.reduce((m, x) => Math.max(m, Number(f(x)) || 0), 0) : 0)

module.exports = { OPS, resultFields, WRONG_TYPE, wrongType, longest, numbers, degraded }
