// Types of sluice/dashboard (lib/doors/dashboard/index.js and lib/entries/dashboard.mjs): the request handler and its options.
import type { IncomingMessage, ServerResponse } from 'node:http'
import type { Store } from '../../entries/types/index.js'

export interface DashboardOptions {
  /** The store whose limiters the page shows (a RedisStore shows every process's numbers). */
  store: Store
  /** Allow `POST <mount>/api/reset?kind=<kind>&name=<name>` (with the page's CSRF token); default false. */
  allowReset?: boolean
  /**
   * Allow setting and deleting the store's rules (store.rules: a limit, shadow mode, allow or
   * deny) from a limiter's page: `POST <mount>/api/rules?op=set&target=<JSON>&rule=<JSON>`
   * (`&ttlMs=N`) or `?op=delete&target=<JSON>`, with the page's CSRF token; default false.
   */
  allowWrite?: boolean
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
  /**
   * The `Host` names the dashboard answers to (DNS rebinding: a page on another site that
   * rebinds its own name to your server's address is same-origin with the dashboard, and could
   * read every limiter, the CSRF token, and reset). A request for any other Host gets 403
   * `ERR_HOST_NOT_ALLOWED` before anything else is read, page and assets included.
   *
   * Always allowed: IP literals (`127.0.0.1`, `[::1]`, `10.0.0.5`: a browser sends one only
   * when the page was opened by address, which no other site can claim), `localhost` and
   * `*.localhost`. Add each name the dashboard is reached by, e.g. `['admin.example.com']`;
   * `'.example.com'` allows `example.com` and all its subdomains. Names are compared case-
   * insensitively, without port or trailing dot.
   *
   * Default `[]`: loopback names and IP literals only, so that a dashboard mounted in an app
   * served under a real domain answers 403 (naming this option) until that name is listed.
   * `'all'` turns the check off (and emits a `SluiceWarning`, code `SLUICE_DASHBOARD_ALL_HOSTS`):
   * only when a proxy in front checks Host itself.
   */
  allowedHosts?: readonly string[] | 'all'
}

/**
 * A request handler serving the dashboard page, its assets and its JSON API (`<mount>/api/`:
 * `limiters`, `group?kind=&group=`, `limiter?kind=&name=`, `POST reset?kind=&name=`; each
 * value its own query parameter). A request under the mount whose Host is not allowed gets
 * 403 (see `allowedHosts`); a request it does not serve goes to `next()` when given, else gets
 * a 404.
 */
export declare function dashboard(
  options: DashboardOptions,
): (req: IncomingMessage, res: ServerResponse, next?: (err?: unknown) => void) => void

/** The default `groupOf`: the text of a name before its first `_` or `:`. */
export declare function defaultGroup(name: string): string
