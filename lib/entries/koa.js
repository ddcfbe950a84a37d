'use strict'
// The package entry sluice/koa (CJS): the door, lib/doors/koa/.
module.exports = require('../doors/koa')
