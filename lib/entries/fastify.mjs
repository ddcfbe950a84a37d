// The ES module entry of sluice/fastify: the CommonJS plugin as the default export, with its
// named exports (Node finds them in lib/doors/fastify/index.js with its CommonJS lexer; one
// copy of the plugin).
export * from './fastify.js'
export { default } from './fastify.js'
