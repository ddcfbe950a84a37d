'use strict'

// sluice/bullmq: BullMQ processors limited by any sluice limiter, with Sidekiq Enterprise's
// "reschedule an over-limit job with backoff" behaviour. BullMQ is the app's own dependency:
// it is loaded when a processor is made, not when sluice is.

const { OverLimitError, SluiceError, invalidConfig, invalidArgument } = require('./errors')
const { ConcurrentLimiter } = require('./concurrent')
const { DistributedPacer, PacerComposite } = require('./pacer')
const { BucketLimiter, WindowLimiter, LeakyLimiter, PointsLimiter, MAX_MS, elapsedMs } = require('./limiters')
const { longTimeout, MAX_TIMEOUT_MS } = require('./timers')
const { SlidingWindowLimiter } = require('./windows')
const { FairTenant } = require('./fair')
const { EventEmitter } = require('node:events')
const { randomUUID } = require('node:crypto')

const OPTIONS = ['limiter', 'reschedule', 'backoff', 'maxWaitMs', 'prefetch']
const DEFAULT_RESCHEDULE = 20
const MAX_RESCHEDULE = 1_000_000
/** Admissions a process takes ahead in one call: 1 % of the limit, at most this many. */
const MAX_PREFETCH = 1024
/** Units taken ahead are used only while their window surely lasts (latency, clock skew). */
const PREFETCH_MARGIN_MS = 250

function loadBullmq() {
  try {
    return require('bullmq')
  } catch (err) {
    throw new SluiceError('ERR_INVALID_CONFIG', 'sluice/bullmq needs the bullmq package: npm install bullmq', {
      cause: err,
    })
  }
}

/**
 * Sidekiq Enterprise's limiter backoff, in ms: `300 * overrated + rand(300) + 1` seconds,
 * `overrated` counting from 1 at the first reschedule. The default for a ConcurrentLimiter
 * (whose slots free up at no known time); pass it as `backoff` to get it for any limiter.
 */
function sidekiqBackoff(overrated) {
  return (300 * overrated + Math.floor(Math.random() * 300) + 1) * 1000
}

/** Waits `ms`, however long (setTimeout overflows above 2^31 - 1 ms: lib/timers.js chains). */
function sleep(ms) {
  return new Promise((resolve) => longTimeout(resolve, ms))
}

const isRateLimiter = (l) =>
  l instanceof BucketLimiter ||
  l instanceof WindowLimiter ||
  l instanceof LeakyLimiter ||
  l instanceof PointsLimiter ||
  l instanceof SlidingWindowLimiter
const isPacer = (l) => l instanceof DistributedPacer || l instanceof PacerComposite
/** Limiters that charge a later slot now (`check` with a wait): Leaky and Points. */
const reservesSlots = (l) => l instanceof LeakyLimiter || l instanceof PointsLimiter
const nameOf = (l) => l.name || l.key || 'composite'

/** A reservation as far ahead as a wait may be (10 years), µs. */
const MAX_WAIT_US = MAX_MS * 1000
/** A pacer's qps is at most this (its own validation). */
const MAX_QPS = 1e9

/** A rate limiter's sustained rate, per second (the slowest window of a sliding limiter). */
function rateOf(limiter) {
  if (limiter instanceof SlidingWindowLimiter) {
    return Math.min(...limiter.windows.map((w) => (w.limit * 1000) / w.intervalMs))
  }
  return (limiter.limit * 1000) / limiter.intervalMs
}

/** The time between two slots of a rate limiter or pacer at its sustained rate, ms. */
function spacingMs(limiter) {
  if (limiter instanceof DistributedPacer) return 1000 / limiter._qps
  if (limiter instanceof PacerComposite) return Math.max(0, ...limiter._leaves.map((p) => 1000 / p._qps))
  return 1000 / rateOf(limiter)
}

/**
 * A delayed BullMQ job starts up to a few hundred ms after its time (a worker's BZPOPMIN times
 * out on the Redis clock tick, 100 ms at Redis's default hz 10, and busy workers fetch later),
 * so jobs that start at reserved slots would bunch (measured: 11-13 starts in a second at
 * 10/s). A job that waits for a slot is delivered this much early and waits for the slot
 * itself: four slots' spacing, at most SLOT_LEAD_MS, so that on average about four worker
 * slots per limiter are held waiting, whatever the rate.
 */
