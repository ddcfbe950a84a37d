'use strict'

// sluice/bullmq: BullMQ processors limited by any sluice limiter, with Sidekiq Enterprise's
// "reschedule an over-limit job with backoff" behaviour. BullMQ is the app's own dependency:
// it is loaded when a processor is made, not when sluice is.
//
// The public entry only; each feature lives in lib/doors/bullmq/: processor.js (limitProcessor),
// admit.js, prefetch.js, slots.js, concurrent.js, mark.js, roles.js (what it knows of each
// kind), fair-queues.js (FairQueues), weighted.js (weightedWorkers).

const { limitProcessor } = require('./processor')
const { sidekiqBackoff } = require('./concurrent')
const { FairQueues } = require('./fair-queues')
const { WeightedWorkers, weightedWorkers } = require('./weighted')

module.exports = { limitProcessor, sidekiqBackoff, FairQueues, WeightedWorkers, weightedWorkers }
