'use strict'
// The package entry sluice/fastify (CJS): the door, lib/doors/fastify/.
module.exports = require('../doors/fastify')
