// The types of `import ... from 'sluice/fastify'` (lib/fastify.mjs): the plugin is the
// default export. lib/fastify.d.ts types `require('sluice/fastify')`.
import type plugin from './fastify.js'

export type { DoorLimiter, RateLimitInfo, RouteOptions, Options } from './fastify.js'

/** Fastify 5 plugin: register it before the routes it limits. */
declare const sluiceRateLimit: typeof plugin
export default sluiceRateLimit
export { sluiceRateLimit }
/** The default key: the IP, an IPv6 address masked to its /subnet network, IPv4-mapped as IPv4. */
export declare const ipKeyGenerator: typeof plugin.ipKeyGenerator
