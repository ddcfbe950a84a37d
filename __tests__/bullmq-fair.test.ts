// sluice/bullmq's FairQueues and weightedWorkers with real BullMQ queues and workers: routing
// on a standalone Redis and on a Redis Cluster (hash-tagged queue prefix), weights, the shared
// budget, and the fairness a greedy tenant meets, measured.
import { fork } from 'node:child_process'
import { join } from 'node:path'
import { Cluster } from 'ioredis'
import { Queue, type Job } from 'bullmq'
import { afterAll, describe, expect, it } from 'vitest'
import { BucketLimiter, FairTenant, RedisStore, SluiceError } from '../lib/entries/index.js'
import { FairQueues, limitProcessor, weightedWorkers } from '../lib/entries/bullmq.js'
import { clusterNodes, freshPrefix, redisUrl, REDIS_KINDS } from './helpers/stores.js'

const closers: (() => Promise<unknown>)[] = []
afterAll(async () => {
  for (const close of closers.reverse()) await close().catch(() => undefined)
})

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

async function until(cond: () => boolean | Promise<boolean>, withinMs = 60_000) {
  const start = Date.now()
  while (!(await cond())) {
    if (Date.now() - start > withinMs) throw new Error('condition not met in time')
    await sleep(10)
  }
}

type Kind = 'redis' | 'cluster'

function connectionFor(kind: Kind) {
  if (kind === 'redis') {
    const url = new URL(redisUrl())
    return { host: url.hostname, port: Number(url.port) }
  }
  const cluster = new Cluster(
    clusterNodes().map((u) => ({ host: new URL(u).hostname, port: Number(new URL(u).port) })),
    { redisOptions: { maxRetriesPerRequest: null } },
  )
  closers.push(async () => cluster.disconnect())
  return cluster
}

async function storeFor(kind: Kind) {
  const keyPrefix = freshPrefix()
  const store =
    kind === 'redis'
      ? await RedisStore.connect({ url: redisUrl(), keyPrefix })
      : await RedisStore.connect({ cluster: clusterNodes(), keyPrefix })
  closers.push(() => store.close())
  return store
}

function queuesFor(kind: Kind, names: string[]) {
  const connection = connectionFor(kind)
  // on a cluster every key of a queue must share a slot: a hash-tagged prefix
  const prefix = kind === 'cluster' ? `{f${freshPrefix()}}` : `f${freshPrefix()}`
  const queues = Object.fromEntries(names.map((n) => [n, new Queue(n, { connection, prefix })]))
  closers.push(async () => {
    for (const q of Object.values(queues)) await q.obliterate({ force: true }).then(() => q.close())
  })
  return { connection, prefix, queues }
}

const percentile = (xs: number[], p: number) => {
  const sorted = [...xs].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]
}

const RULES = [
  { queue: 'throttled_2x', threshold: 100, perMs: 600_000 },
  { queue: 'throttled_4x', threshold: 1000, perMs: 600_000 },
]
const WEIGHTS = [
  { name: 'default', weight: 4 },
  { name: 'throttled_2x', weight: 2 },
  { name: 'throttled_4x', weight: 1 },
]

/**
 * One greedy tenant enqueues 5,000 jobs, then ten small tenants 10 each, into the queue
 * family served by weightedWorkers (concurrency 10, jobs of ~1 ms). Routed by FairQueues,
 * or (fair = null) all into the default queue. Returns the small tenants' waits (enqueue to
 * start) and how long the whole backlog took.
 */
async function fairness(kind: Kind, mode: 'exact' | 'approximate' | null) {
  const store = await storeFor(kind)
  const { connection, prefix, queues } = queuesFor(
    kind,
    WEIGHTS.map((w) => w.name),
  )
  const waits = new Map<string, number[]>()
  const seen = new Set<string>()
  let twice = 0
  const ww = weightedWorkers({
    queues: WEIGHTS,
    concurrency: 10,
    connection,
    prefix,
    processor: async (job: Job) => {
      const key = `${job.queueName}/${job.id}`
      if (seen.has(key)) twice++
      seen.add(key)
      const tenant = job.data.tenant as string
      if (!waits.has(tenant)) waits.set(tenant, [])
      waits.get(tenant)!.push(job.processedOn! - job.timestamp)
      await sleep(1)
    },
  })
  closers.push(() => ww.close())
  await ww.waitUntilReady()
  const fair =
    mode === null
      ? null
      : new FairQueues(
          new FairTenant(store, {
            name: 'signup',
            rules: RULES,
            mode,
            granularityMs: mode === 'approximate' ? 6000 : undefined,
          }),
          {
            queues,
            defaultQueue: 'default',
          },
        )
  const start = Date.now()
  const add = (tenant: string, i: number) =>
    fair === null ? queues.default.add('work', { tenant, i }) : fair.add(tenant, 'work', { tenant, i })
  for (let c = 0; c < 5000; c += 500) {
    await Promise.all(Array.from({ length: 500 }, (_, i) => add('greedy', c + i)))
  }
  const small = Array.from({ length: 10 }, (_, t) => `small${t}`)
  await Promise.all(small.flatMap((tenant) => Array.from({ length: 10 }, (_, i) => add(tenant, i))))
  await until(() => seen.size === 5100)
  const elapsedMs = Date.now() - start
  await ww.close()
  const smallWaits = small.flatMap((t) => waits.get(t) ?? [])
  expect(smallWaits.length).toBe(100)
  expect(twice).toBe(0)
  const counts = Object.fromEntries(
    await Promise.all(Object.entries(queues).map(async ([n, q]) => [n, (await q.getJobCounts('completed')).completed])),
  )
  return { p50: percentile(smallWaits, 50), p95: percentile(smallWaits, 95), elapsedMs, counts }
}

