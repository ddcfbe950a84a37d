// The ES module entry of sluice/hono: the CommonJS module's exports, named (Node finds the names
// in lib/doors/hono/index.js with its CommonJS lexer).
export * from './hono.js'
