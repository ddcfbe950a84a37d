// The ES module entry of sluice/dashboard: the CommonJS module's exports, named (one set of classes;
// Node finds the names in lib/doors/dashboard/index.js with its CommonJS lexer).
export * from './dashboard.js'
