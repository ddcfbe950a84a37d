'use strict'

// weightedWorkers: several BullMQ queues served from one concurrency budget, by weight (smooth
// weighted round robin), each job run by its queue's own BullMQ Worker.

const { invalidConfig, knownOptions } = require('../../base/errors')
const { EventEmitter } = require('node:events')
const { loadBullmq, plainObject, own } = require('./support')

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
    knownOptions(options, WEIGHTED_OPTIONS, 'weightedWorkers')
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

module.exports = { WeightedWorkers, weightedWorkers }
