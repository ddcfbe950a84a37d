// The addon's types for lib/ (what lib/native.js loads: the generated ../index.js), so that the
// contracts (lib/store/store.d.ts) and the kinds name its types through the native layer.
export * from '../index'
