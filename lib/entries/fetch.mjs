// The ES module entry of sluice/fetch: the CommonJS module's exports, named (one set of classes;
// Node finds the names in lib/doors/fetch/index.js with its CommonJS lexer).
export * from './fetch.js'
