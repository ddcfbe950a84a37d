// The ES module entry of sluice/bullmq: the CommonJS module's exports, named (one set of classes;
// Node finds the names in lib/doors/bullmq/index.js with its CommonJS lexer).
export * from './bullmq.js'
