'use strict'
// The package entry sluice/hono (CJS): the door, lib/doors/hono/.
module.exports = require('../doors/hono')
