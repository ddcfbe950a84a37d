'use strict'
// What the multi-process tests' worker processes share: their store from the test's config
// (a Redis URL or cluster nodes, a key prefix), waiting until the common start, and running
// main() so that a failure exits non-zero (the test then fails on the exit code).
const { RedisStore } = require('../../lib/entries/index.js')

const sleep = (ms) => new Promise((r) => setTimeout(r, ms))

/** A RedisStore on the test's server: `cfg.cluster` nodes or `cfg.url`, under `cfg.prefix`. */
function storeOf(cfg, options = {}) {
  const where = cfg.cluster ? { cluster: cfg.cluster } : { url: cfg.url }
  return RedisStore.connect({ ...where, keyPrefix: cfg.prefix, ...options })
}

/** Runs `main(cfg)` with the JSON config of argv[2]; sends its result over IPC, then exits. */
function runWorker(main) {
  main(JSON.parse(process.argv[2]))
    .then((result) => process.send(result, () => process.exit(0)))
    .catch((err) => {
      console.error(err)
      process.exit(1)
    })
}

module.exports = { sleep, storeOf, runWorker }
