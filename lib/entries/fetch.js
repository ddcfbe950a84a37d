'use strict'
// The package entry sluice/fetch (CJS): the door, lib/doors/fetch/.
module.exports = require('../doors/fetch')
