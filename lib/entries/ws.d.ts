// The types of `require('sluice/ws')` and `import ... from 'sluice/ws'`: declared beside the
// door, in lib/doors/ws/types.d.ts.
export * from '../doors/ws/types.js'
