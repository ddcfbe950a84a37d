'use strict'
// The package entry sluice/dashboard (CJS): the door, lib/doors/dashboard/.
module.exports = require('../doors/dashboard')
