'use strict'

// FairQueues: enqueues BullMQ jobs through a FairTenant, which routes each tenant's job to the
// queue its rules name (a tenant over its threshold goes to a slower queue).

const { invalidConfig, invalidArgument, knownOptions } = require('../../base/errors')
const { FairTenant } = require('../../classes/fair')
const { randomUUID } = require('node:crypto')
const { plainObject, own } = require('./support')

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
    knownOptions(options, ['queues', 'defaultQueue'], 'FairQueues')
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

module.exports = { FairQueues }