describe.each(REDIS_KINDS)('FairQueues on %s', (kind) => {
  it('routes each tenant by its rules, makes job ids, and a re-added job id counts once', async () => {
    const store = await storeFor(kind)
    const { queues } = queuesFor(kind, ['fast', 'slow'])
    const fair = new FairTenant(store, { name: 'imports', rules: [{ queue: 'slow', threshold: 2, perMs: 60_000 }] })
    const fq = new FairQueues(fair, { queues, defaultQueue: 'fast' })
    const jobs = []
    for (let i = 0; i < 4; i++) jobs.push(await fq.add('acme', 'import', { i }))
    expect(jobs.map((j) => j.queueName)).toEqual(['fast', 'fast', 'slow', 'slow'])
    expect(new Set(jobs.map((j) => j.id)).size).toBe(4)
    for (const j of jobs) expect(j.id).toMatch(/^[0-9a-f-]{36}$/)
    // the user's data and options read back unchanged; a given id is kept
    const again = await fq.add('other', 'import', { x: 1 }, { jobId: 'fixed', attempts: 3 })
    expect(again.id).toBe('fixed')
    expect(again.opts.attempts).toBe(3)
    expect(again.data).toEqual({ x: 1 })
    for (let i = 0; i < 3; i++) await fq.add('other', 'import', { x: 1 }, { jobId: 'fixed' })
    expect((await fair.route('other', 'probe', 'fast')).counts).toEqual([2])
    // addBulk: routed per job, in order
    const bulk = await fq.addBulk([
      { tenant: 'acme', name: 'b', data: { n: 1 } },
      { tenant: 'new', name: 'b', data: { n: 2 } },
    ])
    expect(bulk.map((j) => [j.queueName, j.data.n])).toEqual([
      ['slow', 1],
      ['fast', 2],
    ])
  })

  it('fairness, measured: small tenants behind a greedy one (5,000 jobs), with and without routing', async () => {
    const without = await fairness(kind, null)
    const exact = await fairness(kind, 'exact')
    const approximate = await fairness(kind, 'approximate')
    const row = (what: string, r: typeof exact) =>
      `| ${kind} | ${what} | ${r.p50} | ${r.p95} | ${r.elapsedMs} | ${JSON.stringify(r.counts)} |`
    console.log(
      [
        '| store | routing | small tenants p50 wait (ms) | p95 wait (ms) | whole backlog (ms) | jobs per queue |',
        row('none (one queue)', without),
        row('FairQueues exact', exact),
        row('FairQueues approximate', approximate),
      ].join('\n'),
    )
    // the greedy tenant's first 100 stay in default, up to 1,000 go to 2x, the rest to 4x
    expect(exact.counts).toEqual({ default: 200, throttled_2x: 900, throttled_4x: 4000 })
    expect(approximate.counts).toEqual({ default: 200, throttled_2x: 900, throttled_4x: 4000 })
    // without routing the small tenants wait behind the whole backlog; with it, far less
    expect(exact.p95 * 4).toBeLessThan(without.p95)
    expect(approximate.p95 * 4).toBeLessThan(without.p95)
  })
})

