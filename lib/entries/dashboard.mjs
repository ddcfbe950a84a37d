// The ES module entry of sluice/dashboard: the CommonJS module's exports, named (one set of classes).
import door from './dashboard.js'

export const { dashboard, defaultGroup } = door
