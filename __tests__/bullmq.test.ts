// sluice/bullmq's limitProcessor with real BullMQ queues and workers on the suite's Redis.
import { Queue, Worker, type Job } from 'bullmq'
import { afterAll, describe, expect, it } from 'vitest'
import {
  BucketLimiter,
  ConcurrentLimiter,
  DistributedPacer,
  OverLimitError,
  RedisStore,
  SluiceError,
} from '../lib/entries/index.js'
import { limitProcessor, sidekiqBackoff } from '../lib/entries/bullmq.js'
import { freshPrefix, redisUrl } from './helpers/stores.js'
import { runScenario } from './helpers/bullmq-pacing.js'

const url = new URL(redisUrl())
const connection = { host: url.hostname, port: Number(url.port) }
const closers: (() => Promise<unknown>)[] = []
afterAll(async () => {
  for (const close of closers.reverse()) await close()
})

async function setup() {
  const store = await RedisStore.connect({ url: redisUrl(), keyPrefix: freshPrefix() })
  const name = `q${freshPrefix()}`
  const queue = new Queue(name, { connection, prefix: 'sluicetest' })
  closers.push(
    () => store.close(),
    () => queue.obliterate({ force: true }).then(() => queue.close()),
  )
  return { store, name, queue }
}

function work(name: string, processor: (job: Job, token?: string) => Promise<unknown>, concurrency: number) {
  const worker = new Worker(name, processor, { connection, prefix: 'sluicetest', concurrency })
  closers.push(() => worker.close())
  const completed = new Map<string, number>()
  const failed = new Map<string, string>()
  worker.on('completed', (job) => completed.set(job.id!, (completed.get(job.id!) ?? 0) + 1))
  worker.on('failed', (job, err) => job && failed.set(job.id!, `${failed.has(job.id!) ? 'twice ' : ''}${err.name}`))
  return { worker, completed, failed }
}

async function until(cond: () => boolean, withinMs = 20_000) {
  const start = Date.now()
  while (!cond()) {
    if (Date.now() - start > withinMs) throw new Error('condition not met in time')
    await new Promise((r) => setTimeout(r, 20))
  }
}

/** When the delayed job `id` is due (its score in the delayed set), once it is delayed. */
async function delayedUntil(queue: Queue, id: string): Promise<number> {
  let state = ''
  for (let i = 0; i < 200 && state !== 'delayed'; i++) {
    state = await queue.getJobState(id)
    if (state !== 'delayed') await new Promise((r) => setTimeout(r, 20))
  }
  expect(state).toBe('delayed')
  const client = await queue.getBackend().client
  const score = Number(await client.zscore(queue.toKey('delayed'), id))
  return Math.floor(score / 0x1000)
}

