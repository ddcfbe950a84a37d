'use strict'
// The package entry sluice/metrics (CJS): the door, lib/doors/metrics/.
module.exports = require('../doors/metrics')
