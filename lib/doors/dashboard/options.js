'use strict'

// The options of dashboard(): checked once at setup, and the default grouping of names.

const { invalidConfig, knownOptions } = require('../../base/errors')
const { checkAllowedHosts } = require('./hosts')

/** The default group of a limiter name: what comes before its first `_` or `:` (per-user names). */
function defaultGroup(name) {
  const m = /^(.+?)[_:]./s.exec(name)
  return m === null ? name : m[1]
}

function checkOptions(o) {
  if (o === null || typeof o !== 'object') throw invalidConfig('dashboard() needs options: { store }')
  const known = ['store', 'allowReset', 'allowWrite', 'title', 'basePath', 'groupOf', 'refreshMs', 'allowedHosts']
  knownOptions(o, known, 'dashboard')
  const store = o.store
  if (store === null || typeof store !== 'object' || typeof store.limiters !== 'function') {
    throw invalidConfig('dashboard: store must be a MemoryStore or RedisStore')
  }
  if (o.allowReset !== undefined && typeof o.allowReset !== 'boolean') {
    throw invalidConfig('dashboard: allowReset must be a boolean')
  }
  if (o.allowWrite !== undefined && typeof o.allowWrite !== 'boolean') {
    throw invalidConfig('dashboard: allowWrite must be a boolean')
  }
  if (o.title !== undefined && (typeof o.title !== 'string' || o.title.length > 200)) {
    throw invalidConfig('dashboard: title must be a string of at most 200 characters')
  }
  if (o.basePath !== undefined && (typeof o.basePath !== 'string' || !/^(\/[^/?#]+)+$/.test(o.basePath))) {
    throw invalidConfig('dashboard: basePath must look like "/sluice" (no trailing slash)')
  }
  if (o.groupOf !== undefined && typeof o.groupOf !== 'function') {
    throw invalidConfig('dashboard: groupOf must be a function (name, kind) => string')
  }
  if (
    o.refreshMs !== undefined &&
    (!Number.isInteger(o.refreshMs) || o.refreshMs < 0 || (o.refreshMs > 0 && o.refreshMs < 500))
  ) {
    throw invalidConfig('dashboard: refreshMs must be 0 (off) or whole ms >= 500')
  }
  if (o.allowedHosts !== undefined) checkAllowedHosts(o.allowedHosts, 'dashboard: allowedHosts')
}

module.exports = { defaultGroup, checkOptions }