describe('limitProcessor', () => {
  it('over a bucket limit: moved to delayed with the backoff, no attempt spent, then OverLimitError', async () => {
    const { store, name, queue } = await setup()
    const bucket = new BucketLimiter(store, { name: 'api', limit: 2, interval: 'hour' })
    const runs = new Map<string, { started: number; made: number; data: string }[]>()
    const backoffs: [string, number, boolean][] = []
    const processor = limitProcessor(
      async (job) => {
        return `done ${job.id}`
      },
      {
        limiter: (job) => {
          const list = runs.get(job.id!) ?? []
          list.push({ started: job.attemptsStarted, made: job.attemptsMade, data: JSON.stringify(job.data) })
          runs.set(job.id!, list)
          return bucket
        },
        reschedule: 2,
        backoff: (job, overrated, err) => {
          backoffs.push([job.id!, overrated, err instanceof OverLimitError])
          return 30
        },
      },
    )
    const w = work(name, processor, 3)
    const jobs = await Promise.all(
      Array.from({ length: 6 }, (_, i) => queue.add('call', { n: i }, { jobId: `j${i}`, attempts: 1 })),
    )
    await until(() => w.completed.size + w.failed.size === 6)
    expect(w.completed.size).toBe(2)
    expect([...w.failed.values()]).toEqual(Array(4).fill('OverLimitError'))
    for (const job of jobs) {
      const list = runs.get(job.id!)!
      if (w.completed.has(job.id!)) continue
      // 2 reschedules, 3 runs; no attempt spent by a reschedule; data read back unchanged
      expect(list.map((r) => [r.started, r.made])).toEqual([
        [1, 0],
        [2, 0],
        [3, 0],
      ])
      expect(new Set(list.map((r) => r.data))).toEqual(new Set([JSON.stringify(job.data)]))
      const stored = await queue.getJob(job.id!)
      expect(stored!.data).toEqual(job.data)
      expect(stored!.failedReason).toMatch(/after 2 reschedules/)
    }
    // overrated counts from 1 at the first reschedule
    const perJob = new Map<string, number[]>()
    for (const [id, overrated, isOverLimit] of backoffs) {
      expect(isOverLimit).toBe(true)
      perJob.set(id, [...(perJob.get(id) ?? []), overrated])
    }
    expect([...perJob.values()]).toEqual(Array(4).fill([1, 2]))
    expect([...w.completed.values()].every((n) => n === 1)).toBe(true)
    // the bucket's statistics: 2 admitted, 4 jobs refused 3 times each, 8 reschedules
    expect(await bucket.stats()).toMatchObject({ admitted: 2, refused: 12, rescheduled: 8 })
  })

  it("sidekiqBackoff is Sidekiq's 300 * overrated + rand(300) + 1 seconds, a ConcurrentLimiter's default", async () => {
    for (let i = 0; i < 200; i++) {
      const ms = sidekiqBackoff(1)
      expect(ms).toBeGreaterThanOrEqual(301_000)
      expect(ms).toBeLessThanOrEqual(600_000)
      expect(ms % 1000).toBe(0)
    }
    expect(sidekiqBackoff(3)).toBeGreaterThanOrEqual(901_000)
    const { store, name, queue } = await setup()
    const slots = new ConcurrentLimiter(store, { name: 'busy', limit: 1 })
    const lease = await slots.tryAcquire()
    expect(lease).not.toBeNull()
    const w = work(
      name,
      limitProcessor(async () => 'never', { limiter: () => slots }),
      1,
    )
    const before = Date.now()
    await queue.add('call', {}, { jobId: 'late' })
    const runAt = await delayedUntil(queue, 'late')
    expect(runAt - before).toBeGreaterThanOrEqual(301_000 - 1000)
    expect(runAt - before).toBeLessThanOrEqual(600_000 + 5000)
    expect(w.completed.size + w.failed.size).toBe(0)
    await lease!.release()
  })

  it('issue-24: a job refused by an hourly bucket waits for the next hour, not 5-10 minutes', async () => {
    const { store, name, queue } = await setup()
    const bucket = new BucketLimiter(store, { name: 'hourly', limit: 1, interval: 'hour' })
    await bucket.check()
    const reopens = Date.now() + (await bucket.peek()).retryAfterMs
    const w = work(
      name,
      limitProcessor(async () => 'never', { limiter: () => bucket }),
      1,
    )
    await queue.add('call', {}, { jobId: 'hourly' })
    // delivered 400 ms ahead of its slot (the lead), the slot being when the bucket reopens
    const runAt = await delayedUntil(queue, 'hourly')
    expect(runAt).toBeGreaterThanOrEqual(reopens - 400 - 50)
    expect(runAt).toBeLessThanOrEqual(reopens - 400 + 1000)
    expect(w.completed.size + w.failed.size).toBe(0)
  })

  it('a concurrent limiter: never more than its limit at once, the lease held for the whole run', async () => {
    const { store, name, queue } = await setup()
    const slots = new ConcurrentLimiter(store, { name: 'slots', limit: 2, waitTimeoutMs: 10_000 })
    let running = 0
    let most = 0
    const processor = limitProcessor(
      async () => {
        most = Math.max(most, ++running)
        await new Promise((r) => setTimeout(r, 40))
        running--
      },
      { limiter: () => slots, maxWaitMs: 10_000 },
    )
    const w = work(name, processor, 8)
    await queue.addBulk(Array.from({ length: 12 }, (_, i) => ({ name: 'job', data: { i }, opts: { jobId: `c${i}` } })))
    await until(() => w.completed.size === 12)
    expect(most).toBe(2)
    expect(w.failed.size).toBe(0)
    expect((await slots.stats()).current).toBe(0) // every lease released
  })

  it('a pacer with maxWaitMs: jobs wait for their slot and run at qps', async () => {
    const { store, name, queue } = await setup()
    const pacer = new DistributedPacer(store, { key: 'paced', qps: 20 })
    const ranAt: number[] = []
    const processor = limitProcessor(
      async () => {
        ranAt.push(Date.now())
      },
      { limiter: () => pacer, maxWaitMs: 30_000 },
    )
    const w = work(name, processor, 4)
    await queue.addBulk(Array.from({ length: 12 }, (_, i) => ({ name: 'job', data: { i }, opts: { jobId: `p${i}` } })))
    await until(() => w.completed.size === 12)
    ranAt.sort((a, b) => a - b)
    // rateLimit admits the opening call plus one per 50 ms: 12 jobs take at least 11 * 50 ms
    expect(ranAt[11] - ranAt[0]).toBeGreaterThanOrEqual(10 * 50)
    expect(w.failed.size).toBe(0)
  })

  it('limiter(job) chooses per job (a per-tenant limit); null means no limit; a throw fails that job only', async () => {
    const { store, name, queue } = await setup()
    const processor = limitProcessor(async (job) => `ok ${job.data.tenant}`, {
      limiter: (job) => {
        if (job.data.tenant === 'boom') throw new Error('no limiter for boom')
        if (job.data.tenant === 'free') return null
        return new BucketLimiter(store, { name: `tenant-${job.data.tenant}`, limit: 1, interval: 'hour' })
      },
      reschedule: 0,
    })
    const w = work(name, processor, 2)
    const tenants = ['a', 'a', 'b', 'free', 'free', 'boom', 'b']
    await queue.addBulk(tenants.map((tenant, i) => ({ name: 'job', data: { tenant }, opts: { jobId: `t${i}` } })))
    await until(() => w.completed.size + w.failed.size === tenants.length)
    expect([...w.completed.keys()].sort()).toEqual(['t0', 't2', 't3', 't4'])
    expect(Object.fromEntries(w.failed)).toEqual({ t1: 'OverLimitError', t5: 'Error', t6: 'OverLimitError' })
    expect(w.worker.isRunning()).toBe(true)
  })

  it('admissions taken ahead (a limit of 100 or more): few round trips, never over the limit', async () => {
    const { store, name, queue } = await setup()
    const roomy = new BucketLimiter(store, { name: 'roomy', limit: 1000, interval: 'hour' })
    const tight = new BucketLimiter(store, { name: 'tight', limit: 200, interval: 'hour' })
    const processor = limitProcessor(async () => 'ok', {
      limiter: (job) => (job.data.tight ? tight : roomy),
      reschedule: 0,
    })
    const w = work(name, processor, 16)
    const before = store.batching.calls
    await queue.addBulk(Array.from({ length: 300 }, (_, i) => ({ name: 'job', data: { i }, opts: { jobId: `r${i}` } })))
    await until(() => w.completed.size === 300)
    // 10 units per call (1 % of 1000): 30 calls for 300 jobs at best, plus the jobs that
    // found the pool empty twice and asked for themselves; far from one call per job
    expect(store.batching.calls - before).toBeLessThan(150)
    const charged = 1000 - (await roomy.peek()).remaining
    expect(charged).toBeGreaterThanOrEqual(300)
    expect(charged).toBeLessThanOrEqual(300 + 2 * 10)
    // the limit reached: exactly the admitted jobs ran, never more than 200 in all
    await queue.addBulk(
      Array.from({ length: 260 }, (_, i) => ({ name: 'job', data: { i, tight: true }, opts: { jobId: `t${i}` } })),
    )
    await until(() => w.completed.size + w.failed.size === 560)
    const ran = w.completed.size - 300
    expect(ran).toBeLessThanOrEqual(200)
    expect(ran).toBeGreaterThanOrEqual(200 - 2 * 2)
    // every run was charged first (and the limiter never charged past its limit)
    expect(ran).toBeLessThanOrEqual(200 - (await tight.peek()).remaining)
    expect([...w.failed.values()].every((e) => e === 'OverLimitError')).toBe(true)
  })

  it('issue-24: with the defaults a pacer job holds its own slot: none fails, data and opts unchanged, charged once', async () => {
    const { store, name, queue } = await setup()
    const pacer = new DistributedPacer(store, { key: 'own-slot', qps: 5 })
    const ranAt: number[] = []
    const w = work(
      name,
      limitProcessor(
        async () => {
          ranAt.push(Date.now())
        },
        { limiter: () => pacer },
      ),
      8,
    )
    const jobs = await queue.addBulk(
      Array.from({ length: 8 }, (_, i) => ({
        name: 'job',
        data: { i, deep: { x: [i] } },
        opts: { jobId: `o${i}`, attempts: 2 },
      })),
    )
    await until(() => w.completed.size + w.failed.size === 8)
    expect(w.failed.size).toBe(0)
    ranAt.sort((a, b) => a - b)
    // one slot per job at 5 per second: 7 gaps of 200 ms (charged twice, it would be 14)
    const span = ranAt[7] - ranAt[0]
    expect(span).toBeGreaterThanOrEqual(7 * 200 - 50)
    expect(span).toBeLessThan(7 * 200 * 1.5)
    for (const job of jobs) {
      const stored = (await queue.getJob(job.id!))!
      expect(stored.data).toEqual(job.data)
      expect(stored.opts).toEqual(job.opts)
    }
  })

  it('issue-24: reschedule 0 reserves nothing: a pacer job over the limit fails at once', async () => {
    const { store, name, queue } = await setup()
    const pacer = new DistributedPacer(store, { key: 'strict', qps: 0.01 })
    const w = work(
      name,
      limitProcessor(async () => 'ok', { limiter: () => pacer, reschedule: 0 }),
      3,
    )
    await queue.addBulk(Array.from({ length: 3 }, (_, i) => ({ name: 'job', data: { i }, opts: { jobId: `s${i}` } })))
    await until(() => w.completed.size + w.failed.size === 3)
    expect(w.completed.size).toBe(1)
    expect([...w.failed.values()]).toEqual(['OverLimitError', 'OverLimitError'])
  })

  // issue 24: the scenario of scripts/bullmq-pacing.js (200 jobs at 10/s there), smaller: 60
  // jobs at 20 per second on 3 worker processes, limitProcessor with its defaults
  for (const kind of ['pacer', 'bucket', 'window', 'leaky', 'sliding'] as const) {
    it(`issue-24-defaults-${kind}: 60 jobs at 20/s on 3 processes, none failed, at least 90 % of the limit, starts per second within the limit + 2`, async () => {
      const limit = 20
      const r = await runScenario({ url: redisUrl(), kind, jobs: 60, limit, processes: 3, timeoutMs: 25_000 })
      const summary = JSON.stringify({ ...r, starts: undefined })
      expect(r.failed, summary).toBe(0)
      expect(r.completed, summary).toBe(60)
      expect(r.pids, summary).toBeGreaterThan(1)
      // at least 90 % of the limit (charged twice, a reservation would halve it)
      expect(r.rate, summary).toBeGreaterThanOrEqual(0.9 * limit)
      // per calendar second: the limit, plus a leaky limiter's burst (its limit) in the first.
      // A start follows its admission (or its slot) by a few ms, more on a loaded machine, so
      // a second may also hold a job admitted in the last ms of the second before: at most 2
      // such starts, in at most 2 seconds (the 200-job runs of scripts/bullmq-pacing.js, in
      // the README, count them exactly)
      const burst = kind === 'leaky' ? limit : 0
      expect(r.maxCalendar, summary).toBeLessThanOrEqual(limit + burst + 2)
      expect(r.overCalendar, summary).toBeLessThanOrEqual(kind === 'leaky' ? 3 : 2)
      // a pacer's or leaky limiter's job is never refused (it reserves); a counter's job is
      // refused once, rarely twice: far from the 20 reschedules allowed
      if (kind === 'pacer' || kind === 'leaky') expect(r.counted, summary).toBe(0)
      else expect(r.counted, summary).toBeLessThanOrEqual(3)
    }, 60_000)
  }

  it('bad options throw ERR_INVALID_CONFIG at setup', () => {
    const ok = async () => 1
    const bad: [unknown, unknown][] = [
      [null, { limiter: () => null }],
      [ok, null],
      [ok, {}],
      [ok, { limiter: 'bucket' }],
      [ok, { limiter: () => null, reschedule: -1 }],
      [ok, { limiter: () => null, reschedule: 1.5 }],
      [ok, { limiter: () => null, backoff: 5 }],
      [ok, { limiter: () => null, maxWaitMs: -1 }],
      [ok, { limiter: () => null, retries: 3 }],
      [ok, { limiter: () => null, prefetch: 'yes' }],
    ]
    for (const [processor, options] of bad) {
      let error: unknown
      try {
        limitProcessor(processor as any, options as any)
      } catch (e) {
        error = e
      }
      expect(error, JSON.stringify(options)).toBeInstanceOf(SluiceError)
      expect((error as SluiceError).code).toBe('ERR_INVALID_CONFIG')
    }
  })
})

describe('issue-24-bullmq-long-waits', () => {
  it('a ConcurrentLimiter job with maxWaitMs of 30 days waits for the lease, not 1 ms (AbortSignal.timeout overflowed)', async () => {
    const { store, name, queue } = await setup()
    const sem = new ConcurrentLimiter(store, {
      name: 'long',
      limit: 1,
      lockTimeoutMs: 60_000,
      waitTimeoutMs: 40 * 86_400_000,
    })
    const held = await sem.acquire()
    const warnings: string[] = []
    const onWarning = (w: Error) => warnings.push(w.name)
    process.on('warning', onWarning)
    const processor = limitProcessor(async () => 'ran', { limiter: () => sem, maxWaitMs: 30 * 86_400_000 })
    const { completed, failed } = work(name, processor, 1)
    await queue.add('j', {})
    await new Promise((r) => setTimeout(r, 300))
    expect(failed.size).toBe(0)
    expect(completed.size).toBe(0) // still waiting for the lease
    await held!.release()
    await until(() => completed.size === 1)
    process.off('warning', onWarning)
    expect(warnings).not.toContain('TimeoutOverflowWarning')
  })
})
