// The types of sluice/nestjs (lib/doors/nestjs/index.js and throttler-storage.js): the module,
// the decorators, the guard, the refusal and the storage for @nestjs/throttler.
// lib/entries/nestjs.d.ts re-exports them for `require` and `import`.
// NestJS 12 is an ES module: its types are imported as one (under node16, from CommonJS too)
import type { CanActivate, DynamicModule, ExecutionContext, HttpException } from '@nestjs/common' with {
  'resolution-mode': 'import',
}
import type { Store } from '../../entries/types/store.js'
import type { DoorOptions, RateLimitInfo } from '../http/types.js'

export type { DoorLimiter, RateLimitInfo } from '../http/types.js'

/** A route's options: the HTTP doors' (lib/doors/http/types.d.ts), the store left to the module. */
export interface RateLimitOptions<Req = any, Res = any> extends Omit<DoorOptions<Req, Res>, 'store' | 'handler'> {
  /**
   * The body of a refusal (the exception's response), instead of `message`; an HttpException it
   * returns is thrown as it is.
   */
  handler?: (req: Req, res: Res) => unknown | Promise<unknown>
}

export interface SluiceModuleOptions {
  /**
   * The store: one the app made (left to its owner to close), or a function that makes one
   * (the module closes it when the app closes).
   */
  store: Store | (() => Store | Promise<Store>)
  /**
   * Every route's options under SluiceGuard, below each @RateLimit's; without them, only the
   * routes with a @RateLimit are limited.
   */
  defaults?: RateLimitOptions
}

export interface SluiceModuleAsyncOptions {
  imports?: any[]
  useFactory: (...deps: any[]) => SluiceModuleOptions | Promise<SluiceModuleOptions>
  inject?: any[]
}

/** The module: once, in the app's root module (it is global). */
export declare class SluiceModule {
  static forRoot(options: SluiceModuleOptions): DynamicModule
  static forRootAsync(options: SluiceModuleAsyncOptions): DynamicModule
}

/**
 * A route's limits (a handler's replace its controller's), over the module's defaults. Several:
 * all must admit (several windows of one key: one script call; several keys: one batch, what
 * one admitted given back when another refuses).
 */
export declare function RateLimit(options: RateLimitOptions | RateLimitOptions[]): ClassDecorator & MethodDecorator
/** A route (handler or controller) not limited; `false` on a handler undoes its controller's. */
export declare function SkipRateLimit(skip?: boolean): ClassDecorator & MethodDecorator

/** The app's store, defaults and the doors of its routes (provided by SluiceModule). */
export declare class SluiceRateLimits {
  readonly store: Store
  readonly defaults: RateLimitOptions | null
  /** Whether the module made the store (and closes it). */
  readonly owned: boolean
  onApplicationShutdown(): Promise<void>
}

/**
 * The guard: `{ provide: APP_GUARD, useClass: SluiceGuard }` or `@UseGuards(SluiceGuard)`.
 * Override getRequest / getResponse for GraphQL and WebSocket contexts.
 */
export declare class SluiceGuard implements CanActivate {
  constructor(limits: SluiceRateLimits)
  protected readonly limits: SluiceRateLimits
  getRequest(context: ExecutionContext): any
  getResponse(context: ExecutionContext): any
  canActivate(context: ExecutionContext): Promise<boolean>
}

/** A refusal: status 429 (or `statusCode`; `downStatusCode` when refused for want of Redis), the headers already set. */
export declare class SluiceRateLimitException extends HttpException {
  constructor(body: unknown, status: number, retryAfterMs?: number)
  /** What a GraphQL server shows of the refusal in the error's extensions. */
  readonly extensions: { code: 'RATE_LIMITED'; status: number; retryAfterSeconds?: number }
}

/** What @nestjs/throttler's ThrottlerStorage answers (its ThrottlerStorageRecord). */
export interface ThrottlerStorageRecord {
  totalHits: number
  /** Seconds until the window ends. */
  timeToExpire: number
  isBlocked: boolean
  /** Seconds until the block ends (0 when not blocked). */
  timeToBlockExpire: number
}

/** @nestjs/throttler's `storage`: atomic, one store call per increment, in every process. */
export declare class SluiceThrottlerStorage {
  constructor(store: Store, options?: { prefix?: string })
  readonly store: Store
  readonly prefix: string
  increment(
    key: string,
    ttl: number,
    limit: number,
    blockDuration: number,
    throttlerName: string,
  ): Promise<ThrottlerStorageRecord>
}

/** The injection token of the module's options. */
export declare const SLUICE_OPTIONS: unique symbol
