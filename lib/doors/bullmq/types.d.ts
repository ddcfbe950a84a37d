// Types of sluice/bullmq (lib/doors/bullmq/index.js and lib/entries/bullmq.mjs): limitProcessor, FairQueues, weightedWorkers.
import type { EventEmitter } from 'node:events'
import type { ConnectionOptions, Job, JobsOptions, Processor, Queue, Worker, WorkerOptions } from 'bullmq'
import type {
  BucketLimiter,
  ConcurrentLimiter,
  DistributedPacer,
  FairTenant,
  LeakyLimiter,
  OverLimitError,
  PacerComposite,
  PointsLimiter,
  SlidingWindowLimiter,
  WindowLimiter,
} from '../../entries/types/index.js'

/** What `limiter(job)` may return (null: the job is not limited). */
export type JobLimiter =
  | BucketLimiter
  | WindowLimiter
  | LeakyLimiter
  | PointsLimiter
  | SlidingWindowLimiter
  | DistributedPacer
  | PacerComposite
  | ConcurrentLimiter
  | null
  | undefined

export interface LimitProcessorOptions<T = any> {
  /** The limiter of a job (a per-tenant limiter keyed by job.data, a limiter shared by several queues...), or null. */
  limiter: (job: Job<T>) => JobLimiter | Promise<JobLimiter>
  /**
   * Refusals by the limiter that move the job back to delayed before it fails with
   * OverLimitError (default 20; 0: the first refusal fails it, and no slot is reserved). A
   * move that only waits for a slot the job already holds is not counted.
   */
  reschedule?: number
  /**
   * ms until a refused job runs again, `overrated` counting from 1; each such move counts.
   * Default: a slot of its own (a pacer's `pace()`, a Leaky/Points reservation, or for a
   * Bucket, Window or SlidingWindow limiter a slot of its reschedule queue at the limiter's
   * rate from when it reopens); Sidekiq's `300 * overrated + rand(300) + 1` s for a
   * ConcurrentLimiter (`sidekiqBackoff`).
   */
  backoff?: (job: Job<T>, overrated: number, err: OverLimitError) => number | Promise<number>
  /**
   * Wait this long for capacity before rescheduling (default 0: never hold a worker slot
   * waiting for capacity). A job waiting for a slot it holds is delivered up to 4 slots'
   * spacing (at most 400 ms) early and waits for it in the worker, so it starts on time.
   */
  maxWaitMs?: number
  /**
   * Bucket and Window limiters of 100 or more per window: take admissions ahead, 1 % of the
   * limit per call (at most 1024), used only within their window (default true).
   */
  prefetch?: boolean
}

/**
 * Wraps a BullMQ processor: admitted jobs run (a concurrent lease held and extended for the
 * whole run); over the limit, the job goes back to delayed without spending an attempt, for a
 * slot of its own (or `backoff` ms), and after `reschedule` refusals fails with
 * OverLimitError. Its state lives in a field of its BullMQ hash; `data` and `opts` are kept.
 */
export declare function limitProcessor<T = any, R = any, N extends string = string>(
  processor: Processor<T, R, N>,
  options: LimitProcessorOptions<T>,
): Processor<T, R, N>

/** Sidekiq Enterprise's limiter backoff in ms, `overrated` counting from 1 (a ConcurrentLimiter's default). */
export declare function sidekiqBackoff(overrated: number): number

/**
 * Enqueues through a FairTenant: each job is registered under its id (made when
 * `opts.jobId` is not given) and added to the queue its tenant's rules route it to.
 */
export declare class FairQueues {
  /** `queues`: every rule's queue name, and `defaultQueue`, mapped to a BullMQ Queue. */
  constructor(fair: FairTenant, options: { queues: Record<string, Queue>; defaultQueue: string })
  /** The Queue a queue name stands for. */
  queue(queueName: string): Queue | undefined
  /** Routes the job and adds it; resolves with the BullMQ Job. */
  add<T = any>(tenant: string | number, name: string, data: T, opts?: JobsOptions): Promise<Job<T>>
  /** Routes each job and adds them with one addBulk per queue; Jobs in the order given. */
  addBulk<T = any>(jobs: { tenant: string | number; name: string; data: T; opts?: JobsOptions }[]): Promise<Job<T>[]>
}

export interface WeightedWorkersOptions {
  /** The queues and their weights (integers >= 1): a queue of weight 4 starts 4 jobs per 1 of weight 1 while both have work. */
  queues: { name: string; weight: number }[]
  /** Jobs running at once over all the queues, in this process. */
  concurrency: number
  processor: Processor
  connection: ConnectionOptions
  /** BullMQ key prefix (hash-tagged on a cluster, e.g. '{jobs}'). */
  prefix?: string
  /** How soon a queue found empty is asked again, ms (default 50). */
  idlePollMs?: number
  /** Passed to each queue's BullMQ Worker (lockDuration, stalledInterval, ...), but not autorun, concurrency, connection or prefix. */
  workerOptions?: Omit<WorkerOptions, 'autorun' | 'concurrency' | 'connection' | 'prefix'>
}

/**
 * Several queues served from one concurrency budget by weight (smooth weighted round robin
 * among the queues that have work), work-conserving; a job is fetched only when a slot is
 * free. Emits the workers' 'active', 'completed', 'failed', 'stalled', 'progress' and 'error'.
 */
export declare class WeightedWorkers extends EventEmitter {
  constructor(options: WeightedWorkersOptions)
  concurrency: number
  /** Jobs running now. */
  readonly running: number
  /** Each queue's BullMQ Worker, by queue name. */
  readonly workers: Record<string, Worker>
  /** Resolves once every worker is connected. */
  waitUntilReady(): Promise<void>
  /** Stops taking jobs, waits for the running ones (unless force) and closes the workers. */
  close(force?: boolean): Promise<void>
}

/** Starts a WeightedWorkers (returns at once; bad options throw ERR_INVALID_CONFIG). */
export declare function weightedWorkers(options: WeightedWorkersOptions): WeightedWorkers
