// Public types of sluice, one file per family under ./types. The native layer's generated types are in ../index.d.ts.

export * from './types/errors'
export * from './types/clock'
export * from './types/store'
export * from './types/pacer'
export * from './types/limiters'
export * from './types/quota-fair'
export * from './types/budget'
