import door from './metrics.js'

export const { collectMetrics, WAIT_BUCKETS } = door