const SLOT_LEAD_MS = 400
const leadOf = (limiter) => Math.min(SLOT_LEAD_MS, 4 * spacingMs(limiter))

/**
 * The reschedule queue of a rate limiter that cannot reserve a later slot itself (Bucket,
 * Window, SlidingWindow; Leaky and Points when a block refuses them): a pacer at the
 * limiter's sustained rate, on its own key in the same store
 * (`pacer:{sluice/bullmq:<kind>:<name>}`), that hands each refused job a slot of its own,
 * none before the limiter reopens. Its decisions are not counted in statistics: the limiter
 * counts its own decisions, and its reschedules.
 */
class SlotQueue extends DistributedPacer {
  _count() {}
}

/**
 * A slot for a job the limiter refused with `retryAfterMs`, as ms from now: the queue is
 * first blocked until the limiter reopens (a queue already reaching past that is kept), so
 * the slots of jobs refused together follow one another at the limiter's rate from there.
 */
async function slotAfter(limiter, retryAfterMs) {
  const queue = new SlotQueue(limiter._store, {
    key: `sluice/bullmq:${limiter._statsKind}:${limiter.name}`,
    qps: Math.min(MAX_QPS, rateOf(limiter)),
  })
  await queue.block(Math.min(MAX_MS, Math.max(1, Math.ceil(retryAfterMs))))
  return (await queue.pace()).delayMs
}

/**
 * Admissions taken ahead, per Bucket or Window limiter and process: a job that finds one runs
 * without a round trip. Each batch of units was charged to the limiter in one call and is
 * used only before the end of the window it was charged to, so the count per window stays
 * exact; what it may cost is under-admission, at most the units unused when a window ends
 * (2 % of the limit per process, at most 2048). Batches: [{ units, until }], earliest first.
 */
class Prefetch {
  constructor(limiter) {
    this.limiter = limiter
    this.chunk = Math.min(MAX_PREFETCH, Math.floor(limiter.limit / 100))
    this.batches = []
    this.refilling = null
  }

  /** A unit taken ahead, if one is left in a window that lasts. */
  take() {
    // on a monotonic clock (elapsedMs): a wall-clock step must not stretch a window's units
    // into the next window (issue 24)
    const now = elapsedMs(this.limiter._store)
    while (this.batches.length > 0) {
      const b = this.batches[0]
      if (b.until > now && b.units > 0) {
        b.units--
        if (this.left() < this.chunk) this.refill()
        return true
      }
      this.batches.shift()
    }
    return false
  }

  left() {
    let n = 0
    for (const b of this.batches) n += b.units
    return n
  }

  /** Charges `chunk` units in one call (in the background); a refusal simply adds none. */
  refill() {
    if (this.refilling !== null) return this.refilling
    const at = elapsedMs(this.limiter._store)
    this.refilling = this.limiter
      .check(this.chunk)
      .then(
        (d) => {
          if (d.allowed && !d.degraded) {
            this.batches.push({ units: this.chunk, until: at + d.resetAfterMs - PREFETCH_MARGIN_MS })
            this.batches.sort((a, b) => a.until - b.until)
          }
        },
        () => {},
      )
      .finally(() => {
        this.refilling = null
      })
    return this.refilling
  }
}

/** One try of a rate limiter or pacer: 0 when admitted (and charged), else ms to retry after. */
async function tryOnce(limiter, prefetch) {
  if (isPacer(limiter)) return (await limiter.rateLimit()).delayMs
  if (prefetch !== null) {
    if (prefetch.take()) return 0
    await prefetch.refill() // one call for the jobs that found the pool empty
    if (prefetch.take()) return 0
  }
  const d = await limiter.check()
  return d.allowed ? 0 : Math.max(1, d.retryAfterMs)
}

/** Admits within `maxWaitMs` (retrying when the limiter says), or the last retry hint. */
async function admit(limiter, maxWaitMs, prefetch) {
  if (maxWaitMs > 0 && limiter instanceof DistributedPacer) return paced(limiter, maxWaitMs)
  const deadline = Date.now() + maxWaitMs
  for (;;) {
    const retryMs = await tryOnce(limiter, prefetch)
    if (retryMs === 0) return 0
    if (retryMs > deadline - Date.now()) return retryMs
    await sleep(retryMs)
  }
}

