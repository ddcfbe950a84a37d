#!/usr/bin/env node
'use strict'

// npx sluice: look at the limiters a Redis holds, from a shell.
//   sluice list | inspect <name> | stats <name> | reset <name> [--yes]
//     --redis URL | --cluster URL [--cluster URL...]  [--prefix P] [--kind K] [--json]
// Exit codes: 0 done, 1 Redis unreachable or a store error, 2 bad usage or nothing to do.

const readline = require('node:readline')
const sluice = require('../lib/index.js')

const USAGE = `usage: sluice <command> [options]

commands:
  list                 the limiters used recently (most recent first)
  inspect <name>       a limiter's options, statistics and live state
  stats <name>         a limiter's statistics
  reset <name>         forget what a limiter counted (asks first unless --yes)

options:
  --redis URL          a standalone Redis (default: $SLUICE_REDIS_URL)
  --cluster URL        a Redis Cluster seed node (repeat for more)
  --prefix P           the stores' key prefix (default: sluice)
  --kind K             when a name is used by more than one kind
  --json               machine-readable output
  --yes                reset without asking`

const KINDS = ['pacer', 'bucket', 'window', 'leaky', 'points', 'concurrent', 'sliding', 'quota', 'fair']
const RESETTABLE = ['bucket', 'window', 'leaky', 'points', 'sliding']

class UsageError extends Error {}

function parseArgs(argv) {
  const o = {
    command: null,
    name: null,
    redis: null,
    cluster: [],
    prefix: 'sluice',
    kind: null,
    json: false,
    yes: false,
  }
  const rest = []
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]
    const value = () => {
      if (i + 1 >= argv.length) throw new UsageError(`${a} needs a value`)
      return argv[++i]
    }
    if (a === '--redis') o.redis = value()
    else if (a === '--cluster') o.cluster.push(value())
    else if (a === '--prefix') o.prefix = value()
    else if (a === '--kind') o.kind = value()
    else if (a === '--json') o.json = true
    else if (a === '--yes' || a === '-y') o.yes = true
    else if (a === '--help' || a === '-h') o.command = 'help'
    else if (a.startsWith('-')) throw new UsageError(`unknown option ${a}`)
    else rest.push(a)
  }
  if (o.command === 'help') return o
  o.command = rest[0] || null
  o.name = rest[1] || null
  if (!['list', 'inspect', 'stats', 'reset'].includes(o.command)) {
    throw new UsageError(o.command ? `unknown command ${o.command}` : 'a command is needed')
  }
  if (o.command !== 'list' && !o.name) throw new UsageError(`${o.command} needs a limiter name`)
  if (rest.length > (o.command === 'list' ? 1 : 2)) throw new UsageError(`unexpected argument ${rest.at(-1)}`)
  if (o.kind !== null && !KINDS.includes(o.kind)) throw new UsageError(`--kind must be one of ${KINDS.join(', ')}`)
  if (!o.redis && o.cluster.length === 0) o.redis = process.env.SLUICE_REDIS_URL || null
  if (!o.redis && o.cluster.length === 0) throw new UsageError('say where Redis is: --redis URL or --cluster URL')
  return o
}

/** `redis://user:***@host:port`: never print a password. */
function shown(url) {
  return url.replace(/\/\/([^:@/]*):[^@/]*@/, '//$1:***@').replace(/\/\/([^:@/]+)@/, '//***@')
}

/** A limiter object for a registry entry, to read its statistics and state. */
function limiterOf(store, info) {
  const { kind, name, options: o } = info
  switch (kind) {
    case 'bucket':
      return new sluice.BucketLimiter(store, { name, limit: o.limit, interval: o.intervalMs })
    case 'window':
      return new sluice.WindowLimiter(store, { name, limit: o.limit, interval: o.intervalMs })
    case 'leaky':
      return new sluice.LeakyLimiter(store, { name, limit: o.limit, interval: o.intervalMs })
    case 'points':
      return new sluice.PointsLimiter(store, { name, points: o.points, interval: o.intervalMs })
    case 'sliding':
      return new sluice.SlidingWindowLimiter(store, { name, windows: o.windows })
    case 'pacer':
      return new sluice.DistributedPacer(store, { key: name, qps: o.qps, maxBurst: o.maxBurst })
    case 'concurrent':
      return new sluice.ConcurrentLimiter(store, { name, limit: o.limit, lockTimeoutMs: o.lockTimeoutMs })
    case 'fair':
      return new sluice.FairTenant(store, {
        name,
        mode: o.mode,
        rules: o.rules.map((r) => ({ queue: r.queue, threshold: r.threshold, perMs: r.perMs })),
        maxWindowMs: Math.max(...o.rules.map((r) => r.perMs)),
      })
    default:
      return null
  }
}

async function statsOf(store, info) {
  if (info.kind === 'quota') return new sluice.QuotaLimiter(store).stats(info.name)
  return limiterOf(store, info).stats()
}

/** What the limiter holds now (reads only; nothing is charged). */
async function stateOf(store, info) {
  const limiter = limiterOf(store, info)
  switch (info.kind) {
    case 'bucket':
    case 'window':
    case 'leaky':
    case 'points': {
      const d = await limiter.peek()
      return { remaining: d.remaining, limit: d.limit, retryAfterMs: d.retryAfterMs, resetAfterMs: d.resetAfterMs }
    }
    case 'sliding': {
      const d = await limiter.peek(0)
      return { windows: d.windows.map((w) => ({ limit: w.limit, intervalMs: w.intervalMs, remaining: w.remaining })) }
    }
    case 'pacer': {
      const o = await limiter.rateLimit(0) // a probe: charges nothing
      return { backlogMs: o.delayMs, watermark: o.watermark }
    }
    case 'concurrent': {
      const s = await limiter.stats()
      return { held: s.current, waiting: s.waiting, limit: info.options.limit }
    }
    default:
      return {}
  }
}

