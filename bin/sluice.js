#!/usr/bin/env node
'use strict'

// npx sluice: look at the limiters a Redis holds, from a shell.
//   sluice list | inspect <name> | stats <name> | reset <name> [--key K] [--yes]
//     --redis URL | --cluster URL [--cluster URL...]  [--prefix P] [--kind K] [--json]
//   sluice dashboard --redis URL [--port N] [--host H] [--allowed-host H...] [--allow-reset] [--allow-write]
//   sluice rules list | set | delete | bans | unban | history (bin/rules.js)
// Exit codes: 0 done, 1 Redis unreachable or a store error, 2 bad usage or nothing to do.
//
// Nothing from the store reaches the terminal raw: every name goes through termText (control
// characters, bidi controls and `\` as escapes), JSON through jsonText, a URL through maskUrl
// (the whole userinfo masked).

const net = require('node:net')
const readline = require('node:readline')
const sluice = require('../lib/entries/index.js')
const { checkAllowedHosts } = require('../lib/doors/dashboard/hosts.js')
const { closestName } = require('../lib/base/errors.js')
const { parseRulesArgs, runRules, walkArgs } = require('./rules.js')

/** Whether `h` is an entry `dashboard({ allowedHosts })` takes. */
function isHostName(h) {
  try {
    checkAllowedHosts([h], '')
    return true
  } catch {
    return false
  }
}
const {
  KINDS,
  RESETTABLE,
  limiterOf,
  keyLimiterOf,
  statsOf,
  stateOf,
  termText,
  quoted,
  jsonText,
  maskUrl,
  redactIn,
} = require('../lib/doors/inspect.js')

const USAGE = `usage: sluice <command> [options]

commands:
  list                 the limiters used recently (most recent first)
  inspect <name>       a limiter's options, statistics and live state
  stats <name>         a limiter's statistics
  reset <name>         forget what a limiter counted (asks first unless --yes); an HTTP
                       door (kind door): one client's counts, named by --key
  dashboard            serve the dashboard page (until Ctrl-C)
  rules ...            the store's rules: list, set, delete, bans, unban, history (sluice rules --help)

options:
  --redis URL          a standalone Redis (default: $SLUICE_REDIS_URL, then $REDIS_URL,
                       then redis://127.0.0.1:6379; the one used is said on stderr)
  --cluster URL        a Redis Cluster seed node (repeat for more)
  --prefix P           the stores' key prefix (default: sluice)
  --kind K             when a name is used by more than one kind
  --key K              reset: the client key of an HTTP door whose counts to forget
  --json               machine-readable output
  --yes                reset without asking
  --port N             dashboard: the port (default 7031; 0 picks a free one)
  --host H             dashboard: the address to listen on (default 127.0.0.1)
  --allowed-host H     dashboard: a Host name the page answers to, besides localhost, IP
                       literals and --host (repeat for more; ".example.com" for it and its
                       subdomains; "all" turns the check off: open to DNS rebinding)
  --allow-reset        dashboard: allow resets from the page
  --allow-write        dashboard: allow setting and deleting rules (store.rules) from the page
  --version, -V        print sluice's version`

const RULES_USAGE = `usage: sluice rules list | bans | history [--json]
       sluice rules set <target> <what> [--ttl 7d] [--note TEXT]
       sluice rules delete <target>
       sluice rules unban --door D --key K   (lifts a door's ban)

<target>: --kind K --name N | --kind K --prefix P | --door D [--key K | --key-prefix P]
          | --budget B --tenant T
<what>:   --limit N [--interval-ms N] | --window LIMIT/MS (repeat) | --qps N [--max-burst N]
          | --dimension NAME=LIMIT (repeat) | --shadow | --deny | --allow
Redis:    --redis URL | --cluster URL (repeat); --store-prefix P (the stores' key prefix,
          default sluice: in this command --prefix is a target's name prefix)`

class UsageError extends Error {}

const COMMANDS = ['list', 'inspect', 'stats', 'reset', 'dashboard']
const FLAGS = [
  '--redis',
  '--cluster',
  '--prefix',
  '--kind',
  '--key',
  '--json',
  '--yes',
  '--port',
  '--host',
  '--allowed-host',
  '--allow-reset',
  '--allow-write',
  '--help',
  '--version',
]
/** ` (did you mean "--redis"?)` when one of `known` is close to what was typed, else ''. */
function didYouMean(typed, known) {
  const close = closestName(typed, known)
  return close === null ? '' : ` (did you mean ${JSON.stringify(close)}?)`
}

/** The Redis the commands use when neither --redis, --cluster, $SLUICE_REDIS_URL nor $REDIS_URL says. */
const DEFAULT_REDIS = 'redis://127.0.0.1:6379'

