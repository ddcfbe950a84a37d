'use strict'
// The package entry sluice/nestjs (CJS): the door, lib/doors/nestjs/.
module.exports = require('../doors/nestjs')
