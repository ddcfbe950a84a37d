'use strict'
// The package entry sluice/bullmq (CJS): the door, lib/doors/bullmq/.
module.exports = require('../doors/bullmq')
