'use strict'
// One process of the Budget multi-process tests. Config comes as JSON in argv[2]. Each loop
// reserves { requests: 1, tokens: random } (no bound on the wait), then settles: mostly as
// reserved, sometimes less (a refund) or more (debt). Every reservation goes back over IPC with
// the store's decision time and its start (Redis' clock), every settlement with the local times
// around it. It counts; the test judges. `mode: 'hold'` reserves once, reports, and waits to be
// killed.
const { Budget, ManualClock } = require('../../lib/entries/index.js')
const { sleep, storeOf, runWorker } = require('./worker-support.js')

async function hold(cfg) {
  const store = await storeOf(cfg, { clock: new ManualClock(cfg.clockMs) })
  const budget = new Budget(store, { name: cfg.name, dimensions: cfg.dimensions })
  const r = await budget.reserve({ requests: 1, tokens: cfg.tokens }, { ttlMs: cfg.ttlMs })
  process.send({ id: r.id })
  return new Promise(() => {}) // killed here, never settles
}

/** Says `{ ready: true }` and resolves with the `startAt` the test sends back (every process at once). */
const together = () =>
  new Promise((resolve) => {
    process.once('message', (m) => resolve(m.startAt))
    process.send({ ready: true })
  })

// `mode: 'tenant'`: loops of one tenant view, { requests: 1 } each, settled as reserved, from
// `startAt + delayMs` (`startAt` from the test once every process is connected); every start
// goes back with the tenant's name
async function tenant(cfg) {
  const store = await storeOf(cfg)
  const budget = new Budget(store, { name: cfg.name, dimensions: cfg.dimensions })
  const view = budget.tenant(cfg.tenant, cfg.tenantOptions)
  cfg.startAt = await together()
  await sleep(Math.max(0, cfg.startAt + cfg.delayMs - Date.now()))
  const reserved = []
  const loop = async () => {
    while (Date.now() < cfg.startAt + cfg.durationMs) {
      const r = await view.reserve({ requests: 1 }, { maxWaitMs: Infinity })
      reserved.push({ startUs: Math.round(r.startMs * 1000), nowUs: r._nowUs, tenant: cfg.tenant })
      await r.settle({ requests: 1 })
    }
  }
  await Promise.all(Array.from({ length: cfg.inflight }, loop))
  const stats = await view.stats()
  await store.close()
  return { reserved, stats, startAt: cfg.startAt }
}

// `mode: 'roles'`: loops of several tenants in this process. It reports `{ ready: true }` once
// connected and starts at the `startAt` the test sends back (every process at once). Each role
// `{ tenant, tenantOptions, inflight, minTokens, maxTokens, fromMs, untilMs, gapMs }` runs
// `inflight` loops from `startAt + fromMs`: reserve { tokens: minTokens..maxTokens }, settle at
// once, pause gapMs; at `startAt + untilMs` its waits are aborted (nothing charged). Every start
// goes back with its tenant, tokens and delay.
async function roles(cfg) {
  const store = await storeOf(cfg)
  const budget = new Budget(store, { name: cfg.name, dimensions: cfg.dimensions })
  const startAt = await together()
  let seed = cfg.seed
  const random = () => {
    seed = (seed * 1103515245 + 12345) % 2147483648
    return seed / 2147483648
  }
  const reserved = []
  const loop = async (role, stop) => {
    const view = budget.tenant(role.tenant, role.tenantOptions)
    await sleep(Math.max(0, startAt + role.fromMs - Date.now()))
    while (!stop.aborted) {
      const tokens = role.minTokens + Math.floor(random() * (role.maxTokens - role.minTokens + 1))
      let r
      try {
        r = await view.reserve({ tokens }, { maxWaitMs: Infinity, signal: stop })
      } catch (err) {
        if (err.code === 'ERR_ABORTED') return
        throw err
      }
      reserved.push({ startUs: Math.round(r.startMs * 1000), tenant: role.tenant, tokens, delayMs: r.delayMs })
      await r.settle({ tokens })
      if (role.gapMs) await sleep(role.gapMs)
    }
  }
  await Promise.all(
    cfg.roles.flatMap((role) => {
      const stop = AbortSignal.timeout(Math.max(1, startAt + role.untilMs - Date.now()))
      return Array.from({ length: role.inflight }, () => loop(role, stop))
    }),
  )
  await store.close()
  return { reserved, startAt }
}

async function main(cfg) {
  if (cfg.mode === 'hold') return hold(cfg)
  if (cfg.mode === 'tenant') return tenant(cfg)
  if (cfg.mode === 'roles') return roles(cfg)
  const store = await storeOf(cfg)
  const budget = new Budget(store, { name: cfg.name, dimensions: cfg.dimensions })
  await sleep(Math.max(0, cfg.startAt - Date.now()))
  const reserved = []
  const settled = []
  let seed = cfg.seed
  const random = () => {
    seed = (seed * 1103515245 + 12345) % 2147483648
    return seed / 2147483648
  }
  const loop = async () => {
    while (Date.now() < cfg.startAt + cfg.durationMs) {
      const tokens = 1 + Math.floor(random() * cfg.maxTokens)
      const r = await budget.reserve({ requests: 1, tokens }, { maxWaitMs: Infinity })
      reserved.push({ startUs: Math.round(r.startMs * 1000), nowUs: r._nowUs, tokens })
      const p = random()
      const actual = p < 0.2 ? tokens + cfg.maxTokens : p < 0.4 ? Math.floor(tokens / 2) : tokens
      const before = Date.now()
      await r.settle({ tokens: actual })
      settled.push({ before, after: Date.now(), diff: actual - tokens })
    }
  }
  await Promise.all(Array.from({ length: cfg.inflight }, loop))
  await store.close()
  return { reserved, settled }
}

runWorker(main)
