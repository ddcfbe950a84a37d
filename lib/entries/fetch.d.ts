// The types of sluice/fetch (`require` and `import`: lib/entries/fetch.js, fetch.mjs): declared
// beside the door, in lib/doors/fetch/types.d.ts.
export * from '../doors/fetch/types.js'
