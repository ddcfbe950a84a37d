'use strict'

// Small helpers every part of sluice/bullmq shares: loading the app's own bullmq package,
// waiting any number of ms, and reading options without inherited properties.

const { SluiceError } = require('../../base/errors')
const { longTimeout } = require('../../base/timers')

/** BullMQ is the app's own dependency: loaded when a processor or pool is made, not with sluice. */
function loadBullmq() {
  try {
    return require('bullmq')
  } catch (err) {
    throw new SluiceError('ERR_INVALID_CONFIG', 'sluice/bullmq needs the bullmq package: npm install bullmq', {
      cause: err,
    })
  }
}

/** Waits `ms`, however long (setTimeout overflows above 2^31 - 1 ms: lib/base/timers.js chains). */
function sleep(ms) {
  return new Promise((resolve) => longTimeout(resolve, ms))
}

function plainObject(value) {
  return value !== null && typeof value === 'object' && !Array.isArray(value)
}

const own = (o, k) => (Object.prototype.hasOwnProperty.call(o, k) ? o[k] : undefined)

module.exports = { loadBullmq, sleep, plainObject, own }