function parseArgs(argv) {
  const o = {
    command: null,
    name: null,
    redis: null,
    /** where the Redis URL came from: '--redis', '$SLUICE_REDIS_URL', '$REDIS_URL' or 'the default' */
    redisFrom: null,
    cluster: [],
    prefix: 'sluice',
    kind: null,
    key: null,
    json: false,
    yes: false,
    port: 7031,
    host: '127.0.0.1',
    allowedHosts: [],
    allowReset: false,
    allowWrite: false,
  }
  const rest = walkArgs(argv, UsageError, (a, value) => {
    if (a === '--redis') o.redis = value()
    else if (a === '--cluster') o.cluster.push(value())
    else if (a === '--prefix') o.prefix = value()
    else if (a === '--kind') o.kind = value()
    else if (a === '--key') o.key = value()
    else if (a === '--json') o.json = true
    else if (a === '--yes' || a === '-y') o.yes = true
    else if (a === '--port') {
      const v = value()
      o.port = /^\d{1,5}$/.test(v) ? Number(v) : NaN
      if (!(o.port >= 0 && o.port <= 65535)) throw new UsageError('--port must be a port number, 0 to 65535')
    } else if (a === '--host') o.host = value()
    else if (a === '--allowed-host') o.allowedHosts.push(value())
    else if (a === '--allow-reset') o.allowReset = true
    else if (a === '--allow-write') o.allowWrite = true
    else if (a === '--help' || a === '-h') o.command = 'help'
    else if (a === '--version' || a === '-V') o.command = 'version'
    else if (a.startsWith('-')) throw new UsageError(`unknown option ${quoted(a)}${didYouMean(a, FLAGS)}`)
    else return false
    return true
  })
  if (o.command === 'help' || o.command === 'version') return o
  o.command = rest[0] || null
  o.name = rest[1] || null
  if (!COMMANDS.includes(o.command)) {
    throw new UsageError(
      o.command ? `unknown command ${quoted(o.command)}${didYouMean(o.command, COMMANDS)}` : 'a command is needed',
    )
  }
  const named = o.command !== 'list' && o.command !== 'dashboard'
  if (named && !o.name) throw new UsageError(`${o.command} needs a limiter name`)
  if (rest.length > (named ? 2 : 1)) throw new UsageError(`unexpected argument ${quoted(rest.at(-1))}`)
  if (o.allowedHosts.length > 0) {
    if (o.command !== 'dashboard') throw new UsageError('--allowed-host is for the dashboard command')
    if (o.allowedHosts.includes('all')) {
      if (o.allowedHosts.length > 1) throw new UsageError('--allowed-host all cannot be combined with names')
      o.allowedHosts = 'all'
    } else {
      for (const h of o.allowedHosts) {
        if (!isHostName(h)) {
          throw new UsageError(
            `--allowed-host ${quoted(h)} is not a host name: a name without port ("admin.example.com"), ".example.com" for it and its subdomains, or "all"`,
          )
        }
      }
    }
  }
  if (o.key !== null && o.command !== 'reset') throw new UsageError('--key is for the reset command')
  if (o.kind !== null && !KINDS.includes(o.kind)) throw new UsageError(`--kind must be one of ${KINDS.join(', ')}`)
  redisFromEnv(o)
  return o
}

/** `redis://***@host:port`: never print a password (nor a user name), nor a control character. */
const shown = (url) => termText(maskUrl(url))

/** A message from elsewhere (the store) for the terminal: the URLs' secrets out, then escaped. */
function foreign(o, message) {
  let text = String(message)
  for (const url of o.redis ? [o.redis, ...o.cluster] : o.cluster) text = redactIn(text, url)
  return termText(text)
}

async function find(store, o) {
  const all = await store.limiters()
  const matches = all.filter((l) => l.name === o.name && (o.kind === null || l.kind === o.kind))
  if (matches.length === 0) {
    throw new UsageError(`no limiter named ${quoted(o.name)}${o.kind ? ` of kind ${o.kind}` : ''} was used recently`)
  }
  if (matches.length > 1) {
    throw new UsageError(
      `${quoted(o.name)} is used by ${matches.map((m) => termText(m.kind)).join(' and ')}: say which with --kind`,
    )
  }
  return matches[0]
}

// A limiter's last use, as the registry holds it: each process writes it at every statistics
// flush that finds the limiter used (every statsFlushMs, 5 s by default; lib/store/stats-writer.js)
const LAST_USE_LAG = 'as of the last statistics flush: up to statsFlushMs (5 s by default) late'