describe('weightedWorkers', () => {
  it('one budget over several queues: served by weight while they compete, never above the budget', async () => {
    const { connection, prefix, queues } = queuesFor('redis', ['hi', 'lo'])
    await queues.hi.addBulk(Array.from({ length: 300 }, (_, i) => ({ name: 'x', data: { i } })))
    await queues.lo.addBulk(Array.from({ length: 300 }, (_, i) => ({ name: 'x', data: { i } })))
    const starts: string[] = []
    let running = 0
    let most = 0
    const ww = weightedWorkers({
      queues: [
        { name: 'hi', weight: 3 },
        { name: 'lo', weight: 1 },
      ],
      concurrency: 4,
      connection,
      prefix,
      processor: async (job: Job) => {
        running++
        most = Math.max(most, running)
        starts.push(job.queueName)
        await sleep(2)
        running--
      },
    })
    closers.push(() => ww.close())
    await until(() => starts.length === 600)
    expect(most).toBe(4)
    // while both have work, 3 of every 4 starts are hi's
    const hi = starts.slice(0, 300).filter((q) => q === 'hi').length
    expect(hi).toBeGreaterThanOrEqual(215)
    expect(hi).toBeLessThanOrEqual(235)
    await ww.close()
    expect(ww.running).toBe(0)
    const counts = await Promise.all([queues.hi.getJobCounts(), queues.lo.getJobCounts()])
    for (const c of counts) expect(c).toMatchObject({ completed: 300, active: 0, waiting: 0, failed: 0 })
  })

  it('work-conserving: a queue alone with work gets the whole budget; an idle queue is picked up', async () => {
    const { connection, prefix, queues } = queuesFor('redis', ['fast', 'slow'])
    let running = 0
    let most = 0
    const done: string[] = []
    const ww = weightedWorkers({
      queues: [
        { name: 'fast', weight: 10 },
        { name: 'slow', weight: 1 },
      ],
      concurrency: 6,
      connection,
      prefix,
      idlePollMs: 20,
      processor: async (job: Job) => {
        running++
        most = Math.max(most, running)
        await sleep(20)
        running--
        done.push(job.queueName)
      },
    })
    closers.push(() => ww.close())
    await ww.waitUntilReady()
    await queues.slow.addBulk(Array.from({ length: 60 }, (_, i) => ({ name: 'x', data: { i } })))
    await until(() => done.length === 60)
    expect(most).toBe(6)
    // a job added to an idle pool starts within idlePollMs (plus a round trip)
    const t = Date.now()
    await queues.fast.add('late', {})
    await until(() => done.length === 61)
    expect(Date.now() - t).toBeLessThan(1000)
    await ww.close()
  })

  it('runs BullMQ semantics: retries, failures, limitProcessor delays; a job outliving its lock is not stalled', async () => {
    const { connection, prefix, queues } = queuesFor('redis', ['a', 'b'])
    const store = await storeFor('redis')
    const bucket = new BucketLimiter(store, { name: 'api', limit: 1, interval: 'hour' })
    const events: string[] = []
    const ww = weightedWorkers({
      queues: [
        { name: 'a', weight: 1 },
        { name: 'b', weight: 1 },
      ],
      concurrency: 2,
      connection,
      prefix,
      workerOptions: { lockDuration: 1000, stalledInterval: 500 },
      processor: limitProcessor(
        async (job: Job) => {
          if (job.name === 'flaky' && job.attemptsMade === 0) throw new Error('first try fails')
          if (job.name === 'bad') throw new Error('always fails')
          if (job.name === 'long') await sleep(2500)
          return job.name
        },
        { limiter: (job: Job) => (job.name === 'limited' ? bucket : null), reschedule: 1, backoff: () => 50 },
      ),
    })
    ww.on('completed', (job: Job) => events.push(`completed ${job.name}`))
    ww.on('failed', (job: Job | undefined, err: Error) => events.push(`failed ${job?.name} ${err.name}`))
    ww.on('stalled', (id: string) => events.push(`stalled ${id}`))
    closers.push(() => ww.close())
    await queues.a.add('flaky', {}, { attempts: 2 })
    await queues.a.add('bad', {}, { attempts: 1 })
    await queues.b.add('long', {})
    await queues.b.add('limited', {})
    await queues.b.add('limited', {})
    await until(() => events.length >= 6, 20_000)
    await sleep(200)
    expect(events.sort()).toEqual(
      [
        'completed flaky',
        'completed limited',
        'completed long',
        'failed bad Error',
        'failed flaky Error',
        'failed limited OverLimitError',
      ].sort(),
    )
    await ww.close()
  })

  it('bad options throw ERR_INVALID_CONFIG at once', () => {
    const connection = { host: '127.0.0.1', port: 1 }
    const processor = async () => undefined
    const ok = { queues: [{ name: 'a', weight: 1 }], concurrency: 1, processor, connection }
    const bad: any[] = [
      undefined,
      { ...ok, queues: [] },
      { ...ok, queues: [{ name: 'a', weight: 0 }] },
      { ...ok, queues: [{ name: 'a', weight: 1.5 }] },
      { ...ok, queues: [{ name: '', weight: 1 }] },
      {
        ...ok,
        queues: [
          { name: 'a', weight: 1 },
          { name: 'a', weight: 2 },
        ],
      },
      { ...ok, concurrency: 0 },
      { ...ok, processor: 'x' },
      { ...ok, connection: null },
      { ...ok, idlePollMs: 0 },
      { ...ok, prefix: '' },
      { ...ok, workerOptions: { concurrency: 5 } },
      { ...ok, extra: true },
    ]
    for (const o of bad) {
      expect(() => weightedWorkers(o)).toThrow(SluiceError)
      try {
        weightedWorkers(o)
      } catch (err) {
        expect((err as SluiceError).code).toBe('ERR_INVALID_CONFIG')
      }
    }
  })

  it('FairQueues: bad options throw ERR_INVALID_CONFIG', async () => {
    const store = await storeFor('redis')
    const fair = new FairTenant(store, { name: 'x', rules: [{ queue: 'slow', threshold: 1 }] })
    const q = { add: () => undefined, addBulk: () => undefined }
    for (const [f, o] of [
      [{}, { queues: { fast: q, slow: q }, defaultQueue: 'fast' }],
      [fair, { queues: { fast: q }, defaultQueue: 'fast' }],
      [fair, { queues: { fast: q, slow: q }, defaultQueue: 'none' }],
      [fair, { queues: { fast: q, slow: {} }, defaultQueue: 'fast' }],
      [fair, { queues: { fast: q, slow: q } }],
      [fair, { queues: { fast: q, slow: q }, defaultQueue: 'fast', more: 1 }],
    ] as any[]) {
      expect(() => new FairQueues(f, o)).toThrow(expect.objectContaining({ code: 'ERR_INVALID_CONFIG' }))
    }
  })
})

