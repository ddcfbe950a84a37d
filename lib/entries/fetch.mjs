// The ES module entry of sluice/fetch: the CommonJS module's exports, named (one set of classes).
import door from './fetch.js'

export const { pacedFetch, interceptor } = door
