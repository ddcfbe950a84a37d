// Public types of sluice, one file per family under ./types (./types/index.d.ts lists them). The
// native layer's generated types are in ../index.d.ts.

export * from './types/index'