/**
 * A pacer that may wait but reserves no slot it will not wait for (a job rescheduled by a
 * user's `backoff`): a slot in its queue (FIFO over every process, exactly `qps`) when the
 * queue's tail is within `maxWaitMs`; 0 once the slot has come, or the ms to retry after.
 * The probe (weight 0) charges nothing; a slot pushed past `maxWaitMs` by a concurrent
 * caller in between is given up.
 */
async function paced(pacer, maxWaitMs) {
  const probe = await pacer.rateLimit(0)
  if (probe.delayMs > maxWaitMs) return probe.delayMs
  const slot = await pacer.pace()
  if (slot.delayMs > maxWaitMs) return slot.delayMs
  if (slot.delayMs > 0) await sleep(slot.delayMs)
  return 0
}

/**
 * A slot charged to the job now, for later: `pace()` of a pacer, a reservation of a Leaky or
 * Points limiter. Resolves with the ms until the slot, or -ms to retry after when refused
 * (a Leaky or Points limiter under `block()`).
 */
async function reserve(limiter) {
  if (isPacer(limiter)) return (await limiter.pace()).delayMs
  const d = await limiter._call(1, MAX_WAIT_US, true)
  return d.allowed ? d.retryAfterMs : -Math.max(1, d.retryAfterMs)
}

/** Counts a reschedule in the statistics of `limiter` (each member of a composite). */
function countRescheduled(limiter) {
  const members = limiter instanceof PacerComposite ? limiter._leaves : [limiter]
  for (const m of members) {
    const book = m._store && m._store._stats
    if (book && m._statsKind) book.rescheduled(m)
  }
}

/** A lease within `maxWaitMs` (and the limiter's own waitTimeoutMs), or null. */
async function lease(limiter, maxWaitMs) {
  if (maxWaitMs === 0) return limiter.tryAcquire()
  // not AbortSignal.timeout: it overflows like setTimeout (a wait over 24.8 days ended at once)
  const ac = new AbortController()
  const cancel = longTimeout(() => ac.abort(new DOMException('timed out', 'TimeoutError')), maxWaitMs, { unref: true })
  try {
    return await limiter.acquire({ signal: ac.signal })
  } catch (err) {
    if (err instanceof SluiceError && (err.code === 'ERR_OVER_LIMIT' || err.code === 'ERR_ABORTED')) return null
    throw err
  } finally {
    cancel()
  }
}

/** Runs `fn` holding `held`: extended while it runs, released in every outcome. */
async function holding(limiter, held, fn) {
  // at most the longest timer (setInterval overflows above 2^31 - 1 ms and would fire every ms)
  const every = Math.min(MAX_TIMEOUT_MS, Math.max(250, Math.floor(limiter._lockTimeoutMs / 2)))
  const timer = setInterval(() => held.extend().catch(() => {}), every)
  timer.unref()
  try {
    return await fn()
  } finally {
    clearInterval(timer)
    await held.release().catch(() => {})
  }
}

/**
 * A job's reschedule state lives in its own BullMQ hash, in this field (JSON), so it survives
 * with the job and is deleted with it; `data` and `opts` are never touched. `c`: moves counted
 * toward `reschedule` so far; `r`: the run (`attemptsStarted`) the rest is for, so a retry,
 * a stalled restart or a later run never reuses it; `at`: the slot's time (ms); `h`: the slot
 * is already charged (a pacer's or a Leaky/Points reservation: the run must not charge again);
 * `b`: the run already waited once for its limiter to reopen.
 */
const MARK = 'sluice:reschedule'
/** Writes the field only while the job exists (an obliterated job leaves nothing behind). */
const SET_MARK =
  "if redis.call('EXISTS', KEYS[1]) == 1 then return redis.call('HSET', KEYS[1], ARGV[1], ARGV[2]) end return -1"

/** The Redis client of the worker running `job` (BullMQ 6: its backend's). */
function clientOf(job) {
  const q = job.queue
  const backend = q && typeof q.getBackend === 'function' ? q.getBackend() : q
  if (!backend || !backend.client || typeof q.toKey !== 'function') {
    throw new SluiceError('ERR_INVALID_CONFIG', 'sluice/bullmq needs a Redis-backed BullMQ Worker (bullmq 6)')
  }
  return backend.client
}

const count = (v) => (Number.isSafeInteger(v) && v >= 0 ? v : 0)

