// The types of `import ... from 'sluice/fastify'` (lib/entries/fastify.mjs): the plugin is the
// default export. lib/entries/fastify.d.ts types `require('sluice/fastify')`. `plugin` is that
// module whole (the function, with its names on it) in every module mode: `import = require`,
// not a default import, which under `moduleResolution: bundler` would be the module's `default`
// (the plugin's type alone, without ipKeyGenerator and normalizeIP: TS2339, issue 38).
import plugin = require('./fastify.js')

export type { DoorLimiter, RateLimitInfo, RouteOptions, Options, ErrorResponseContext, CheckResult } from './fastify.js'

/** Fastify 5 plugin: register it before the routes it limits. */
declare const sluiceRateLimit: typeof plugin
export default sluiceRateLimit
export { sluiceRateLimit, sluiceRateLimit as fastifyRateLimit }
/** The default key: the IP, an IPv6 address masked to its /subnet network, IPv4-mapped as IPv4. */
export declare const ipKeyGenerator: typeof plugin.ipKeyGenerator
/** @fastify/rate-limit's default key: IPv6 masked to /64 (no length), IPv4-mapped as IPv4. */
export declare const normalizeIP: typeof plugin.normalizeIP
