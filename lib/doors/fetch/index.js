'use strict'

// sluice/fetch: outgoing calls to third-party APIs paced fleet-wide (a pacer per key, shared by
// every process on the store), backing off together on Retry-After and learning the upstream's
// limits from its answers. `pacedFetch` wraps a fetch; `interceptor` plugs into undici 7's
// `Dispatcher.compose`. The parts live in lib/doors/fetch/.

const { pacedFetch } = require('./paced')
const { interceptor } = require('./interceptor')

module.exports = { pacedFetch, interceptor }