/** The job's reschedule state, or null for a job never rescheduled by sluice (no read for a first run). */
async function readMark(job) {
  if (!((job.attemptsStarted || 0) > 1)) return null
  const client = await clientOf(job)
  const raw = await client.hget(job.queue.toKey(job.id), MARK)
  if (typeof raw !== 'string') return null
  let m
  try {
    m = JSON.parse(raw)
  } catch {
    return null
  }
  if (m === null || typeof m !== 'object') return null
  return { c: count(m.c), r: count(m.r), at: Number.isFinite(m.at) ? m.at : 0, h: m.h === 1, b: m.b === 1 }
}

/**
 * Moves `job` back to delayed (no attempt spent) until `at`, or `leadMs` before it to wait
 * for its slot itself, its state written first for the run that comes back; counts the
 * reschedule in `chosen`'s statistics.
 */
async function moveUntil(job, token, chosen, at, leadMs, mark) {
  const client = await clientOf(job)
  const slot = Math.ceil(at)
  const state = { c: mark.c, r: (job.attemptsStarted || 0) + 1, at: slot, h: mark.h ? 1 : 0, b: mark.b ? 1 : 0 }
  await client.eval(SET_MARK, 1, job.queue.toKey(job.id), MARK, JSON.stringify(state))
  await job.moveToDelayed(slot - leadMs, token)
  countRescheduled(chosen)
}

/**
 * Wraps a BullMQ processor: `limiter(job)` names the limiter of a job (a Bucket, Window,
 * Leaky, Points or SlidingWindow limiter, a DistributedPacer or PacerComposite, a
 * ConcurrentLimiter), or null for none. Admitted: the job runs (a concurrent lease is held
 * for the whole run, extended while it runs, released in every outcome).
 *
 * Not admitted within `maxWaitMs` (default 0), the job goes back to delayed without spending
 * an attempt, for a slot of its own (unless `backoff` is given or `reschedule` is 0): a
 * pacer's `pace()` or a Leaky/Points reservation (charged now, run at its time, never charged
 * twice), or for a Bucket, Window or SlidingWindow limiter a slot from its reschedule queue
 * (the limiter's rate, from when it reopens). A move that only waits for a slot the job
 * already holds is not counted; a refusal by the limiter is, and past `reschedule` of them
 * (default 20; 0: the first refusal fails) the job fails with OverLimitError and BullMQ's
 * attempts take over. With `backoff(job, overrated, err)`, a refused job runs again that many
 * ms later instead (each such move counted); a ConcurrentLimiter's default is Sidekiq's.
 */
