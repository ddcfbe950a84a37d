'use strict'
// The package entry sluice/ws (CJS): the door, lib/doors/ws/.
module.exports = require('../doors/ws')
