// @ts-check
'use strict'
// Evicting servers, found at connect: each master's maxmemory-policy (read from INFO memory,
// which managed services and least-privilege ACL users allow where CONFIG GET is refused).
// Under a policy that may evict sluice's keys, the store emits a 'warning' (ERR_CONFIG_RISK),
// or refuses to start with `evictingServer: 'refuse'`; a policy it cannot read is said once,
// never a failure.
const { SluiceError, invalidConfig, gotValue } = require('../base/errors')

const MODES = ['warn', 'refuse']

/** `evictingServer`: 'warn' (default) or 'refuse'. */
function evictingServerOption(value) {
  if (value === undefined) return 'warn'
  if (!MODES.includes(value))
    throw invalidConfig(`evictingServer must be 'warn' or 'refuse', ${gotValue(value, MODES)}`)
  return value
}

const EFFECTS =
  'Redis may evict sluice keys: a limit forgets what it counted (a bucket starts full, a window empty), ' +
  'and a ConcurrentLimiter may hand out a second lease with a fencing token still held'

/**
 * The warnings for `policies` (`[server, policy, why unreadable]` per master), and whether a
 * server evicts. Every policy but `noeviction` evicts sluice keys (`volatile-*` too: each of
 * them has a TTL).
 */
function judge(policies) {
  const warnings = []
  let evicting = false
  const unreadable = policies.filter(([, policy]) => policy === '')
  for (const [server, policy] of policies) {
    if (policy === '' || policy === 'noeviction') continue
    evicting = true
    warnings.push(
      new SluiceError(
        'ERR_CONFIG_RISK',
        `the Redis server ${server} has maxmemory-policy ${policy}. ${EFFECTS}. ` +
          "Use maxmemory-policy noeviction (or evictingServer: 'refuse' to refuse to start)",
      ),
    )
  }
  if (unreadable.length > 0) {
    const [server, , why] = unreadable[0]
    warnings.push(
      new SluiceError(
        'ERR_CONFIG_RISK',
        `could not read the maxmemory-policy of ${unreadable.map(([s]) => s).join(', ')} (${why || server}): ` +
          'sluice cannot tell whether the server evicts keys (said once; the store works as usual)',
      ),
    )
  }
  return { warnings, evicting }
}

/**
 * Checks the servers of a connected store; resolves with the warnings to emit, or rejects with
 * ERR_INVALID_CONFIG when a server evicts and `mode` is 'refuse'.
 */
async function checkEviction(nativeStore, mode) {
  let policies
  try {
    policies = await nativeStore.evictionPolicies()
  } catch (err) {
    policies = [['the server', '', String((err && err.message) || err)]]
  }
  const { warnings, evicting } = judge(policies)
  if (evicting && mode === 'refuse') {
    throw invalidConfig(`${warnings[0].message.split('. ')[0]}; evictingServer: 'refuse' keeps the store from starting`)
  }
  return warnings
}

module.exports = { checkEviction, evictingServerOption, judge }
