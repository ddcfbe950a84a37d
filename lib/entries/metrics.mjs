// The ES module entry of sluice/metrics: the CommonJS module's exports, named (one set of classes;
// Node finds the names in lib/doors/metrics/index.js with its CommonJS lexer).
export * from './metrics.js'
