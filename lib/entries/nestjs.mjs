// The ES module entry of sluice/nestjs: the CommonJS module's exports, named (Node finds the names
// in lib/doors/nestjs/index.js with its CommonJS lexer).
export * from './nestjs.js'
