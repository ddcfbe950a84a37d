// The types of `require('sluice/fastify')` (a CommonJS module: `module.exports` is the plugin):
// declared beside the door, in lib/doors/fastify/types.d.ts. lib/entries/fastify.d.mts types
// `import ... from 'sluice/fastify'`.
import sluiceRateLimit = require('../doors/fastify/types.js')
export = sluiceRateLimit
