// The ES module entry of sluice: the CommonJS module's exports, named, and the module as the
// default export (one set of classes). Node finds the names in index.js with its CommonJS lexer,
// so they are listed once, there (__tests__/package.test.ts holds both forms equal).
export * from './index.js'
export { default } from './index.js'
