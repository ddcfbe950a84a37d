'use strict'

// `sluice rules`: the store's rules (store.rules, DESIGN §9) from a shell.
//   sluice rules list | bans | history            [--json]
//   sluice rules set <target> <what> [--ttl 7d] [--note TEXT]
//   sluice rules delete <target>
//   sluice rules unban --door D --key K           (lifts a door's ban)
// <target>: --kind K --name N | --kind K --prefix P | --door D [--key K | --key-prefix P]
//           | --budget B --tenant T
// <what>:   --limit N [--interval-ms N] | --window LIMIT/MS (repeat) | --qps N [--max-burst N]
//           | --dimension NAME=LIMIT (repeat) | --shadow | --deny | --allow
// Connection: --redis URL | --cluster URL..., and --store-prefix P (the stores' key prefix,
// default sluice: in this command --prefix is a target's name prefix).
// Every name and note from the store is escaped for the terminal (termText, jsonText).

const { termText, quoted, jsonText } = require('../lib/doors/inspect.js')

const SUBCOMMANDS = ['list', 'set', 'delete', 'bans', 'unban', 'history']
const UNITS = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 }

/** `7d`, `12h`, `30m`, `90s`, `500ms` or whole ms, as ms; NaN when it is none of these. */
function durationMs(text) {
  const m = /^(\d+)(ms|s|m|h|d)?$/.exec(text)
  return m ? Number(m[1]) * UNITS[m[2] ?? 'ms'] : NaN
}

/**
 * Walks the arguments: `on(arg, value)` for each (`value()` takes the next argument, or a
 * usage error when there is none); `on` returns false for a positional argument. The
 * positional arguments, in order.
 */
function walkArgs(argv, UsageError, on) {
  const rest = []
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]
    const value = () => {
      if (i + 1 >= argv.length) throw new UsageError(`${termText(a)} needs a value`)
      return argv[++i]
    }
    if (!on(a, value)) rest.push(a)
  }
  return rest
}

/** A whole number from a flag, or a usage error naming the flag. */
function whole(flag, text, UsageError) {
  if (!/^\d+$/.test(text)) throw new UsageError(`${flag} must be a whole number, got ${quoted(text)}`)
  return Number(text)
}

/**
 * The rules command's arguments (argv after `rules`): `{ sub, target, rule, ttlMs, json,
 * redis, cluster, prefix }`, or a UsageError. `connection(o, flag, value)` reads the connection
 * flags the other commands share (--redis, --cluster) into `o`; true when it took the flag.
 */
function parseRulesArgs(argv, UsageError) {
  const o = { sub: null, json: false, yes: false, redis: null, cluster: [], prefix: 'sluice', ttlMs: undefined }
  const t = {}
  const r = {}
  const windows = []
  const dimensions = {}
  const rest = walkArgs(argv, UsageError, (a, value) => {
    if (a === '--redis') o.redis = value()
    else if (a === '--cluster') o.cluster.push(value())
    else if (a === '--store-prefix') o.prefix = value()
    else if (a === '--json') o.json = true
    else if (a === '--kind') t.kind = value()
    else if (a === '--name') t.name = value()
    else if (a === '--prefix') t.prefix = value()
    else if (a === '--door') t.door = value()
    else if (a === '--key') t.key = value()
    else if (a === '--key-prefix') t.keyPrefix = value()
    else if (a === '--budget') t.budget = value()
    else if (a === '--tenant') t.tenant = value()
    else if (a === '--limit') r.limit = whole(a, value(), UsageError)
    else if (a === '--interval-ms') r.intervalMs = whole(a, value(), UsageError)
    else if (a === '--qps') {
      const v = value()
      r.qps = Number(v)
      if (!/^\d+(\.\d+)?$/.test(v)) throw new UsageError(`--qps must be a number, got ${quoted(v)}`)
    } else if (a === '--max-burst') r.maxBurst = whole(a, value(), UsageError)
    else if (a === '--window') {
      const v = value()
      const m = /^(\d+)\/(\d+)$/.exec(v)
      if (!m) throw new UsageError(`--window is LIMIT/MS (e.g. 100/60000), got ${quoted(v)}`)
      windows.push({ limit: Number(m[1]), intervalMs: Number(m[2]) })
    } else if (a === '--dimension') {
      const v = value()
      const at = v.lastIndexOf('=')
      if (at <= 0 || !/^\d+$/.test(v.slice(at + 1))) {
        throw new UsageError(`--dimension is NAME=LIMIT (e.g. tokens=100000), got ${quoted(v)}`)
      }
      dimensions[v.slice(0, at)] = { limit: Number(v.slice(at + 1)) }
    } else if (a === '--shadow') r.mode = 'shadow'
    else if (a === '--enforce') r.mode = 'enforce'
    else if (a === '--deny') r.access = 'deny'
    else if (a === '--allow') r.access = 'allow'
    else if (a === '--note') r.note = value()
    else if (a === '--ttl') {
      const v = value()
      o.ttlMs = durationMs(v)
      if (!(o.ttlMs > 0))
        throw new UsageError(`--ttl is a duration such as 7d, 12h, 30m, 90s or 500ms, got ${quoted(v)}`)
    } else if (a.startsWith('-')) throw new UsageError(`unknown option of rules ${quoted(a)}`)
    else return false
    return true
  })
  o.sub = rest[0] ?? null
  if (!SUBCOMMANDS.includes(o.sub)) {
    throw new UsageError(`rules needs one of ${SUBCOMMANDS.join(', ')}${o.sub ? `, got ${quoted(o.sub)}` : ''}`)
  }
  if (rest.length > 1) throw new UsageError(`unexpected argument ${quoted(rest[1])}`)
  if (windows.length > 0) r.windows = windows
  if (Object.keys(dimensions).length > 0) r.dimensions = dimensions
  const targeted = Object.keys(t).length > 0
  if (o.sub === 'unban') {
    if (t.door === undefined || t.key === undefined || Object.keys(t).length !== 2)
      throw new UsageError('rules unban needs --door and --key')
    o.target = t
  } else if (o.sub === 'set' || o.sub === 'delete') {
    if (!targeted)
      throw new UsageError(
        `rules ${o.sub} needs a target: --kind and --name or --prefix, --door, or --budget and --tenant`,
      )
    o.target = t
  } else if (targeted) throw new UsageError(`rules ${o.sub} takes no target`)
  if (o.sub === 'set') o.rule = r
  else if (Object.keys(r).length > 0 || o.ttlMs !== undefined) throw new UsageError(`rules ${o.sub} takes no rule`)
  return o
}