function limitProcessor(processor, options) {
  if (typeof processor !== 'function') throw invalidConfig('processor must be a function')
  if (options === null || typeof options !== 'object' || Array.isArray(options)) {
    throw invalidConfig('options must be an object { limiter, reschedule?, backoff?, maxWaitMs? }')
  }
  for (const name of Object.keys(options)) {
    if (!OPTIONS.includes(name)) throw invalidConfig(`unknown limitProcessor option ${JSON.stringify(name)}`)
  }
  const { limiter, reschedule = DEFAULT_RESCHEDULE, backoff, maxWaitMs = 0, prefetch = true } = options
  if (typeof prefetch !== 'boolean') throw invalidConfig('prefetch must be a boolean')
  if (typeof limiter !== 'function') throw invalidConfig('limiter must be a function (job) => limiter | null')
  if (!Number.isInteger(reschedule) || reschedule < 0 || reschedule > MAX_RESCHEDULE) {
    throw invalidConfig(`reschedule must be an integer in [0, ${MAX_RESCHEDULE}]`)
  }
  if (backoff !== undefined && typeof backoff !== 'function') {
    throw invalidConfig('backoff must be a function (job, overrated, err) => ms')
  }
  if (!Number.isInteger(maxWaitMs) || maxWaitMs < 0 || maxWaitMs > MAX_MS) {
    throw invalidConfig(`maxWaitMs must be an integer in [0, ${MAX_MS}]`)
  }
  const { DelayedError } = loadBullmq()
  // refused jobs get a slot of their own, unless the user chose the delay or no reschedules
  const reserving = reschedule > 0 && backoff === undefined
  // Bucket and Window limiters of 100 or more per window take admissions ahead (see Prefetch)
  const prefetches = new WeakMap()
  const prefetchOf = (l) => {
    if (!prefetch || !(l instanceof BucketLimiter || l instanceof WindowLimiter) || l.limit < 100) return null
    let p = prefetches.get(l)
    if (p === undefined) prefetches.set(l, (p = new Prefetch(l)))
    return p
  }

  /** Back to delayed until `at` to wait for a slot the job holds: not counted. */
  async function waitForSlot(job, token, chosen, at, mark) {
    await moveUntil(job, token, chosen, at, leadOf(chosen), mark)
    const ms = Math.max(0, Math.ceil(at - Date.now()))
    throw new DelayedError(`job ${job.id} waits ${ms} ms for its slot of ${nameOf(chosen)}`)
  }

  /** Refused by the limiter: back to delayed (counted), or OverLimitError past `reschedule`. */
  async function overLimit(job, token, chosen, retryAfterMs, counted) {
    const name = nameOf(chosen)
    const overrated = counted + 1
    const err = new OverLimitError(`job ${job.id} is over the limit of ${name}`, { limiter: name, retryAfterMs })
    if (overrated > reschedule) {
      err.message = `job ${job.id} is over the limit of ${name} after ${reschedule} reschedules`
      throw err
    }
    let delayMs
    if (backoff) delayMs = await backoff(job, overrated, err)
    else if (chosen instanceof ConcurrentLimiter) delayMs = sidekiqBackoff(overrated)
    else if (isPacer(chosen)) delayMs = retryAfterMs
    else delayMs = await slotAfter(chosen, retryAfterMs)
    if (typeof delayMs !== 'number' || !Number.isFinite(delayMs) || delayMs < 0) {
      throw invalidConfig(`backoff must return ms >= 0, got ${String(delayMs)}`)
    }
    // a slot from the reschedule queue is waited for as any slot; a backoff is not a slot
    const leadMs = backoff || chosen instanceof ConcurrentLimiter ? 0 : Math.min(leadOf(chosen), delayMs)
    await moveUntil(job, token, chosen, Date.now() + delayMs, leadMs, { c: overrated, h: false, b: false })
    throw new DelayedError(err.message)
  }

  /**
   * Runs the job once its slot, `delayMs` away and already charged, has come: waits for it
   * here when it is within `maxWaitMs` or the lead, else in delayed.
   */
  async function atSlot(job, token, chosen, delayMs, counted) {
    if (delayMs > Math.max(maxWaitMs, leadOf(chosen))) {
      return waitForSlot(job, token, chosen, Date.now() + delayMs, { c: counted, h: true })
    }
    if (delayMs > 0) await sleep(delayMs)
    return processor(job, token)
  }

  return async function limitedProcessor(job, token) {
    const chosen = await limiter(job)
    if (chosen === null || chosen === undefined) return processor(job, token)
    const concurrent = chosen instanceof ConcurrentLimiter
    if (!concurrent && !isRateLimiter(chosen) && !isPacer(chosen)) {
      throw invalidConfig('limiter(job) must return a sluice limiter, a pacer, a composite, or null')
    }
    const mark = await readMark(job)
    const counted = mark === null ? 0 : mark.c
    // the state written for this very run (a slot it holds), if any
    const held = mark !== null && mark.r === job.attemptsStarted ? mark : null
    if (concurrent) {
      const got = await lease(chosen, maxWaitMs)
      if (got === null) return overLimit(job, token, chosen, 0, counted)
      return holding(chosen, got, () => processor(job, token))
    }
    // a slot charged for this run: it runs at its time, and is never charged twice
    if (held !== null && held.h) return atSlot(job, token, chosen, Math.max(0, held.at - Date.now()), counted)
    if (reserving && (isPacer(chosen) || reservesSlots(chosen))) {
      const delayMs = await reserve(chosen)
      if (delayMs >= 0) return atSlot(job, token, chosen, delayMs, counted)
      return overLimit(job, token, chosen, -delayMs, counted)
    }
    let bounced = false
    if (held !== null) {
      // a slot of the reschedule queue: the job was delivered up to the lead early
      const early = held.at - Date.now()
      if (early > Math.max(maxWaitMs, leadOf(chosen))) return waitForSlot(job, token, chosen, held.at, held)
      if (early > 0) await sleep(early)
      bounced = held.b
    }
    for (;;) {
      const retryAfterMs = await admit(chosen, maxWaitMs, prefetchOf(chosen))
      if (retryAfterMs === 0) return processor(job, token)
      // a job at its slot whose limiter reopens sooner than the next slot (its window began
      // a little late): it waits for that, once, without losing its turn
      if (!reserving || held === null || bounced || retryAfterMs > spacingMs(chosen)) {
        return overLimit(job, token, chosen, retryAfterMs, counted)
      }
      bounced = true
      if (retryAfterMs > leadOf(chosen)) {
        return waitForSlot(job, token, chosen, Date.now() + retryAfterMs, { c: counted, h: false, b: true })
      }
      await sleep(retryAfterMs)
    }
  }
}

