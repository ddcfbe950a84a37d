// The types of `require('sluice/express')`: declared beside the door, in
// lib/doors/express/types.d.ts. lib/entries/express.d.mts types `import ... from 'sluice/express'`.
export * from '../doors/express/types.js'
export { default } from '../doors/express/types.js'
