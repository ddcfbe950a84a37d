// The types of `require('sluice/metrics')` and `import ... from 'sluice/metrics'`: declared beside the
// door, in lib/doors/metrics/types.d.ts.
export * from '../doors/metrics/types.js'
