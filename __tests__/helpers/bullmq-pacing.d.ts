// Types of the pacing scenario (bullmq-pacing.js), for the TypeScript tests.
export interface PacingScenario {
  url: string
  kind: 'pacer' | 'bucket' | 'window' | 'leaky' | 'sliding'
  jobs: number
  limit: number
  intervalMs?: number
  maxBurst?: number
  processes?: number
  concurrency?: number
  jobMs?: number
  options?: Record<string, unknown>
  timeoutMs?: number
}

export interface PacingResult {
  kind: string
  jobs: number
  limit: number
  intervalMs: number
  completed: number
  failed: number
  failedReasons: string[]
  pending: number
  elapsedMs: number
  spanMs: number
  rate: number
  maxCalendar: number
  overCalendar: number
  maxSpan: number
  maxSpanAfterFirst: number
  moved: number
  counted: number
  lateness: number[]
  pids: number
  starts: number[]
}

export declare function runScenario(o: PacingScenario): Promise<PacingResult>
export declare function mostInSpan(sorted: number[], spanMs: number): number
export declare function mostInCalendar(sorted: number[], spanMs: number): number