function plainObject(value) {
  return value !== null && typeof value === 'object' && !Array.isArray(value)
}

const own = (o, k) => (Object.prototype.hasOwnProperty.call(o, k) ? o[k] : undefined)

/**
 * Enqueues through a FairTenant: `add(tenant, name, data, opts)` registers the job under its
 * id (one is made when `opts.jobId` is not given, so a retried `add` of the same job stays
 * one registration) and adds it to the queue the tenant's rules route it to. `queues` maps
 * every rule's queue name, and `defaultQueue`, to a BullMQ Queue.
 */
class FairQueues {
  constructor(fair, options) {
    if (!(fair instanceof FairTenant)) throw invalidConfig('fair must be a FairTenant')
    if (!plainObject(options)) throw invalidConfig('options must be an object { queues, defaultQueue }')
    for (const key of Object.keys(options)) {
      if (key !== 'queues' && key !== 'defaultQueue') {
        throw invalidConfig(`unknown FairQueues option ${JSON.stringify(key)}`)
      }
    }
    const queues = own(options, 'queues')
    const defaultQueue = own(options, 'defaultQueue')
    if (!plainObject(queues)) throw invalidConfig('queues must be an object { [queue name]: Queue }')
    if (typeof defaultQueue !== 'string' || defaultQueue.length === 0) {
      throw invalidConfig('defaultQueue must be a non-empty string')
    }
    this._queues = new Map()
    for (const name of Object.keys(queues)) {
      const q = queues[name]
      if (q === null || typeof q !== 'object' || typeof q.add !== 'function' || typeof q.addBulk !== 'function') {
        throw invalidConfig(`queues[${JSON.stringify(name)}] must be a BullMQ Queue`)
      }
      this._queues.set(name, q)
    }
    for (const name of [defaultQueue, ...fair.rules.map((r) => r.queue)]) {
      if (!this._queues.has(name)) throw invalidConfig(`queues has no queue ${JSON.stringify(name)}`)
    }
    this._fair = fair
    this._defaultQueue = defaultQueue
  }

  /** The queue `queueName` stands for. */
  queue(queueName) {
    return this._queues.get(queueName)
  }

  _jobOptions(opts) {
    if (opts === undefined) return {}
    if (!plainObject(opts)) throw invalidArgument('opts must be an object (BullMQ JobsOptions)')
    return opts
  }

  /** Routes the job of `tenant` and adds it there; resolves with the BullMQ Job. */
  async add(tenant, name, data, opts) {
    const jobOpts = this._jobOptions(opts)
    const jobId = own(jobOpts, 'jobId') === undefined ? randomUUID() : own(jobOpts, 'jobId')
    const queue = await this._fair.assign(tenant, jobId, this._defaultQueue)
    return this._queues.get(queue).add(name, data, { ...jobOpts, jobId: String(jobId) })
  }

  /**
   * Routes several jobs (`{ tenant, name, data, opts }`) and adds them with one `addBulk`
   * per queue; resolves with the Jobs in the order given.
   */
  async addBulk(jobs) {
    if (!Array.isArray(jobs)) throw invalidArgument('jobs must be an array of { tenant, name, data, opts }')
    const prepared = jobs.map((j) => {
      if (!plainObject(j)) throw invalidArgument('each job must be an object { tenant, name, data, opts }')
      const jobOpts = this._jobOptions(own(j, 'opts'))
      const jobId = own(jobOpts, 'jobId') === undefined ? randomUUID() : own(jobOpts, 'jobId')
      return {
        tenant: own(j, 'tenant'),
        name: own(j, 'name'),
        data: own(j, 'data'),
        opts: { ...jobOpts, jobId: String(jobId) },
      }
    })
    const queues = await Promise.all(prepared.map((j) => this._fair.assign(j.tenant, j.opts.jobId, this._defaultQueue)))
    const byQueue = new Map()
    prepared.forEach((j, i) => {
      if (!byQueue.has(queues[i])) byQueue.set(queues[i], [])
      byQueue.get(queues[i]).push(i)
    })
    const out = new Array(prepared.length)
    await Promise.all(
      [...byQueue].map(async ([queue, indexes]) => {
        const added = await this._queues
          .get(queue)
          .addBulk(indexes.map((i) => ({ name: prepared[i].name, data: prepared[i].data, opts: prepared[i].opts })))
        indexes.forEach((i, k) => (out[i] = added[k]))
      }),
    )
    return out
  }
}

