'use strict'
// The package entry sluice/express (CJS): the door, lib/doors/express/.
module.exports = require('../doors/express')
