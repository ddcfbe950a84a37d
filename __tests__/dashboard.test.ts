// sluice/dashboard: its JSON API on every store (the numbers the store holds, per-minute
// history on an injected clock, reset only with allowReset and the CSRF token), mounted in
// node:http, Express and Fastify; the page in a real headless browser (Debian's chromium);
// `npx sluice dashboard`.
import { spawn } from 'node:child_process'
import { existsSync, mkdirSync } from 'node:fs'
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import { join } from 'node:path'
import express from 'express'
import Fastify from 'fastify'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import {
  Budget,
  BucketLimiter,
  ConcurrentLimiter,
  DistributedPacer,
  ManualClock,
  MemoryStore,
  RedisStore,
  SlidingWindowLimiter,
  type Store,
} from '../lib/entries/index.js'
import { dashboard, defaultGroup } from '../lib/entries/dashboard.js'
import { STORE_KINDS, freshPrefix, redisUrl, useStore } from './helpers/stores.js'
import { request, startCliDashboard, withoutHost } from './helpers/dashboard-http.js'

const MIN = 60_000
const T0 = Date.UTC(2026, 10, 23, 12, 0, 0) // a minute's start
const ROOT = join(__dirname, '..')
const ARTIFACTS = join(ROOT, 'test-artifacts')

type Handler = ReturnType<typeof dashboard>

/** A node:http server for `handler`; returns its base URL and a close function. */
async function serve(handler: (req: http.IncomingMessage, res: http.ServerResponse) => void) {
  const server = http.createServer(handler)
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  return { base, close: () => new Promise<void>((r) => (server.closeAllConnections(), server.close(() => r()))) }
}

async function getJson(url: string, init?: RequestInit) {
  const res = await fetch(url, { redirect: 'manual', ...init })
  const text = await res.text()
  return { status: res.status, headers: res.headers, body: text.startsWith('{') ? JSON.parse(text) : text }
}

const tokenOf = (html: string) => /name="sluice-csrf" content="([^"]+)"/.exec(html)![1]

/** Writes a RedisStore's counts now (a MemoryStore's are exact at once). */
async function flushed(store: Store) {
  const s = store as unknown as { _flushStats?: () => Promise<void> }
  if (s._flushStats) await s._flushStats()
}

/** Decisions of several kinds at T0 and T0 + 2 min: the numbers the tests expect back. */
async function traffic(store: Store, clock: ManualClock) {
  clock.set(T0 + 5_000)
  const api = new BucketLimiter(store, { name: 'api', limit: 3, interval: 'hour' })
  for (let i = 0; i < 5; i++) await api.check() // 3 admitted, 2 refused
  await new DistributedPacer(store, { key: 'partner', qps: 5, maxBurst: 4 }).rateLimit()
  await new SlidingWindowLimiter(store, { name: 'login', windows: [{ limit: 10, intervalMs: MIN }] }).check()
  const pdf = new ConcurrentLimiter(store, { name: 'pdf', limit: 2, lockTimeoutMs: 3_600_000 })
  await pdf.acquire() // held: the page shows 1 of 2 held
  await flushed(store)
  clock.set(T0 + 2 * MIN + 1_000)
  const u1 = new BucketLimiter(store, { name: 'user_1', limit: 2, interval: 'hour' })
  const u2 = new BucketLimiter(store, { name: 'user_2', limit: 2, interval: 'hour' })
  for (let i = 0; i < 3; i++) await u1.check() // 2 admitted, 1 refused
  await u2.check() // 1 admitted
  await flushed(store)
  return { api }
}

describe('dashboard options', () => {
  it('bad options throw ERR_INVALID_CONFIG', () => {
    const store = new MemoryStore()
    for (const bad of [
      undefined,
      {},
      { store: {} },
      { store, allowReset: 'yes' },
      { store, basePath: 'sluice' },
      { store, basePath: '/sluice/' },
      { store, groupOf: 'user' },
      { store, refreshMs: 10 },
      { store, title: 7 },
      { store, nope: 1 },
      { store, allowedHosts: 'any' },
      { store, allowedHosts: 'localhost' },
      { store, allowedHosts: ['dash.example.com:8080'] },
      { store, allowedHosts: ['*.example.com'] },
      { store, allowedHosts: ['http://dash.example.com'] },
      { store, allowedHosts: [7] },
    ]) {
      expect(() => dashboard(bad as never), JSON.stringify(bad)).toThrow(
        expect.objectContaining({ code: 'ERR_INVALID_CONFIG' }),
      )
    }
    expect(defaultGroup('user_42')).toBe('user')
    expect(defaultGroup('100-per-60s_u-31')).toBe('100-per-60s')
    expect(defaultGroup('api')).toBe('api')
    expect(defaultGroup('_x')).toBe('_x')
  })
})

