import plugin from './fastify.js'

export const { sluiceRateLimit, ipKeyGenerator } = plugin
export default plugin
