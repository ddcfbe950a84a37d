// The types of `require('sluice/koa')` and `import ... from 'sluice/koa'`: declared beside the
// door, in lib/doors/koa/types.d.ts.
export * from '../doors/koa/types.js'
