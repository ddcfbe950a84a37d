// The ES module entry of sluice/fastify: the CommonJS plugin as the default export, with its
// named exports (one copy of the plugin).
import plugin from './fastify.js'

export const { sluiceRateLimit, fastifyRateLimit, ipKeyGenerator, normalizeIP } = plugin
export default plugin
