// The ES module entry of sluice/metrics: the CommonJS module's exports, named (one set of classes).
import door from './metrics.js'

export const { collectMetrics, WAIT_BUCKETS } = door