function ago(ms) {
  const s = Math.max(0, Math.round((Date.now() - ms) / 1000))
  if (s < 60) return `${s}s ago`
  if (s < 3600) return `${Math.round(s / 60)}m ago`
  if (s < 86400) return `${Math.round(s / 3600)}h ago`
  return `${Math.round(s / 86400)}d ago`
}

/** Rows of cells as aligned text; every cell escaped for the terminal (one cell, one line; an object as JSON). */
function table(cells) {
  const rows = cells.map((r) => r.map((c) => termText(c !== null && typeof c === 'object' ? JSON.stringify(c) : c)))
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

/** Where the commands' Redis is when neither --redis nor --cluster says (see parseArgs). */
function redisFromEnv(o) {
  if (o.redis) o.redisFrom = '--redis'
  else if (o.cluster.length === 0) {
    const env = process.env
    if (env.SLUICE_REDIS_URL) [o.redis, o.redisFrom] = [env.SLUICE_REDIS_URL, '$SLUICE_REDIS_URL']
    else if (env.REDIS_URL) [o.redis, o.redisFrom] = [env.REDIS_URL, '$REDIS_URL']
    else [o.redis, o.redisFrom] = [DEFAULT_REDIS, 'the default']
  }
}

/** The store the commands use, and where it is (for messages); exit 1 when unreachable. */
async function connect(o, warn) {
  const where = o.cluster.length ? o.cluster.map(shown).join(', ') : shown(o.redis)
  // a URL the user did not type: say which one, on stderr (stdout stays the command's, --json too)
  if (o.redisFrom !== null && o.redisFrom !== '--redis') warn(`sluice: Redis at ${where} (from ${o.redisFrom})`)
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
    const why = foreign(o, `${err.code || ''} ${err.message}`.replace(/\s+/g, ' ').trim())
    const from = o.redisFrom !== null && o.redisFrom !== '--redis' ? ` (from ${o.redisFrom})` : ''
    const e = new Error(`cannot reach Redis at ${where}${from}: ${why}`)
    e.exitCode = 1
    e.escaped = true
    throw e
  }
  return { store, where }
}

/** `sluice rules ...` (bin/rules.js): a store error of bad input (ERR_INVALID_ARGUMENT) is a usage error. */
async function rulesCommand(argv, out, warn) {
  if (argv.includes('--help') || argv.includes('-h')) return out(RULES_USAGE)
  const o = parseRulesArgs(argv, UsageError)
  o.redisFrom = null
  redisFromEnv(o)
  const { store } = await connect(o, warn)
  try {
    await runRules(o, store, out)
  } catch (err) {
    if (err && err.code === 'ERR_INVALID_ARGUMENT') throw new UsageError(termText(err.message))
    throw err
  } finally {
    await store.close().catch(() => undefined)
  }
}

async function run(o, out, warn) {
  const { store, where } = await connect(o, warn)
  if (o.command === 'dashboard') return serveDashboard(o, store, where, out, warn)
  try {
    if (o.command === 'list') {
      const all = await store.limiters()
      if (o.json) return out(jsonText(all, 2))
      if (all.length === 0) return out(`no limiters used recently under prefix ${quoted(o.prefix)}`)
      const rows = [['KIND', 'NAME', 'LAST USE', 'OPTIONS']]
      for (const l of all) rows.push([l.kind, l.name, ago(l.lastUse), jsonText(l.options)])
      // the note on stderr: stdout stays one line per row
      warn(`LAST USE: ${LAST_USE_LAG}`)
      return out(table(rows))
    }
    const info = await find(store, o)
    if (o.command === 'stats') {
      const s = await statsOf(store, info)
      if (o.json) return out(jsonText({ kind: info.kind, name: info.name, stats: s }, 2))
      return out(table([['FIELD', 'VALUE'], ...Object.entries(s).map(([k, v]) => [k, v])]))
    }
    if (o.command === 'inspect') {
      const [stats, state] = await Promise.all([statsOf(store, info), stateOf(store, info)])
      const all = { ...info, lastUseAgo: ago(info.lastUse), state, stats }
      if (o.json) return out(jsonText(all, 2))
      const lines = [
        `${termText(info.kind)} ${termText(info.name)}  (last use ${ago(info.lastUse)}, ${LAST_USE_LAG})`,
        `options: ${jsonText(info.options)}`,
        `now:     ${jsonText(state)}`,
        table([['STAT', 'VALUE'], ...Object.entries(stats).map(([k, v]) => [k, v])]),
      ]
      return out(lines.join('\n'))
    }
    // reset: a limiter, or one client of an HTTP door (--key)
    let target
    if (o.key !== null) {
      target = keyLimiterOf(store, info, o.key)
      if (target === null) {
        throw new UsageError(
          `--key resets one client of an HTTP door (kind door) whose windows the registry knows; ${quoted(info.name)} is a ${termText(info.kind)} limiter${info.kind === 'door' ? ' whose clients cannot be reset (a windowMs function, or a gcra door)' : ''}`,
        )
      }
    } else if (!RESETTABLE.includes(info.kind)) {
      const door = info.kind === 'door' ? ': an HTTP door resets one client at a time, with --key' : ''
      throw new UsageError(
        `a ${termText(info.kind)} limiter cannot be reset (resettable: ${RESETTABLE.join(', ')})${door}`,
      )
    } else {
      target = limiterOf(store, info)
    }
    const key = o.key !== null ? ` key ${quoted(o.key)}` : ''
    if (!o.yes) {
      if (!process.stdin.isTTY) throw new UsageError('refusing to reset without --yes when stdin is not a terminal')
      if (!(await ask(`Reset ${termText(info.kind)} ${quoted(info.name)}${key} at ${where}? [y/N] `))) {
        return out('not reset')
      }
    }
    await target.reset()
    if (o.json) {
      const client = o.key !== null ? { key: o.key } : {}
      return out(jsonText({ reset: true, kind: info.kind, name: info.name, ...client }))
    }
    return out(`reset ${termText(info.kind)} ${termText(info.name)}${key}`)
  } finally {
    await store.close().catch(() => undefined)
  }
}

