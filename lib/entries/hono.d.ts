// The types of `require('sluice/hono')` and `import ... from 'sluice/hono'`: declared beside the
// door, in lib/doors/hono/types.d.ts.
export * from '../doors/hono/types.js'
