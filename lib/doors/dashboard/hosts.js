'use strict'

// The dashboard's Host check (against DNS rebinding): parsing a Host header, and deciding
// whether it names a host the dashboard answers for (`allowedHosts`).

const net = require('node:net')
const { invalidConfig } = require('../../base/errors')

/** A Host name as compared: lower case, without one trailing dot. */
const hostKey = (h) => h.toLowerCase().replace(/\.$/, '')

/**
 * The host name of a `Host` header value (`name[:port]`, `[v6][:port]`, an IPv4 literal):
 * `{ name, ip }`, or null when it is none of these.
 */
function parseHost(value) {
  if (typeof value !== 'string' || value.length === 0 || value.length > 300) return null
  let name
  let rest
  if (value[0] === '[') {
    const close = value.indexOf(']')
    if (close < 0) return null
    name = value.slice(1, close)
    rest = value.slice(close + 1)
    if (!net.isIPv6(name)) return null
  } else {
    const colon = value.indexOf(':')
    name = colon < 0 ? value : value.slice(0, colon)
    rest = colon < 0 ? '' : value.slice(colon)
  }
  if (rest !== '' && !/^:\d{1,5}$/.test(rest)) return null
  if (net.isIP(name)) return { name: name.toLowerCase(), ip: true }
  if (!/^[a-z0-9_-]+(\.[a-z0-9_-]+)*\.?$/i.test(name)) return null
  return { name: hostKey(name), ip: false }
}

/** Host names allowed by default: `localhost` and `*.localhost` (they resolve to loopback only). */
const isLocalName = (name) => name === 'localhost' || name.endsWith('.localhost')

/** The `allowedHosts` check: `(hostHeader) => boolean`. */
function hostCheck(allowedHosts) {
  if (allowedHosts === 'all') return () => true
  const exact = new Set()
  const suffixes = []
  for (const h of allowedHosts) {
    if (h.startsWith('.')) {
      exact.add(hostKey(h.slice(1)))
      suffixes.push(hostKey(h))
    } else exact.add(hostKey(h))
  }
  return (value) => {
    const host = parseHost(value)
    if (host === null) return false
    if (host.ip || isLocalName(host.name) || exact.has(host.name)) return true
    return suffixes.some((s) => host.name.endsWith(s))
  }
}

/** Checks an `allowedHosts` value; returns it as given. */
function checkAllowedHosts(v, what) {
  if (v === 'all') return v
  const bad = () =>
    invalidConfig(
      `${what} must be 'all' or an array of host names ("admin.example.com", ".example.com" for it and its subdomains), without port`,
    )
  if (!Array.isArray(v)) throw bad()
  for (const h of v) {
    if (typeof h !== 'string' || !/^\.?[a-z0-9_-]+(\.[a-z0-9_-]+)*\.?$/i.test(h)) throw bad()
  }
  return v
}

module.exports = { parseHost, hostCheck, checkAllowedHosts }
