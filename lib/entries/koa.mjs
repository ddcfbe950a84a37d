// The ES module entry of sluice/koa: the CommonJS module's exports, named (Node finds the names
// in lib/doors/koa/index.js with its CommonJS lexer).
export * from './koa.js'