async function find(store, o) {
  const all = await store.limiters()
  const matches = all.filter((l) => l.name === o.name && (o.kind === null || l.kind === o.kind))
  if (matches.length === 0) {
    throw new UsageError(
      `no limiter named ${JSON.stringify(o.name)}${o.kind ? ` of kind ${o.kind}` : ''} was used recently`,
    )
  }
  if (matches.length > 1) {
    throw new UsageError(
      `${JSON.stringify(o.name)} is used by ${matches.map((m) => m.kind).join(' and ')}: say which with --kind`,
    )
  }
  return matches[0]
}

function ago(ms) {
  const s = Math.max(0, Math.round((Date.now() - ms) / 1000))
  if (s < 60) return `${s}s ago`
  if (s < 3600) return `${Math.round(s / 60)}m ago`
  if (s < 86400) return `${Math.round(s / 3600)}h ago`
  return `${Math.round(s / 86400)}d ago`
}

function table(rows) {
  const widths = rows[0].map((_, i) => Math.max(...rows.map((r) => String(r[i]).length)))
  return rows
    .map((r) =>
      r
        .map((c, i) => String(c).padEnd(widths[i]))
        .join('  ')
        .trimEnd(),
    )
    .join('\n')
}

function ask(question) {
  const rl = readline.createInterface({ input: process.stdin, output: process.stderr })
  return new Promise((resolve) => {
    rl.question(question, (answer) => {
      rl.close()
      resolve(/^y(es)?$/i.test(answer.trim()))
    })
  })
}

async function run(o, out) {
  const where = o.cluster.length ? o.cluster.map(shown).join(', ') : shown(o.redis)
  let store
  try {
    store = await sluice.RedisStore.connect({
      ...(o.cluster.length ? { cluster: o.cluster } : { url: o.redis }),
      keyPrefix: o.prefix,
      connectTimeoutMs: 3000,
      commandTimeoutMs: 3000,
      statsFlushMs: 600_000,
    })
  } catch (err) {
    const e = new Error(`cannot reach Redis at ${where}: ${err.code || ''} ${err.message}`.replace(/\s+/g, ' '))
    e.exitCode = 1
    throw e
  }
  try {
    if (o.command === 'list') {
      const all = await store.limiters()
      if (o.json) return out(JSON.stringify(all, null, 2))
      if (all.length === 0) return out(`no limiters used recently under prefix ${o.prefix}`)
      const rows = [['KIND', 'NAME', 'LAST USE', 'OPTIONS']]
      for (const l of all) rows.push([l.kind, l.name, ago(l.lastUse), JSON.stringify(l.options)])
      return out(table(rows))
    }
    const info = await find(store, o)
    if (o.command === 'stats') {
      const s = await statsOf(store, info)
      if (o.json) return out(JSON.stringify({ kind: info.kind, name: info.name, stats: s }, null, 2))
      return out(table([['FIELD', 'VALUE'], ...Object.entries(s).map(([k, v]) => [k, v])]))
    }
    if (o.command === 'inspect') {
      const [stats, state] = await Promise.all([statsOf(store, info), stateOf(store, info)])
      const all = { ...info, lastUseAgo: ago(info.lastUse), state, stats }
      if (o.json) return out(JSON.stringify(all, null, 2))
      const lines = [
        `${info.kind} ${info.name}  (last use ${ago(info.lastUse)})`,
        `options: ${JSON.stringify(info.options)}`,
        `now:     ${JSON.stringify(state)}`,
        table([['STAT', 'VALUE'], ...Object.entries(stats).map(([k, v]) => [k, v])]),
      ]
      return out(lines.join('\n'))
    }
    // reset
    if (!RESETTABLE.includes(info.kind)) {
      throw new UsageError(`a ${info.kind} limiter cannot be reset (resettable: ${RESETTABLE.join(', ')})`)
    }
    if (!o.yes) {
      if (!process.stdin.isTTY) throw new UsageError('refusing to reset without --yes when stdin is not a terminal')
      if (!(await ask(`Reset ${info.kind} ${JSON.stringify(info.name)} at ${where}? [y/N] `))) {
        return out('not reset')
      }
    }
    await limiterOf(store, info).reset()
    if (o.json) return out(JSON.stringify({ reset: true, kind: info.kind, name: info.name }))
    return out(`reset ${info.kind} ${info.name}`)
  } finally {
    await store.close().catch(() => undefined)
  }
}

async function main(argv, out = (s) => process.stdout.write(`${s}\n`), err = (s) => process.stderr.write(`${s}\n`)) {
  let o
  try {
    o = parseArgs(argv)
  } catch (e) {
    err(`sluice: ${e.message}\n\n${USAGE}`)
    return 2
  }
  if (o.command === 'help') {
    out(USAGE)
    return 0
  }
  try {
    await run(o, out)
    return 0
  } catch (e) {
    if (e instanceof UsageError) {
      err(`sluice: ${e.message}`)
      return 2
    }
    err(`sluice: ${e.message}`)
    return e.exitCode || 1
  }
}

if (require.main === module) {
  main(process.argv.slice(2)).then((code) => {
    process.exitCode = code
  })
}

module.exports = { main, parseArgs }
