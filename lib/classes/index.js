'use strict'
// The public classes, one family per file, by the names the package exports them under. The
// layers above (the package entries, the doors) take them from here, and so do the kinds:
// a kind's sections (lib/kinds/kind.js) receive this object as `classes` from the site that
// calls them, so that a kind names the classes it builds and never requires them.

const { DistributedPacer, PacerComposite } = require('./pacer')
const { BucketLimiter, WindowLimiter, LeakyLimiter, PointsLimiter, UnlimitedLimiter } = require('./rate')
const { ConcurrentLimiter, Lease } = require('./concurrent')
const { SlidingWindowLimiter } = require('./sliding')
const { QuotaLimiter } = require('./quota')
const { SlidingCounterLimiter } = require('./sliding-counter')
const { FairTenant } = require('./fair')
const { Budget } = require('./budget')

module.exports = {
  DistributedPacer,
  PacerComposite,
  BucketLimiter,
  WindowLimiter,
  LeakyLimiter,
  PointsLimiter,
  UnlimitedLimiter,
  ConcurrentLimiter,
  Lease,
  SlidingWindowLimiter,
  SlidingCounterLimiter,
  QuotaLimiter,
  FairTenant,
  Budget,
}
