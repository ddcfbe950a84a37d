// Public types of sluice, one file per family. lib/entries/index.d.ts (the package's types) and
// the doors' declarations (lib/doors/<door>/types.d.ts) read them from here.

export * from './errors'
export * from './clock'
export * from './store'
export * from './rules'
export * from './pacer'
export * from './limiters'
export * from './quota-fair'
export * from './budget'
