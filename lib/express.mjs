import door from './express.js'

export const { rateLimit, ipKeyGenerator } = door
export default door.rateLimit
