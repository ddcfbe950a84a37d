import type { Job, Processor } from 'bullmq'
import type {
  BucketLimiter,
  ConcurrentLimiter,
  DistributedPacer,
  LeakyLimiter,
  OverLimitError,
  PacerComposite,
  PointsLimiter,
  SlidingWindowLimiter,
  WindowLimiter,
} from './index.js'

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
  /** Moves to delayed before the job fails with OverLimitError (default 20; 0: never). */
  reschedule?: number
  /** ms until the job runs again; default Sidekiq's `300 * overrated + rand(300) + 1` s, or a pacer's own delay. */
  backoff?: (job: Job<T>, overrated: number, err: OverLimitError) => number | Promise<number>
  /** Wait this long for capacity before rescheduling (default 0: never hold a worker slot waiting). */
  maxWaitMs?: number
  /**
   * Bucket and Window limiters of 100 or more per window: take admissions ahead, 1 % of the
   * limit per call (at most 1024), used only within their window (default true).
   */
  prefetch?: boolean
}

/**
 * Wraps a BullMQ processor: admitted jobs run (a concurrent lease held and extended for the
 * whole run); over the limit, the job goes back to delayed without spending an attempt, at
 * most `reschedule` times, then fails with OverLimitError.
 */
export declare function limitProcessor<T = any, R = any, N extends string = string>(
  processor: Processor<T, R, N>,
  options: LimitProcessorOptions<T>,
): Processor<T, R, N>

/** Sidekiq Enterprise's limiter backoff in ms, `overrated` counting from 1. */
export declare function sidekiqBackoff(overrated: number): number
