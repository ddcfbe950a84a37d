// The ES module entry of sluice/express: the CommonJS module's exports, named, and rateLimit as
// the default export (one copy of the door).
import door from './express.js'

export const { rateLimit, ipKeyGenerator, MemoryStore, SECOND, MINUTE, HOUR, DAY } = door
export default door.rateLimit
