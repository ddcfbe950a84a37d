// The ES module entry of sluice/express: the CommonJS module's exports, named (Node finds them
// in lib/doors/express/index.js with its CommonJS lexer), and rateLimit as the default export
// (one copy of the door).
import door from './express.js'

export * from './express.js'
export default door.rateLimit