describe.each(STORE_KINDS)('dashboard API on %s', (kind) => {
  const clock = new ManualClock(T0)
  const s = useStore(kind, { clock })
  let srv: { base: string; close: () => Promise<void> }
  let locked: { base: string; close: () => Promise<void> }
  let api: Awaited<ReturnType<typeof traffic>>['api']

  beforeAll(async () => {
    ;({ api } = await traffic(s.store, clock))
    srv = await serve(dashboard({ store: s.store, allowReset: true, basePath: '/ops/sluice', title: '<b>ops</b>' }))
    locked = await serve(dashboard({ store: s.store }))
  })
  afterAll(async () => {
    await srv.close()
    await locked.close()
  })

  it('the page: redirected to the trailing slash, escaped title, CSP, no outside asset', async () => {
    const r = await getJson(`${srv.base}/ops/sluice`)
    expect(r.status).toBe(302)
    expect(r.headers.get('location')).toBe('/ops/sluice/')
    const page = await getJson(`${srv.base}/ops/sluice/`)
    expect(page.status).toBe(200)
    expect(page.headers.get('content-type')).toMatch(/^text\/html/)
    expect(page.headers.get('content-security-policy')).toMatch(/default-src 'none'; script-src 'self'/)
    expect(page.body).toContain('<title>&lt;b&gt;ops&lt;/b&gt;</title>')
    expect(page.body).not.toMatch(/https?:\/\//) // every asset ships in the package
    for (const [file, type] of [
      ['app.js', /javascript/],
      ['app.css', /text\/css/],
      ['favicon.svg', /svg/],
    ] as const) {
      const a = await fetch(`${srv.base}/ops/sluice/assets/${file}`)
      expect(a.status).toBe(200)
      expect(a.headers.get('content-type')).toMatch(type)
      expect(await a.text()).not.toMatch(/https?:\/\/(?!www\.w3\.org\/2000\/svg)/)
    }
    expect((await getJson(`${srv.base}/elsewhere`)).status).toBe(404)
    expect((await getJson(`${srv.base}/ops/sluice/assets/../../x`)).status).toBe(404)
    expect((await getJson(`${srv.base}/ops/sluice/api/nope`)).body.error.code).toBe('ERR_NOT_FOUND')
  })

  it('the list: every limiter with the numbers the store holds, per-key names grouped, hot first', async () => {
    clock.set(T0 + 3 * MIN)
    const r = await getJson(`${srv.base}/ops/sluice/api/limiters`)
    expect(r.status).toBe(200)
    expect(r.body.store).toMatchObject({
      type: kind === 'memory' ? 'memory' : 'redis',
      status: 'up',
      keyPrefix: s.prefix,
    })
    expect(r.body.limiters).toBe(6)
    const byId = Object.fromEntries(
      r.body.groups.map((g: { kind: string; group: string }) => [`${g.kind}:${g.group}`, g]),
    )
    expect(Object.keys(byId).sort()).toEqual([
      'bucket:api',
      'bucket:user',
      'concurrent:pdf',
      'pacer:partner',
      'sliding:login',
    ])
    const a = byId['bucket:api']
    expect(a).toMatchObject({ keys: 1, name: 'api', limit: '3 / 1h', fill: 1, resettable: true })
    expect(a.stats).toMatchObject({ admitted: 3, refused: 2, nearLimit: 1 })
    expect(a.state).toMatchObject({ remaining: 0, limit: 3 })
    // per-minute history: 30 minutes up to now, the counts in the minutes they were made
    expect(a.history).toHaveLength(30)
    expect(a.history.at(-1).t).toBe(T0 + 3 * MIN)
    expect(a.history.at(-4)).toEqual({ t: T0, admitted: 3, refused: 2 })
    expect(a.history.reduce((n: number, m: { admitted: number }) => n + m.admitted, 0)).toBe(3)
    expect(a.recent).toEqual({ admitted: 3, refused: 2, minutes: 5 })
    const u = byId['bucket:user']
    expect(u).toMatchObject({ keys: 2, name: null, fullest: 'user_1', fill: 1, resettable: false })
    expect(u.stats).toMatchObject({ admitted: 3, refused: 1 })
    expect(u.history.at(-2)).toEqual({ t: T0 + 2 * MIN, admitted: 3, refused: 1 })
    expect(byId['concurrent:pdf'].state).toMatchObject({ held: 1, waiting: 0, limit: 2, fill: 0.5 })
    expect(byId['concurrent:pdf'].stats).toMatchObject({ admitted: 1, refused: 0 })
    expect(byId['pacer:partner'].stats).toMatchObject({ admitted: 1 })
    expect(byId['sliding:login'].state.windows).toEqual([{ limit: 10, intervalMs: MIN, remaining: 10 }]) // a minute on
    // hot (refusing or nearly full) first
    const order = r.body.groups.map((g: { group: string }) => g.group)
    expect(order.slice(0, 2).sort()).toEqual(['api', 'user'])
    // reading is not deciding: the counts did not move
    expect(await api.stats()).toMatchObject({ admitted: 3, refused: 2 })
    const again = await getJson(`${srv.base}/ops/sluice/api/limiters`)
    expect(again.body.groups.find((g: { group: string }) => g.group === 'partner').stats.admitted).toBe(1)
  })

  it('a group lists its keys; a limiter shows its live state, statistics and options', async () => {
    const g = await getJson(`${srv.base}/ops/sluice/api/groups/bucket/user`)
    expect(g.status).toBe(200)
    expect(g.body.total).toBe(2)
    expect(g.body.keys.map((k: { name: string }) => k.name)).toEqual(['user_1', 'user_2']) // busiest first
    expect(g.body.keys[0]).toMatchObject({ fill: 1, stats: { admitted: 2, refused: 1 } })
    expect(g.body.keys[1]).toMatchObject({ fill: 0.5, state: { remaining: 1, limit: 2 } })
    const l = await getJson(`${srv.base}/ops/sluice/api/limiters/bucket/user_2`)
    expect(l.body).toMatchObject({ kind: 'bucket', name: 'user_2', group: 'user', options: { limit: 2 } })
    expect(l.body.stats.admitted).toBe(1)
    expect((await getJson(`${srv.base}/ops/sluice/api/limiters/bucket/nobody`)).status).toBe(404)
    expect((await getJson(`${srv.base}/ops/sluice/api/limiters/nokind/api`)).status).toBe(404)
    expect((await getJson(`${srv.base}/ops/sluice/api/groups/bucket/%E0%A4%A`)).status).toBe(400)
  })

  it('reset: a POST with the page token, only with allowReset', async () => {
    const token = tokenOf((await getJson(`${srv.base}/ops/sluice/`)).body)
    const url = `${srv.base}/ops/sluice/api/limiters/bucket/api/reset`
    expect((await getJson(url)).status).toBe(405)
    const none = await getJson(url, { method: 'POST' })
    expect([none.status, none.body.error.code]).toEqual([403, 'ERR_CSRF'])
    const wrong = await getJson(url, {
      method: 'POST',
      headers: { 'x-sluice-csrf': (token[0] === 'x' ? 'y' : 'x') + token.slice(1) },
    })
    expect([wrong.status, wrong.body.error.code]).toEqual([403, 'ERR_CSRF'])
    const cross = await getJson(url, {
      method: 'POST',
      headers: { 'x-sluice-csrf': token, 'sec-fetch-site': 'cross-site' },
    })
    expect(cross.status).toBe(403)
    expect((await api.peek()).remaining).toBe(0)
    // another dashboard's token is not this one's
    const lockedToken = tokenOf((await getJson(`${locked.base}/`)).body)
    const off = await getJson(`${locked.base}/api/limiters/bucket/api/reset`, {
      method: 'POST',
      headers: { 'x-sluice-csrf': lockedToken },
    })
    expect([off.status, off.body.error.code]).toEqual([403, 'ERR_RESET_DISABLED'])
    expect((await api.peek()).remaining).toBe(0)
    const conc = await getJson(`${srv.base}/ops/sluice/api/limiters/concurrent/pdf/reset`, {
      method: 'POST',
      headers: { 'x-sluice-csrf': token },
    })
    expect([conc.status, conc.body.error.code]).toEqual([400, 'ERR_INVALID_ARGUMENT'])
    const ok = await getJson(url, { method: 'POST', headers: { 'x-sluice-csrf': token } })
    expect([ok.status, ok.body]).toEqual([200, { reset: true, kind: 'bucket', name: 'api' }])
    expect((await api.peek()).remaining).toBe(3)
  })

  it('the history ring: a minute older than 30 is replaced, never added to', async () => {
    const name = `ring${kind}`
    const b = new BucketLimiter(s.store, { name, limit: 1000, interval: 'hour' })
    clock.set(T0 + 10 * MIN)
    for (let i = 0; i < 4; i++) await b.check()
    await flushed(s.store)
    clock.set(T0 + 40 * MIN + 30_000) // the same ring slot, 30 minutes on
    await b.check()
    await flushed(s.store)
    const r = await getJson(`${locked.base}/api/limiters/bucket/${name}`)
    expect(r.body.history.at(-1)).toEqual({ t: T0 + 40 * MIN, admitted: 1, refused: 0 })
    expect(r.body.history.reduce((n: number, m: { admitted: number }) => n + m.admitted, 0)).toBe(1)
    expect(r.body.stats.admitted).toBe(5)
  })
})

describe('dashboard mounted in Express and Fastify', () => {
  const store = new MemoryStore()
  afterAll(() => store.close())

  it('Express: app.use(mount, handler); what it does not serve goes to next()', async () => {
    await new BucketLimiter(store, { name: 'e', limit: 1, interval: 'minute' }).check()
    const app = express()
    app.use('/sluice', dashboard({ store }))
    app.use((_req, res) => res.status(404).send('express 404'))
    const srv = await serve(app)
    try {
      const r = await getJson(`${srv.base}/sluice`)
      expect([r.status, r.headers.get('location')]).toEqual([302, '/sluice/'])
      expect((await getJson(`${srv.base}/sluice/?x=1`)).body).toContain('assets/app.js')
      const list = await getJson(`${srv.base}/sluice/api/limiters`)
      expect(list.body.groups.map((g: { name: string }) => g.name)).toContain('e')
      expect((await getJson(`${srv.base}/sluice/unknown`)).body).toBe('express 404')
    } finally {
      await srv.close()
    }
  })

  it('Fastify: a route that hands the raw request over, with basePath', async () => {
    await new BucketLimiter(store, { name: 'f', limit: 1, interval: 'minute' }).check()
    const app = Fastify()
    const handler: Handler = dashboard({ store, basePath: '/sluice' })
    const route = (req: { raw: http.IncomingMessage }, reply: { hijack(): void; raw: http.ServerResponse }) => {
      reply.hijack()
      handler(req.raw, reply.raw)
    }
    app.all('/sluice', route)
    app.all('/sluice/*', route)
    await app.listen({ port: 0, host: '127.0.0.1' })
    const base = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`
    try {
      expect((await getJson(`${base}/sluice`)).headers.get('location')).toBe('/sluice/')
      expect((await getJson(`${base}/sluice/`)).body).toContain('sluice-csrf')
      const list = await getJson(`${base}/sluice/api/limiters`)
      expect(list.body.groups.map((g: { name: string }) => g.name)).toEqual(expect.arrayContaining(['e', 'f']))
    } finally {
      await app.close()
    }
  })
})

const CHROMIUM = process.env.SLUICE_CHROMIUM || '/usr/bin/chromium'

// scripts/test.sh sets SLUICE_TEST_NO_BROWSER where it could neither find nor install a chromium
// (and says so in its summary); anywhere else a missing browser fails the test
describe.skipIf(process.env.SLUICE_TEST_NO_BROWSER === '1')('the page in a real browser (chromium)', () => {
  const clock = new ManualClock(T0)
  const s = useStore('redis', { clock })
  type Browser = Awaited<ReturnType<typeof import('puppeteer-core').launch>>
  let browser: Browser
  let open: { base: string; close: () => Promise<void> }
  let locked: { base: string; close: () => Promise<void> }
  let api: Awaited<ReturnType<typeof traffic>>['api']

  beforeAll(async () => {
    if (!existsSync(CHROMIUM)) throw new Error(`no chromium at ${CHROMIUM}: apt-get install chromium (npm test does)`)
    ;({ api } = await traffic(s.store, clock))
    clock.set(T0 + 3 * MIN)
    open = await serve(dashboard({ store: s.store, allowReset: true, refreshMs: 0 }))
    locked = await serve(dashboard({ store: s.store, refreshMs: 0 }))
    const puppeteer = await import('puppeteer-core')
    browser = await puppeteer.launch({
      executablePath: CHROMIUM,
      args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'],
    })
  }, 60_000)
  afterAll(async () => {
    await browser?.close()
    await open?.close()
    await locked?.close()
  })

  /** A page that records every console message, page error and failed request. */
  async function page() {
    const p = await browser.newPage()
    await p.setViewport({ width: 1366, height: 900 })
    const problems: string[] = []
    p.on('console', (m) => {
      if (m.type() === 'error' || m.type() === 'warn') problems.push(`console ${m.type()}: ${m.text()}`)
    })
    p.on('pageerror', (e) => problems.push(`page error: ${(e as Error).message}`))
    p.on('requestfailed', (r) => problems.push(`request failed: ${r.url()}`))
    p.on('response', (r) => {
      if (r.status() >= 400) problems.push(`HTTP ${r.status()}: ${r.url()}`)
    })
    return { p, problems }
  }

  const loaded = (p: Awaited<ReturnType<typeof page>>['p'], n: number) =>
    p.waitForFunction((k) => Number(document.body.dataset.loaded || 0) >= k, { timeout: 10_000 }, n)

  it('lists the limiters with the numbers the store holds, no console error; a screenshot is kept', async () => {
    const { p, problems } = await page()
    await p.goto(`${open.base}/`)
    await loaded(p, 1)
    const rows = await p.$$eval('#limiters tbody tr', (trs) =>
      trs.map((tr) => ({
        kind: tr.getAttribute('data-kind'),
        name: tr.getAttribute('data-name'),
        text: (tr as HTMLElement).innerText.replace(/\s+/g, ' '),
      })),
    )
    expect(rows.map((r) => `${r.kind}:${r.name}`).sort()).toEqual([
      'bucket:api',
      'bucket:user',
      'concurrent:pdf',
      'pacer:partner',
      'sliding:login',
    ])
    const row = (name: string) => rows.find((r) => r.name === name)!.text
    expect(row('api')).toContain('0 of 3 left')
    expect(row('api')).toContain('3 in all') // admitted
    expect(row('api')).toContain('2 in all') // refused
    expect(row('user')).toContain('2 keys')
    expect(row('pdf')).toContain('1 of 2 held, 0 waiting')
    expect(
      rows
        .slice(0, 2)
        .map((r) => r.name)
        .sort(),
    ).toEqual(['api', 'user']) // hot first
    expect(await p.$eval('#store', (e) => e.textContent)).toContain('redis up')
    mkdirSync(ARTIFACTS, { recursive: true })
    await p.screenshot({ path: join(ARTIFACTS, 'dashboard.png'), fullPage: true })
    // into the group and one key
    await p.click('#limiters tbody tr[data-name="user"] a')
    await p.waitForSelector('#keys')
    const keys = await p.$$eval('#keys tbody tr', (trs) => trs.map((tr) => tr.getAttribute('data-name')))
    expect(keys).toEqual(['user_1', 'user_2'])
    await p.click('#keys tbody tr[data-name="user_2"] a')
    await p.waitForSelector('#state')
    expect(await p.$eval('#state', (e) => (e as HTMLElement).innerText)).toMatch(/remaining\s+1/)
    expect(await p.$('#reset')).not.toBeNull()
    await p.screenshot({ path: join(ARTIFACTS, 'dashboard-limiter.png'), fullPage: true })
    expect(problems).toEqual([])
    await p.close()
  }, 60_000)

  it('a reset from the page works with allowReset; without it the page offers none and the API refuses', async () => {
    const { p, problems } = await page()
    p.on('dialog', (d) => void d.accept())
    await p.goto(`${open.base}/#/limiter/bucket/api`)
    await p.waitForSelector('#reset')
    expect((await api.peek()).remaining).toBe(0)
    await p.click('#reset')
    await p.waitForFunction(() => document.getElementById('banner')!.textContent!.includes('Reset bucket api'))
    expect((await api.peek()).remaining).toBe(3)
    // a forged token from the page's own origin is refused
    const forged = await p.evaluate(async () => {
      const r = await fetch('api/limiters/bucket/api/reset', { method: 'POST', headers: { 'x-sluice-csrf': 'forged' } })
      return [r.status, (await r.json()).error.code]
    })
    expect(forged).toEqual([403, 'ERR_CSRF'])
    await p.goto(`${locked.base}/#/limiter/bucket/api`)
    await p.waitForSelector('#state')
    expect(await p.$('#reset')).toBeNull()
    const refused = await p.evaluate(async () => {
      const token = document.querySelector('meta[name="sluice-csrf"]')!.getAttribute('content')!
      const r = await fetch('api/limiters/bucket/api/reset', { method: 'POST', headers: { 'x-sluice-csrf': token } })
      return [r.status, (await r.json()).error.code]
    })
    expect(refused).toEqual([403, 'ERR_RESET_DISABLED'])
    // the two 403s asked for above, and nothing else
    expect(problems.filter((x) => !/403/.test(x))).toEqual([])
    await p.close()
  }, 60_000)

  it('issue-38-dashboard-notes: every page says how late a last use can be; a budget page explains used vs refused', async () => {
    const store = new MemoryStore()
    const budget = new Budget(store, { name: 'llm', dimensions: { requests: { limit: 500, intervalMs: 60_000 } } })
    await budget.reserve({ requests: 1 })
    const srv = await serve(dashboard({ store, refreshMs: 0 }))
    const { p, problems } = await page()
    try {
      await p.goto(`${srv.base}/`)
      await loaded(p, 1)
      expect(await p.$eval('#last-use-note', (e) => e.textContent)).toMatch(
        /every statistics flush that finds the limiter used .* up to one flush period late/,
      )
      await p.goto(`${srv.base}/#/limiter/budget/llm`)
      await p.waitForSelector('#budget-note')
      const note = await p.$eval('#budget-note', (e) => e.textContent)
      expect(note).toMatch(/^Used vs refused: the fill is the share of its fullest limit in use now/)
      expect(note).toMatch(/paces from its first call/)
      expect(await p.$eval('#last-use-note', (e) => e.textContent)).toMatch(/up to one flush period late/)
      const cards = await p.$$eval('.card', (cs) => cs.map((c) => (c as HTMLElement).innerText.replace(/\s+/g, ' ')))
      expect(cards.some((c) => /ago last use \(≤ 1 flush late\)$/.test(c))).toBe(true)
      // a limiter of another kind has no budget note
      await new BucketLimiter(store, { name: 'api', limit: 3, interval: 'hour' }).check()
      await p.goto(`${srv.base}/#/limiter/bucket/api`)
      await p.waitForSelector('#state')
      expect(await p.$('#budget-note')).toBeNull()
      expect(await p.$('#rules')).toBeNull()
      // issue-39-rules-dashboard: the rules that name a limiter, on its page, as text
      await store.rules.set(
        { kind: 'bucket', name: 'api' },
        { limit: 7, note: '<img src=x onerror="window.__pwned=1">' },
      )
      await store.rules.set({ kind: 'bucket', prefix: 'a' }, { mode: 'shadow' })
      await p.goto(`${srv.base}/#/`)
      await p.goto(`${srv.base}/#/limiter/bucket/api`)
      await p.waitForSelector('#rules')
      const rules = await p.$eval('#rules', (e) => (e as HTMLElement).innerText)
      expect(rules).toMatch(/bucket api: limit 7 · <img src=x onerror="window.__pwned=1"> · in force/)
      expect(rules).toMatch(/bucket names starting a: mode shadow/)
      expect(await p.$('#rules img')).toBeNull()
      expect(await p.evaluate(() => (window as unknown as { __pwned?: number }).__pwned)).toBeUndefined()
      expect(problems).toEqual([])
    } finally {
      await p.close()
      await srv.close()
      await store.close()
    }
  }, 60_000)

  it('issue-39-rules-dashboard-write: with allowWrite, a rule set and deleted from the page, in force at once; without, none offered', async () => {
    const store = new MemoryStore()
    const limiter = new BucketLimiter(store, { name: 'reports:export', limit: 3, interval: 'hour' })
    await limiter.check()
    const writable = await serve(dashboard({ store, allowWrite: true, refreshMs: 0 }))
    const readonly = await serve(dashboard({ store, refreshMs: 0 }))
    const { p, problems } = await page()
    p.on('dialog', (d) => void d.accept())
    try {
      await p.goto(`${writable.base}/#/limiter/bucket/reports%3Aexport`)
      await p.waitForSelector('#rule-form')
      await p.type('#rule-form input[name="override"]', '1')
      await p.select('#rule-form select[name="mode"]', 'shadow')
      await p.type('#rule-form input[name="note"]', 'try 1 an hour <b>')
      await p.click('#rule-set')
      await p.waitForFunction(() => document.getElementById('banner')!.textContent!.includes('Rule set'))
      expect(await store.rules.list()).toEqual([
        { target: { kind: 'bucket', name: 'reports:export' }, limit: 1, mode: 'shadow', note: 'try 1 an hour <b>' },
      ])
      // in force at once: the second call would be refused at 1 an hour, admitted in shadow
      expect(await limiter.check()).toMatchObject({ allowed: true, reason: 'shadow', limit: 1 })
      await p.waitForFunction(() => document.getElementById('rules')?.innerText.includes('in force'))
      expect(await p.$eval('#rules', (e) => (e as HTMLElement).innerText)).toContain('try 1 an hour <b>')
      await p.click('#rules .rule-delete')
      await p.waitForFunction(() => document.getElementById('banner')!.textContent!.includes('deleted'))
      expect(await store.rules.list()).toEqual([])
      // a forged token from the page's origin is refused, nothing written
      const forged = await p.evaluate(async () => {
        const q = new URLSearchParams({ op: 'set', target: '{"kind":"bucket","name":"x"}', rule: '{"access":"deny"}' })
        const r = await fetch(`api/rules?${q}`, { method: 'POST', headers: { 'x-sluice-csrf': 'forged' } })
        return [r.status, (await r.json()).error.code]
      })
      expect(forged).toEqual([403, 'ERR_CSRF'])
      // without allowWrite: no form, and the API refuses with the page's own token
      await p.goto(`${readonly.base}/#/limiter/bucket/reports%3Aexport`)
      await p.waitForSelector('#state')
      expect(await p.$('#rule-form')).toBeNull()
      const refused = await p.evaluate(async () => {
        const token = document.querySelector('meta[name="sluice-csrf"]')!.getAttribute('content')!
        const q = new URLSearchParams({ op: 'set', target: '{"kind":"bucket","name":"x"}', rule: '{"access":"deny"}' })
        const r = await fetch(`api/rules?${q}`, { method: 'POST', headers: { 'x-sluice-csrf': token } })
        return [r.status, (await r.json()).error.code]
      })
      expect(refused).toEqual([403, 'ERR_WRITE_DISABLED'])
      expect(await store.rules.list()).toEqual([])
      expect(problems.filter((x) => !/403/.test(x))).toEqual([])
    } finally {
      await p.close()
      await writable.close()
      await readonly.close()
      await store.close()
    }
  }, 60_000)

  it('a sluice/fetch key of hostile bytes: listed as text (no element made of it), its 429s and blocks in cards', async () => {
    const store = new MemoryStore()
    const key = 'api<img src=x onerror="window.__pwned=1">&amp;\u202e'
    const answers = [new Response('', { status: 429, headers: { 'Retry-After': '1' } }), new Response('')]
    const { pacedFetch } = await import('../lib/entries/fetch.js')
    const f = pacedFetch({ store, key: () => key, qps: 1e6, retry: false, fetch: async () => answers.shift()! })
    expect((await f('http://upstream.invalid/')).status).toBe(429)
    const srv = await serve(dashboard({ store, refreshMs: 0 }))
    const { p, problems } = await page()
    try {
      await p.goto(`${srv.base}/`)
      await loaded(p, 1)
      const row = await p.$$eval(
        '#limiters tbody tr',
        (trs, k) => {
          const tr = trs.find((r) => r.getAttribute('data-name') === k)!
          return { text: tr.querySelector('a.name')!.textContent, imgs: tr.querySelectorAll('img').length }
        },
        key,
      )
      expect(row.text).toContain('<img src=x onerror="window.__pwned=1">&amp;')
      expect(row.imgs).toBe(0)
      await p.evaluate((k) => {
        const tr = [...document.querySelectorAll('#limiters tbody tr')].find((r) => r.getAttribute('data-name') === k)
        ;(tr!.querySelector('a.name') as HTMLElement).click()
      }, key)
      await p.waitForSelector('#state')
      const cards = await p.$$eval('.card', (cs) => cs.map((c) => (c as HTMLElement).innerText.replace(/\s+/g, ' ')))
      expect(cards).toEqual(expect.arrayContaining(['1 answered 429/503', '1 blocks recorded']))
      expect(await p.$eval('#stats', (e) => (e as HTMLElement).innerText)).toMatch(/throttled\s+1/)
      expect(await p.evaluate(() => (window as unknown as { __pwned?: number }).__pwned)).toBeUndefined()
      expect(problems).toEqual([])
    } finally {
      await p.close()
      await srv.close()
      await store.close()
    }
  }, 60_000)

  it('issue-24-api-fields-page: keys a URL would normalise (.., a/b) open from the page; control characters shown escaped; a reset', async () => {
    const store = new MemoryStore()
    const keys = ['..', 'a/b', '%2e%2e', 'esc\x1b[2J\u202e_1', 'esc\x1b[2J\u202e_2']
    for (const key of keys) await new DistributedPacer(store, { key, qps: 5, maxBurst: 2 }).rateLimit()
    const api = new BucketLimiter(store, { name: 'api-1', limit: 2, interval: 'hour' })
    await api.check()
    const srv = await serve(dashboard({ store, allowReset: true, refreshMs: 0 }))
    const { p, problems } = await page()
    p.on('dialog', (d) => void d.accept())
    try {
      await p.goto(`${srv.base}/`)
      await loaded(p, 1)
      const rows = await p.$$eval('#limiters tbody tr', (trs) =>
        trs.map((tr) => [tr.getAttribute('data-name'), tr.querySelector('a.name')!.textContent]),
      )
      expect(rows).toEqual(
        expect.arrayContaining([
          ['..', '..'],
          ['a/b', 'a/b'],
          ['%2e%2e', '%2e%2e'],
          ['esc\x1b[2J\u202e', 'esc\\x1b[2J\\u202e'],
        ]),
      )
      /** Clicks the link of the row whose data-name is `name` (any character). */
      const open = async (table: string, name: string) => {
        await p.evaluate(
          (t, n) => {
            const tr = [...document.querySelectorAll(`#${t} tbody tr`)].find((r) => r.getAttribute('data-name') === n)
            ;(tr!.querySelector('a.name') as HTMLElement).click()
          },
          table,
          name,
        )
      }
      for (const name of ['..', 'a/b', '%2e%2e']) {
        await p.goto(`${srv.base}/`)
        await loaded(p, 1)
        await open('limiters', name)
        await p.waitForSelector('#state')
        expect(await p.$eval('h2 .name', (e) => e.textContent)).toBe(name)
        expect(await p.$eval('#stats', (e) => (e as HTMLElement).innerText)).toMatch(/admitted\s+1/)
      }
      await p.goto(`${srv.base}/`)
      await loaded(p, 1)
      await open('limiters', 'api-1')
      await p.waitForSelector('#reset')
      await p.click('#reset')
      await p.waitForFunction(() => document.getElementById('banner')!.textContent === 'Reset bucket api-1.', {
        timeout: 10_000,
      })
      expect((await api.peek()).remaining).toBe(2)
      // the group of escaped names lists its two keys, shown escaped
      await p.goto(`${srv.base}/`)
      await loaded(p, 1)
      await open('limiters', 'esc\x1b[2J\u202e')
      await p.waitForSelector('#keys')
      const keys = await p.$$eval('#keys tbody tr', (trs) =>
        trs.map((tr) => [tr.getAttribute('data-name'), tr.querySelector('a.name')!.textContent]),
      )
      expect(keys.sort()).toEqual([
        ['esc\x1b[2J\u202e_1', 'esc\\x1b[2J\\u202e_1'],
        ['esc\x1b[2J\u202e_2', 'esc\\x1b[2J\\u202e_2'],
      ])
      expect(problems).toEqual([])
    } finally {
      await p.close()
      await srv.close()
      await store.close()
    }
  }, 60_000)
})

describe('issue 24: the dashboard answers only the Host names it is meant for (DNS rebinding)', () => {
  const store = new MemoryStore()
  afterAll(() => store.close())

  const ROUTES = [
    ['GET', '/'],
    ['GET', '/assets/app.js'],
    ['GET', '/api/limiters'],
    ['GET', '/api/limiter?kind=bucket&name=secret_name'],
    ['GET', '/api/group?kind=bucket&group=secret'],
    ['GET', '/api/limiters/bucket/secret_name'],
    ['POST', '/api/reset?kind=bucket&name=secret_name'],
    ['POST', '/api/limiters/bucket/secret_name/reset'],
  ] as const

  it('issue-24-host-check: another Host gets 403 before anything is read: no page, no token, no list, no reset', async () => {
    const b = new BucketLimiter(store, { name: 'secret_name', limit: 1, interval: 'hour' })
    await b.check()
    const srv = await serve(dashboard({ store, allowReset: true }))
    try {
      const port = new URL(srv.base).port
      const token = tokenOf((await getJson(`${srv.base}/`)).body) // the page by its address works
      for (const host of [
        'evil.example',
        `evil.example:${port}`,
        `EVIL.example.:${port}`,
        `localhost.evil.example:${port}`,
        `127.0.0.1.nip.io:${port}`,
        `evil.example:${port}:${port}`,
        `[evil.example]:${port}`,
        '',
      ]) {
        for (const [method, path] of ROUTES) {
          const r = await request(srv.base, path, { method, host, headers: { 'x-sluice-csrf': token } })
          expect([r.status, r.json?.error?.code], `${method} ${path} Host ${host}`).toEqual([
            403,
            'ERR_HOST_NOT_ALLOWED',
          ])
          expect(r.text).not.toContain(token)
          expect(r.text).not.toContain('secret_name')
        }
      }
      expect((await b.peek()).remaining).toBe(0) // nothing was reset
      const none = await withoutHost(srv.base, '/api/limiters')
      expect(none).toMatch(/^HTTP\/1\.[01] 403/)
      expect(none).not.toContain('secret_name')
      // the answer says what to do
      const msg = (await request(srv.base, '/', { host: 'dash.example.com:8080' })).json.error.message
      expect(msg).toContain('dashboard({ allowedHosts: ["dash.example.com"] })')
      // loopback names and IP literals (no other site can be same-origin with those)
      for (const host of [
        `127.0.0.1:${port}`,
        '127.0.0.1',
        `localhost:${port}`,
        `LocalHost.:${port}`,
        `app.localhost:${port}`,
        `[::1]:${port}`,
        '10.1.2.3',
        '[2001:db8::1]',
      ]) {
        expect((await request(srv.base, '/api/limiters', { host })).status, host).toBe(200)
      }
      const ok = await request(srv.base, '/api/reset?kind=bucket&name=secret_name', {
        method: 'POST',
        host: `localhost:${port}`,
        headers: { 'x-sluice-csrf': token },
      })
      expect(ok.status).toBe(200)
      expect((await b.peek()).remaining).toBe(1)
    } finally {
      await srv.close()
    }
  })

  it('issue-24-host-check-option: allowedHosts adds names (".name" for subdomains); "all" turns the check off', async () => {
    const named = await serve(dashboard({ store, allowedHosts: ['dash.example.com', '.corp.example'] }))
    const warnings: Error[] = []
    const onWarning = (w: Error) => warnings.push(w)
    process.on('warning', onWarning)
    const all = await serve(dashboard({ store, allowedHosts: 'all' }))
    await new Promise((r) => setImmediate(r))
    process.off('warning', onWarning)
    expect(warnings.map((w) => (w as Error & { code?: string }).code)).toEqual(['SLUICE_DASHBOARD_ALL_HOSTS'])
    expect(warnings[0].message).toMatch(/any Host name.*DNS rebinding/)
    try {
      for (const host of [
        'dash.example.com',
        'DASH.example.com.:443',
        'corp.example',
        'a.b.corp.example',
        'localhost',
      ]) {
        expect((await request(named.base, '/api/limiters', { host })).status, host).toBe(200)
      }
      for (const host of ['evil.example', 'dash.example.com.evil.example', 'xcorp.example', 'example.com']) {
        expect((await request(named.base, '/api/limiters', { host })).status, host).toBe(403)
      }
      expect((await request(all.base, '/api/limiters', { host: 'evil.example' })).status).toBe(200)
    } finally {
      await named.close()
      await all.close()
    }
  })

  it('issue-24-host-check-express: mounted in Express, the dashboard refuses another Host; the app is untouched', async () => {
    const app = express()
    app.use('/sluice', dashboard({ store }))
    app.get('/hello', (_req, res) => res.send('app'))
    const srv = await serve(app)
    try {
      const r = await request(srv.base, '/sluice/api/limiters', { host: 'evil.example' })
      expect([r.status, r.json.error.code]).toEqual([403, 'ERR_HOST_NOT_ALLOWED'])
      expect((await request(srv.base, '/sluice/', { host: 'evil.example' })).text).not.toContain('sluice-csrf')
      expect((await request(srv.base, '/hello', { host: 'evil.example' })).text).toBe('app')
    } finally {
      await srv.close()
    }
  })
})

describe('issue 24: every value of the API is its own query parameter or JSON field', () => {
  const store = new MemoryStore()
  afterAll(() => store.close())
  const NAMES = ['..', '.', 'a/b', 'a%2Fb', 'q?x=1#f', 'p+q r&s=t', 'line\nbreak', 'bucket\u0000x', '李雷']

  // a pacer's key is any string (limiter names are [A-Za-z0-9_-], which a URL keeps as they are)
  it('issue-24-api-fields: keys with / .. . ? # % + & NUL and newlines are listed, opened and reset', async () => {
    for (const key of [...NAMES, 'nul\u0000kind_1', 'nul\u0000kind_2']) {
      await new DistributedPacer(store, { key, qps: 5, maxBurst: 2 }).rateLimit()
    }
    const api = new BucketLimiter(store, { name: 'api-1', limit: 2, interval: 'hour' })
    await api.check()
    const srv = await serve(dashboard({ store, allowReset: true }))
    try {
      const list = await getJson(`${srv.base}/api/limiters`)
      const groups = list.body.groups.map((g: { kind: string; group: string; keys: number }) => [
        g.kind,
        g.group,
        g.keys,
      ])
      expect(groups).toEqual(
        expect.arrayContaining([...NAMES.map((n) => ['pacer', n, 1]), ['pacer', 'nul\u0000kind', 2]]),
      )
      expect(groups).toHaveLength(NAMES.length + 2)
      const q = (o: Record<string, string>) => new URLSearchParams(o).toString()
      const g = await getJson(`${srv.base}/api/group?${q({ kind: 'pacer', group: 'nul\u0000kind' })}`)
      expect(g.status).toBe(200)
      expect(g.body.group).toMatchObject({ kind: 'pacer', group: 'nul\u0000kind', keys: 2 })
      expect(g.body.keys.map((k: { name: string }) => k.name).sort()).toEqual(['nul\u0000kind_1', 'nul\u0000kind_2'])
      for (const name of NAMES) {
        const l = await getJson(`${srv.base}/api/limiter?${q({ kind: 'pacer', name })}`)
        expect([l.status, l.body.kind, l.body.name, l.body.stats.admitted], JSON.stringify(name)).toEqual([
          200,
          'pacer',
          name,
          1,
        ])
        expect(l.body.state).toMatchObject({ watermark: expect.any(Number) })
      }
      const token = tokenOf((await getJson(`${srv.base}/`)).body)
      const r = await getJson(`${srv.base}/api/reset?${q({ kind: 'bucket', name: 'api-1' })}`, {
        method: 'POST',
        headers: { 'x-sluice-csrf': token },
      })
      expect([r.status, r.body]).toEqual([200, { reset: true, kind: 'bucket', name: 'api-1' }])
      expect((await api.peek()).remaining).toBe(2)
      const pacer = await getJson(`${srv.base}/api/reset?${q({ kind: 'pacer', name: '..' })}`, {
        method: 'POST',
        headers: { 'x-sluice-csrf': token },
      })
      expect([pacer.status, pacer.body.error.code]).toEqual([400, 'ERR_INVALID_ARGUMENT'])
      // each value once, and a kind that exists
      for (const [path, status] of [
        ['/api/limiter?kind=bucket', 400],
        ['/api/limiter?name=a%2Fb', 400],
        ['/api/limiter?kind=bucket&name=a%2Fb&name=..', 400],
        ['/api/limiter?kind=nokind&name=a%2Fb', 404],
        ['/api/group?kind=bucket&name=a%2Fb', 400],
        ['/api/limiter?kind=bucket&name=nobody', 404],
      ] as const) {
        expect((await getJson(`${srv.base}${path}`)).status, path).toBe(status)
      }
      expect((await getJson(`${srv.base}/api/reset?kind=bucket&name=..`)).status).toBe(405)
    } finally {
      await srv.close()
    }
  })
})

describe('npx sluice dashboard', () => {
  const BIN = join(ROOT, 'bin', 'sluice.js')

  it('issue-24-host-check-cli: another Host gets 403 naming --allowed-host; --allowed-host adds one; "all" warns', async () => {
    const prefix = freshPrefix()
    const d = await startCliDashboard(['--redis', redisUrl(), '--prefix', prefix])
    try {
      const port = new URL(d.url).port
      for (const path of ['/', '/api/limiters', '/assets/app.js']) {
        const evil = await request(d.url, path, { host: `evil.example:${port}` })
        expect([evil.status, evil.json.error.code], path).toEqual([403, 'ERR_HOST_NOT_ALLOWED'])
        expect(evil.json.error.message).toContain('--allowed-host evil.example')
        expect(evil.text).not.toContain('sluice-csrf')
      }
      expect((await request(d.url, '/', { host: `localhost:${port}` })).status).toBe(200)
      expect((await request(d.url, '/', { host: `127.0.0.1:${port}` })).status).toBe(200)
    } finally {
      expect(await d.stop()).toBe(0)
    }
    const named = await startCliDashboard([
      '--redis',
      redisUrl(),
      '--prefix',
      prefix,
      '--allowed-host',
      'dash.example.com',
      '--allowed-host',
      '.corp.example',
    ])
    try {
      for (const host of ['dash.example.com', 'x.corp.example:7031']) {
        expect((await request(named.url, '/', { host })).status, host).toBe(200)
      }
      expect((await request(named.url, '/', { host: 'evil.example' })).status).toBe(403)
      expect(named.io.err).toBe('')
    } finally {
      expect(await named.stop()).toBe(0)
    }
    const open = await startCliDashboard(['--redis', redisUrl(), '--prefix', prefix, '--allowed-host', 'all'])
    try {
      expect((await request(open.url, '/', { host: 'evil.example' })).status).toBe(200)
      expect(open.io.err).toMatch(/WARNING: --allowed-host all: .*DNS rebinding/)
    } finally {
      expect(await open.stop()).toBe(0)
    }
  }, 30_000)

  it('issue-24-reset-hint-cli: a reset without --allow-reset names the CLI flag, not the library option', async () => {
    const d = await startCliDashboard(['--redis', redisUrl(), '--prefix', freshPrefix()])
    try {
      const token = tokenOf((await request(d.url, '/')).text)
      for (const path of ['/api/limiters/bucket/api/reset', '/api/reset?kind=bucket&name=api']) {
        const r = await request(d.url, path, { method: 'POST', headers: { 'x-sluice-csrf': token } })
        expect([r.status, r.json.error.code], path).toEqual([403, 'ERR_RESET_DISABLED'])
        expect(r.json.error.message).toContain('--allow-reset')
        expect(r.json.error.message).not.toContain('allowReset')
      }
    } finally {
      expect(await d.stop()).toBe(0)
    }
  }, 30_000)

  it('issue-24-mask-userinfo: a password holding @ is masked whole in the output, the page title and the API', async () => {
    const { host } = new URL(redisUrl())
    // the test Redis's default user has no password: AUTH default <anything> succeeds
    const d = await startCliDashboard(['--redis', `redis://default:S3cr@tP4ss@${host}`, '--prefix', freshPrefix()])
    try {
      const page = await request(d.url, '/')
      expect(page.text).toContain(`<title>sluice · redis://***@${host}</title>`)
      const api = await request(d.url, '/api/limiters')
      expect(api.status).toBe(200)
      expect(api.json.title).toBe(`sluice · redis://***@${host}`)
      expect(d.io.out).toContain(`(Redis at redis://***@${host})`)
      for (const text of [d.io.out, d.io.err, page.text, api.text]) {
        expect(text).not.toMatch(/S3cr|tP4ss|default:/)
      }
    } finally {
      expect(await d.stop()).toBe(0)
    }
  }, 30_000)

  it('serves the page and its API until SIGTERM, then exits 0', async () => {
    const prefix = freshPrefix()
    const store = await RedisStore.connect({ url: redisUrl(), keyPrefix: prefix })
    await new BucketLimiter(store, { name: 'cli', limit: 1, interval: 'minute' }).check()
    await store.close()
    const child = spawn(
      process.execPath,
      [BIN, 'dashboard', '--redis', redisUrl(), '--prefix', prefix, '--port', '0'],
      {
        env: { ...process.env, SLUICE_REDIS_URL: '' },
      },
    )
    let out = ''
    child.stdout.on('data', (d) => (out += d))
    const exited = new Promise<number | null>((r) => child.on('exit', (code) => r(code)))
    for (let i = 0; i < 200 && !/http:\/\/\S+\//.test(out); i++) await new Promise((r) => setTimeout(r, 50))
    const url = /(http:\/\/\S+\/)/.exec(out)![1]
    expect(out).toContain('sluice dashboard on')
    const list = await getJson(`${url}api/limiters`)
    expect(list.body.groups.map((g: { name: string }) => g.name)).toEqual(['cli'])
    expect(list.body.allowReset).toBe(false)
    child.kill('SIGTERM')
    expect(await exited).toBe(0)
  }, 30_000)

  it('exits 1 with a clear message when Redis is unreachable, 2 on a bad port', async () => {
    const run = (args: string[]) =>
      new Promise<{ code: number | null; err: string }>((resolve) => {
        const c = spawn(process.execPath, [BIN, ...args], { env: { ...process.env, SLUICE_REDIS_URL: '' } })
        let err = ''
        c.stderr.on('data', (d) => (err += d))
        c.on('exit', (code) => resolve({ code, err }))
      })
    const down = await run(['dashboard', '--redis', 'redis://u:sek@rit@127.0.0.1:1', '--port', '0'])
    expect(down.code).toBe(1)
    expect(down.err).toContain('cannot reach Redis at redis://***@127.0.0.1:1')
    expect(down.err).not.toMatch(/sek|rit@/)
    const bad = await run(['dashboard', '--redis', redisUrl(), '--port', '70000'])
    expect(bad.code).toBe(2)
  }, 30_000)
})

describe('issue-39-rules-dashboard: a limiter page lists the rules that name it, the one in force marked', () => {
  it('its own rule, its kind prefix, a door by identifier; notes as data', async () => {
    const store = new MemoryStore()
    const srv = await serve(dashboard({ store }))
    try {
      const api = new BucketLimiter(store, { name: 'user:42', limit: 3, interval: 'hour' })
      await api.check()
      await store.rules.set({ kind: 'bucket', prefix: 'user:' }, { limit: 10, note: 'all users <b>' })
      await store.rules.set({ kind: 'bucket', name: 'user:42' }, { limit: 50, mode: 'shadow' })
      await store.rules.set({ kind: 'bucket', prefix: 'other' }, { limit: 1 })
      const q = (o: Record<string, string>) => new URLSearchParams(o).toString()
      const l = await getJson(`${srv.base}/api/limiter?${q({ kind: 'bucket', name: 'user:42' })}`)
      expect(l.status).toBe(200)
      expect(l.body.rules).toEqual([
        { target: { kind: 'bucket', prefix: 'user:' }, limit: 10, note: 'all users <b>', inForce: false },
        { target: { kind: 'bucket', name: 'user:42' }, limit: 50, mode: 'shadow', inForce: true },
      ])
    } finally {
      await srv.close()
      await store.close()
    }
  })
})
