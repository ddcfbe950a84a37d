// The types of `require('sluice/bullmq')` and `import ... from 'sluice/bullmq'`: declared beside the
// door, in lib/doors/bullmq/types.d.ts.
export * from '../doors/bullmq/types.js'
