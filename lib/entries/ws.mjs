// The ES module entry of sluice/ws: the CommonJS module's exports, named (Node finds the names
// in lib/doors/ws/index.js with its CommonJS lexer).
export * from './ws.js'
