#!/usr/bin/env node
'use strict'

// npx sluice: look at the limiters a Redis holds, from a shell.
//   sluice list | inspect <name> | stats <name> | reset <name> [--yes]
//     --redis URL | --cluster URL [--cluster URL...]  [--prefix P] [--kind K] [--json]
//   sluice dashboard --redis URL [--port N] [--host H] [--allow-reset]: serves sluice/dashboard
// Exit codes: 0 done, 1 Redis unreachable or a store error, 2 bad usage or nothing to do.

const readline = require('node:readline')
const sluice = require('../lib/index.js')
const { KINDS, RESETTABLE, limiterOf, statsOf, stateOf } = require('../lib/inspect.js')

const USAGE = `usage: sluice <command> [options]

commands:
  list                 the limiters used recently (most recent first)
  inspect <name>       a limiter's options, statistics and live state
  stats <name>         a limiter's statistics
  reset <name>         forget what a limiter counted (asks first unless --yes)
  dashboard            serve the dashboard page (until Ctrl-C)

options:
  --redis URL          a standalone Redis (default: $SLUICE_REDIS_URL)
  --cluster URL        a Redis Cluster seed node (repeat for more)
  --prefix P           the stores' key prefix (default: sluice)
  --kind K             when a name is used by more than one kind
  --json               machine-readable output
  --yes                reset without asking
  --port N             dashboard: the port (default 7031; 0 picks a free one)
  --host H             dashboard: the address to listen on (default 127.0.0.1)
  --allow-reset        dashboard: allow resets from the page`

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
    port: 7031,
    host: '127.0.0.1',
    allowReset: false,
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
    else if (a === '--port') {
      const v = value()
      o.port = /^\d{1,5}$/.test(v) ? Number(v) : NaN
      if (!(o.port >= 0 && o.port <= 65535)) throw new UsageError('--port must be a port number, 0 to 65535')
    } else if (a === '--host') o.host = value()
    else if (a === '--allow-reset') o.allowReset = true
    else if (a === '--help' || a === '-h') o.command = 'help'
    else if (a.startsWith('-')) throw new UsageError(`unknown option ${a}`)
    else rest.push(a)
  }
  if (o.command === 'help') return o
  o.command = rest[0] || null
  o.name = rest[1] || null
  if (!['list', 'inspect', 'stats', 'reset', 'dashboard'].includes(o.command)) {
    throw new UsageError(o.command ? `unknown command ${o.command}` : 'a command is needed')
  }
  const named = o.command !== 'list' && o.command !== 'dashboard'
  if (named && !o.name) throw new UsageError(`${o.command} needs a limiter name`)
  if (rest.length > (named ? 2 : 1)) throw new UsageError(`unexpected argument ${rest.at(-1)}`)
  if (o.kind !== null && !KINDS.includes(o.kind)) throw new UsageError(`--kind must be one of ${KINDS.join(', ')}`)
  if (!o.redis && o.cluster.length === 0) o.redis = process.env.SLUICE_REDIS_URL || null
  if (!o.redis && o.cluster.length === 0) throw new UsageError('say where Redis is: --redis URL or --cluster URL')
  return o
}

/** `redis://user:***@host:port`: never print a password. */
function shown(url) {
  return url.replace(/\/\/([^:@/]*):[^@/]*@/, '//$1:***@').replace(/\/\/([^:@/]+)@/, '//***@')
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
  if (o.command === 'dashboard') return serveDashboard(o, store, where, out)
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

/** Serves the dashboard until SIGINT or SIGTERM, then closes the server and the store. */
async function serveDashboard(o, store, where, out) {
  const http = require('node:http')
  const { dashboard } = require('../lib/dashboard.js')
  const handler = dashboard({ store, allowReset: o.allowReset, title: `sluice · ${where}` })
  const server = http.createServer((req, res) => handler(req, res))
  try {
    await new Promise((resolve, reject) => {
      server.once('error', reject)
      server.listen(o.port, o.host, resolve)
    })
  } catch (err) {
    await store.close().catch(() => undefined)
    throw new Error(`cannot listen on ${o.host}:${o.port}: ${err.code || err.message}`)
  }
  const { port } = server.address()
  const host = o.host.includes(':') ? `[${o.host}]` : o.host
  out(`sluice dashboard on http://${host}:${port}/ (Redis at ${where}${o.allowReset ? ', resets allowed' : ''})`)
  await new Promise((resolve) => {
    const stop = () => {
      process.off('SIGINT', stop)
      process.off('SIGTERM', stop)
      server.close(() => resolve())
      server.closeAllConnections()
    }
    process.on('SIGINT', stop)
    process.on('SIGTERM', stop)
  })
  await store.close().catch(() => undefined)
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