describe('paced workers in 4 processes on one pacer', () => {
  it('achieve qps within 1 %, and block(ms) from one process stops all of them for ms', async () => {
    const worker = join(__dirname, 'helpers', 'paced-worker.js')
    const url = new URL(redisUrl())
    const connection = { host: url.hostname, port: Number(url.port) }
    const bullPrefix = `p${freshPrefix()}`
    const queue = new Queue('paced', { connection, prefix: bullPrefix })
    closers.push(() => queue.obliterate({ force: true }).then(() => queue.close()))
    const qps = 50
    const blockMs = 1000
    const cfg = {
      url: redisUrl(),
      prefix: freshPrefix(),
      key: 'upstream',
      qps,
      queue: 'paced',
      connection,
      bullPrefix,
      concurrency: 3,
      blockMs,
    }
    const children = Array.from({ length: 4 }, () => fork(worker, [JSON.stringify(cfg)]))
    closers.push(async () => {
      for (const c of children) c.kill()
    })
    const message = (c: (typeof children)[number]) => new Promise<any>((resolve) => c.once('message', resolve))
    await Promise.all(children.map(message))
    const starts = async (from: number, count: number) => {
      await until(async () => (await queue.getJobCounts('completed')).completed >= from + count, 60_000)
      const done = await queue.getJobs(['completed'], 0, -1)
      return done.map((j) => j.returnvalue as { startedAt: number; pid: number; n: number })
    }
    // phase 1: 250 jobs at 50 per second, shared by 4 processes
    await queue.addBulk(Array.from({ length: 250 }, (_, n) => ({ name: 'call', data: { n } })))
    const first = (await starts(0, 250)).sort((a, b) => a.startedAt - b.startedAt)
    const span = first[first.length - 1].startedAt - first[0].startedAt
    const rate = ((first.length - 1) * 1000) / span
    expect(new Set(first.map((s) => s.pid)).size).toBe(4)
    expect(Math.abs(rate - qps) / qps).toBeLessThan(0.01)
    // phase 2: 150 more; one process blocks the pacer while they run
    await queue.addBulk(Array.from({ length: 150 }, (_, n) => ({ name: 'call', data: { n: 250 + n } })))
    await sleep(1000)
    children[0].send('block')
    const { recorded } = await message(children[0])
    const all = (await starts(250, 150)).sort((a, b) => a.startedAt - b.startedAt)
    const second = all.filter((s) => s.n >= 250)
    // slots reserved before the block still run (at most concurrency x processes of them, 240 ms);
    // after those, no process starts a job until the block ends
    const during = second.filter((s) => s.startedAt > recorded + 250 && s.startedAt < recorded + blockMs - 5)
    expect(during).toEqual([])
    const after = second.filter((s) => s.startedAt >= recorded + blockMs - 5)
    expect(after.length).toBeGreaterThan(20)
    expect(new Set(after.map((s) => s.pid)).size).toBe(4)
    for (const c of children) c.send('stop')
    console.log(
      `paced workers: ${rate.toFixed(3)} jobs/s of qps ${qps} over ${span} ms; none started during the ${blockMs} ms block`,
    )
  }, 90_000)
})