const WEIGHTED_OPTIONS = ['queues', 'concurrency', 'processor', 'connection', 'prefix', 'idlePollMs', 'workerOptions']
const DEFAULT_IDLE_POLL_MS = 50

/**
 * Several BullMQ queues served from one concurrency budget, by weight (Sidekiq's weighted
 * queues): whenever a slot frees up, the next job is taken from the queues that have work,
 * each chosen in proportion to its weight (smooth weighted round robin), so a queue of
 * weight 4 starts four jobs for each one of a queue of weight 1 while both have work. It is
 * work-conserving: a queue alone with work gets the whole budget. A job is fetched only
 * when a slot is free for it (never taken from Redis to wait in this process), and run by
 * the queue's own BullMQ Worker (locks renewed, stalled jobs checked, retries, events).
 *
 * A queue found empty is asked again after `idlePollMs` (default 50 ms): a job added to a
 * queue that was idle starts within that time, and an idle pool makes one Redis call per
 * queue per `idlePollMs`.
 */
class WeightedWorkers extends EventEmitter {
  constructor(options) {
    super()
    if (!plainObject(options))
      throw invalidConfig('options must be an object { queues, concurrency, processor, connection }')
    for (const key of Object.keys(options)) {
      if (!WEIGHTED_OPTIONS.includes(key)) throw invalidConfig(`unknown weightedWorkers option ${JSON.stringify(key)}`)
    }
    const queues = own(options, 'queues')
    const concurrency = own(options, 'concurrency')
    const processor = own(options, 'processor')
    const connection = own(options, 'connection')
    const prefix = own(options, 'prefix')
    const idlePollMs = own(options, 'idlePollMs') === undefined ? DEFAULT_IDLE_POLL_MS : own(options, 'idlePollMs')
    const workerOptions = own(options, 'workerOptions') === undefined ? {} : own(options, 'workerOptions')
    if (!Array.isArray(queues) || queues.length === 0) {
      throw invalidConfig('queues must be a non-empty array of { name, weight }')
    }
    const names = new Set()
    this._queues = queues.map((q, i) => {
      if (!plainObject(q)) throw invalidConfig(`queues[${i}] must be an object { name, weight }`)
      const name = own(q, 'name')
      const weight = own(q, 'weight')
      if (typeof name !== 'string' || name.length === 0)
        throw invalidConfig(`queues[${i}].name must be a non-empty string`)
      if (names.has(name)) throw invalidConfig(`queue ${JSON.stringify(name)} is listed twice`)
      names.add(name)
      if (!Number.isInteger(weight) || weight < 1 || weight > 1_000_000) {
        throw invalidConfig(`queues[${i}].weight must be an integer in [1, 1000000]`)
      }
      return { name, weight, worker: null, current: 0, emptyUntil: 0 }
    })
    if (!Number.isInteger(concurrency) || concurrency < 1 || concurrency > 100_000) {
      throw invalidConfig('concurrency must be an integer in [1, 100000]')
    }
    if (typeof processor !== 'function') throw invalidConfig('processor must be a function (job, token) => result')
    if (connection === null || typeof connection !== 'object') {
      throw invalidConfig('connection must be BullMQ connection options or an ioredis client')
    }
    if (prefix !== undefined && (typeof prefix !== 'string' || prefix.length === 0)) {
      throw invalidConfig('prefix must be a non-empty string')
    }
    if (!Number.isInteger(idlePollMs) || idlePollMs < 1 || idlePollMs > 60_000) {
      throw invalidConfig('idlePollMs must be an integer in [1, 60000]')
    }
    if (!plainObject(workerOptions)) throw invalidConfig('workerOptions must be an object (BullMQ WorkerOptions)')
    for (const key of ['autorun', 'concurrency', 'connection', 'prefix']) {
      if (own(workerOptions, key) !== undefined) throw invalidConfig(`workerOptions.${key} is set by weightedWorkers`)
    }
    const { Worker } = loadBullmq()
    for (const q of this._queues) {
      const opts = { ...workerOptions, connection, autorun: false, concurrency: 1 }
      if (prefix !== undefined) opts.prefix = prefix
      q.worker = new Worker(q.name, processor, opts)
      for (const event of ['active', 'completed', 'failed', 'error', 'stalled', 'progress']) {
        q.worker.on(event, (...args) => this.emit(event, ...args))
      }
    }
    this.concurrency = concurrency
    this._idlePollMs = idlePollMs
    this._running = 0
    this._fetching = false
    this._closing = null
    this._timer = null
    this._tokens = 0
    this._idle = new Set() // resolvers waiting for the running jobs to finish
    this._started = this._start()
    // seen by waitUntilReady(); an 'error' listener hears it too
    this._started.catch((err) => {
      if (this.listenerCount('error') > 0) this.emit('error', err)
    })
  }

