import type { IncomingMessage, ServerResponse } from 'node:http'
import type { Store } from './index.js'

export interface DashboardOptions {
  /** The store whose limiters the page shows (a RedisStore shows every process's numbers). */
  store: Store
  /** Allow `POST <mount>/api/limiters/<kind>/<name>/reset` (with the page's CSRF token); default false. */
  allowReset?: boolean
  /** The page's title; default 'sluice'. */
  title?: string
  /**
   * The mount path when the framework does not strip it (node:http, a Fastify route), e.g.
   * '/sluice'. Express's `app.use('/sluice', handler)` needs none.
   */
  basePath?: string
  /** The group of a limiter name, shown as one row with its keys; default: the text before the first `_` or `:`. */
  groupOf?: (name: string, kind: string) => string
  /** The page's auto-refresh period, ms (0: off); default 5000. */
  refreshMs?: number
}

/**
 * A request handler serving the dashboard page, its assets and its JSON API (`<mount>/api/`).
 * A request it does not serve goes to `next()` when given, else gets a 404.
 */
export declare function dashboard(
  options: DashboardOptions,
): (req: IncomingMessage, res: ServerResponse, next?: (err?: unknown) => void) => void

/** The default `groupOf`: the text of a name before its first `_` or `:`. */
export declare function defaultGroup(name: string): string