/** Serves the dashboard until SIGINT or SIGTERM, then closes the server and the store. */
async function serveDashboard(o, store, where, out, warn) {
  const http = require('node:http')
  const { createDashboard } = require('../lib/doors/dashboard/server.js')
  // the Host names the page answers to besides loopback names and IP literals: --host when it
  // is a name, and each --allowed-host (a page elsewhere rebinding its name to this address
  // is refused: DNS rebinding)
  const bound = net.isIP(o.host) || !isHostName(o.host) ? [] : [o.host]
  const allowedHosts = o.allowedHosts === 'all' ? 'all' : [...bound, ...o.allowedHosts]
  const handler = createDashboard(
    { store, allowReset: o.allowReset, allowWrite: o.allowWrite, title: `sluice · ${where}`, allowedHosts },
    {
      reset: 'start npx sluice dashboard with --allow-reset',
      write: 'start npx sluice dashboard with --allow-write',
      host: (name) => `start npx sluice dashboard with --allowed-host ${name}`,
      warnAllHosts: false, // warned below, in the CLI's words
    },
  )
  const server = http.createServer((req, res) => handler(req, res))
  try {
    await new Promise((resolve, reject) => {
      server.once('error', reject)
      server.listen(o.port, o.host, resolve)
    })
  } catch (err) {
    await store.close().catch(() => undefined)
    const e = new Error(`cannot listen on ${termText(o.host)}:${o.port}: ${termText(err.code || err.message)}`)
    e.escaped = true
    throw e
  }
  const { port } = server.address()
  const host = o.host.includes(':') ? `[${o.host}]` : o.host
  out(
    `sluice dashboard on http://${termText(host)}:${port}/ (Redis at ${where}${o.allowReset ? ', resets allowed' : ''}${o.allowWrite ? ', rule edits allowed' : ''})`,
  )
  if (allowedHosts === 'all') {
    warn(
      'sluice: WARNING: --allowed-host all: the dashboard answers requests for any Host name. A web page ' +
        'on any site can rebind its name to this address (DNS rebinding) and then read every limiter' +
        `${o.allowReset ? ' and reset them' : ''}. Use it only behind a proxy that checks Host itself.`,
    )
  }
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
  if (argv[0] === 'rules') {
    try {
      await rulesCommand(argv.slice(1), out, err)
      return 0
    } catch (e) {
      if (e instanceof UsageError) {
        err(`sluice: ${e.message}\n\n${RULES_USAGE}`)
        return 2
      }
      err(`sluice: ${e.escaped === true ? e.message : termText(e.message)}`)
      return e.exitCode || 1
    }
  }
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
  if (o.command === 'version') {
    out(`sluice ${require('../package.json').version}`)
    return 0
  }
  try {
    await run(o, out, err)
    return 0
  } catch (e) {
    // our own messages escape what they quote; anyone else's (a store error) is escaped whole
    if (e instanceof UsageError) {
      err(`sluice: ${e.message}`)
      return 2
    }
    err(`sluice: ${e.escaped === true ? e.message : foreign(o, e.message)}`)
    return e.exitCode || 1
  }
}

if (require.main === module) {
  main(process.argv.slice(2)).then((code) => {
    process.exitCode = code
  })
}

module.exports = { main, parseArgs }
