// @ts-check
'use strict'
// The stores, as the rest of the library takes them: the embedded MemoryStore and the
// RedisStore (lib/store/ holds their parts).

const { MemoryStore } = require('./memory')
const { RedisStore } = require('./redis')

module.exports = { MemoryStore, RedisStore }
