// The types of `require('sluice/nestjs')` and `import ... from 'sluice/nestjs'`: declared beside
// the door, in lib/doors/nestjs/types.d.ts.
export * from '../doors/nestjs/types.js'
