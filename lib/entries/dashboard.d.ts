// The types of `require('sluice/dashboard')` and `import ... from 'sluice/dashboard'`: declared beside the
// door, in lib/doors/dashboard/types.d.ts.
export * from '../doors/dashboard/types.js'