/** A target in words, escaped. */
function targetText(t) {
  if ('kind' in t)
    return 'name' in t
      ? `${termText(t.kind)} ${quoted(t.name)}`
      : `${termText(t.kind)} names starting ${quoted(t.prefix)}`
  if ('door' in t) {
    if ('key' in t) return `door ${quoted(t.door)} key ${quoted(t.key)}`
    if (t.keyPrefix) return `door ${quoted(t.door)} keys starting ${quoted(t.keyPrefix)}`
    return `door ${quoted(t.door)}`
  }
  return `budget ${quoted(t.budget)} tenant ${quoted(t.tenant)}`
}

/** A rule's fields in words (no target), escaped. */
function ruleText(rule) {
  const parts = []
  for (const [k, v] of Object.entries(rule)) {
    if (k === 'target' || k === 'note' || k === 'expiresAt') continue
    parts.push(`${k}=${typeof v === 'string' ? termText(v) : jsonText(v)}`)
  }
  if (rule.expiresAt !== undefined) parts.push(`until ${new Date(rule.expiresAt).toISOString()}`)
  if (rule.note !== undefined) parts.push(`note ${quoted(rule.note)}`)
  return parts.join('  ')
}

/** Runs a parsed rules command on `store`; writes to `out`. */
async function runRules(o, store, out) {
  const rules = store.rules
  if (o.sub === 'set') {
    await rules.set(o.target, o.rule, o.ttlMs === undefined ? undefined : { ttlMs: o.ttlMs })
    return out(
      o.json
        ? jsonText({ set: true, target: o.target, ...o.rule })
        : `set ${targetText(o.target)}: ${ruleText(o.rule)}`,
    )
  }
  if (o.sub === 'delete') {
    const had = await rules.delete(o.target)
    if (o.json) return out(jsonText({ deleted: had, target: o.target }))
    return out(had ? `deleted the rule of ${targetText(o.target)}` : `no rule for ${targetText(o.target)}`)
  }
  if (o.sub === 'unban') {
    const had = await rules.unban(o.target)
    if (o.json) return out(jsonText({ unbanned: had, target: o.target }))
    return out(had ? `lifted the ban of ${targetText(o.target)}` : `no ban for ${targetText(o.target)}`)
  }
  if (o.sub === 'history') {
    const changes = await rules.history()
    if (o.json) return out(jsonText(changes, 2))
    if (changes.length === 0) return out('no rule changes')
    return out(
      changes
        .map(
          (c) =>
            `${new Date(c.at).toISOString()}  ${targetText(c.target)}: ${c.rule === null ? 'deleted' : ruleText(c.rule)}`,
        )
        .join('\n'),
    )
  }
  const list = o.sub === 'bans' ? await rules.bans() : await rules.list()
  if (o.json) return out(jsonText(list, 2))
  if (list.length === 0) return out(o.sub === 'bans' ? 'no bans' : 'no rules')
  return out(list.map((rule) => `${targetText(rule.target)}: ${ruleText(rule)}`).join('\n'))
}

module.exports = { parseRulesArgs, runRules, durationMs, walkArgs }
