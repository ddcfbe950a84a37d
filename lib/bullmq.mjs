import door from './bullmq.js'

export const { limitProcessor, sidekiqBackoff, FairQueues, WeightedWorkers, weightedWorkers } = door