  async _start() {
    await Promise.all(
      this._queues.map(async (q) => {
        await q.worker.waitUntilReady()
        await q.worker.startStalledCheckTimer()
        // lock renewal for the jobs this worker processes (BullMQ starts it in run())
        q.worker.lockManager.start()
      }),
    )
    this._pump()
  }

  /** Resolves once every queue's worker is connected. */
  waitUntilReady() {
    return this._started
  }

  /** Jobs running now. */
  get running() {
    return this._running
  }

  /** The BullMQ Worker of each queue, by name. */
  get workers() {
    return Object.fromEntries(this._queues.map((q) => [q.name, q.worker]))
  }

  /** The next queue by smooth weighted round robin among those not known to be empty. */
  _pick(now) {
    let total = 0
    let best = null
    for (const q of this._queues) {
      if (q.emptyUntil > now) continue
      q.current += q.weight
      total += q.weight
      if (best === null || q.current > best.current) best = q
    }
    if (best !== null) best.current -= total
    return best
  }

  /** Fills free slots, one fetch at a time; schedules a poll when every queue is empty. */
  async _pump() {
    if (this._fetching || this._closing !== null) return
    this._fetching = true
    try {
      while (this._running < this.concurrency && this._closing === null) {
        const now = Date.now()
        const q = this._pick(now)
        if (q === null) break
        const token = `${q.worker.id}:w${this._tokens++}`
        let job
        try {
          job = await q.worker.getNextJob(token, { block: false })
        } catch (err) {
          this.emit('error', err)
          q.emptyUntil = Date.now() + this._idlePollMs
          continue
        }
        if (!job) {
          q.emptyUntil = Date.now() + this._idlePollMs
          continue
        }
        this._run(q, job, token)
      }
    } finally {
      this._fetching = false
    }
    if (this._closing === null && this._running < this.concurrency && this._timer === null) {
      const now = Date.now()
      const next = Math.min(...this._queues.map((q) => q.emptyUntil))
      this._timer = setTimeout(
        () => {
          this._timer = null
          this._pump()
        },
        Math.max(1, next - now),
      )
    }
  }

  _run(q, job, token) {
    this._running++
    q.worker
      .processJob(job, token, () => false)
      .catch((err) => this.emit('error', err))
      .finally(() => {
        this._running--
        if (this._running === 0) for (const done of this._idle) done()
        if (this._timer !== null) {
          clearTimeout(this._timer)
          this._timer = null
        }
        this._pump()
      })
  }

  /** Stops taking jobs, waits for the running ones (unless `force`), and closes the workers. */
  close(force = false) {
    if (this._closing === null) {
      this._closing = (async () => {
        if (this._timer !== null) clearTimeout(this._timer)
        this._timer = null
        await this._started.catch(() => undefined)
        if (!force && this._running > 0) await new Promise((resolve) => this._idle.add(resolve))
        await Promise.all(this._queues.map((q) => q.worker.close(force)))
      })()
    }
    return this._closing
  }
}

/** Serves several queues from one concurrency budget, by weight (see WeightedWorkers). */
function weightedWorkers(options) {
  return new WeightedWorkers(options)
}

module.exports = { limitProcessor, sidekiqBackoff, FairQueues, WeightedWorkers, weightedWorkers }
