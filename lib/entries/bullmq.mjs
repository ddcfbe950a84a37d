// The ES module entry of sluice/bullmq: the CommonJS module's exports, named (one set of classes).
import door from './bullmq.js'

export const { limitProcessor, sidekiqBackoff, FairQueues, WeightedWorkers, weightedWorkers } = door
