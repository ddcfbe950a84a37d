'use strict'

// The key of an HTTP door's request and the store name of its counter: the default key (the
// client IP, IPv6 masked to its subnet), long keys known by their SHA-256, and counter names
// `<identifier>_<key>` escaped so that they read one way only.

const { createHash } = require('node:crypto')
const net = require('node:net')
const { invalidArgument, describeValue } = require('../../base/errors')

/** A key's UTF-8 bytes at most: a longer key fails its request with ERR_INVALID_ARGUMENT. */
const MAX_KEY_BYTES = 1024 * 1024
/** Keys of more UTF-8 bytes are known by their SHA-256, in the cache and in the store. */
const MAX_RAW_KEY_BYTES = 64
// a limiter name is at most 256 characters: room for the `_<window>` suffix of several windows
const MAX_NAME = 250

/** What escapeBytes writes for each byte value: the byte's character, or `-xx`. */
const BYTE_TEXT = Array.from({ length: 256 }, (_, byte) => {
  const c = String.fromCharCode(byte)
  return /[A-Za-z0-9]/.test(c) ? c : `-${byte.toString(16).padStart(2, '0')}`
})

/** `-xx` per UTF-8 byte of `text` but `[A-Za-z0-9]` (well-formed text only). */
function escapeBytes(text) {
  if (/^[A-Za-z0-9]*$/.test(text)) return text
  let out = ''
  for (const byte of Buffer.from(text, 'utf8')) out += BYTE_TEXT[byte]
  return out
}

/**
 * A store name for `key`: `[A-Za-z0-9]` kept, every other byte `-xx`, so that the counter
 * name `<identifier>_<key>` can never be read two ways; a key too long for a name is hashed.
 * A lone surrogate (which UTF-8 cannot hold: it would become U+FFFD and share a counter with
 * every other one) is `-uxxxx`, its code unit: distinct keys stay distinct.
 */
function escapeName(text) {
  const s = String(text)
  if (s.isWellFormed()) return escapeBytes(s)
  let out = ''
  let run = ''
  for (let i = 0; i < s.length; i++) {
    const unit = s.charCodeAt(i)
    const high = unit >= 0xd800 && unit <= 0xdbff
    const low = unit >= 0xdc00 && unit <= 0xdfff
    if (high && i + 1 < s.length && s.charCodeAt(i + 1) >= 0xdc00 && s.charCodeAt(i + 1) <= 0xdfff) {
      run += s[i] + s[i + 1]
      i++
    } else if (high || low) {
      out += `${escapeBytes(run)}-u${unit.toString(16)}`
      run = ''
    } else {
      run += s[i]
    }
  }
  return out + escapeBytes(run)
}

/**
 * `-h` and the hex SHA-256 of `text`: of its UTF-8 bytes, or, when it holds a lone surrogate
 * (which UTF-8 cannot hold), of 0xff and its UTF-16 code units (0xff is never UTF-8: the two
 * inputs never meet). `-h` is no escape of escapeName's: a hashed part never equals an escaped one.
 */
function hashName(text) {
  const hash = createHash('sha256')
  if (text.isWellFormed()) hash.update(text)
  else hash.update(Buffer.from([0xff])).update(Buffer.from(text, 'utf16le'))
  return `-h${hash.digest('hex')}`
}

/**
 * What `key` is known by in a door's cache and in the store: the key itself up to 64 UTF-8
 * bytes, else its hashName (66 characters, more than any key kept as is has: the two forms
 * never meet). A key of more than 1 MiB is ERR_INVALID_ARGUMENT (it fails its request).
 * Costs one pass over the key (a hash), never an escape of a long key.
 */
function keyId(key) {
  const units = key.length
  // a UTF-16 code unit is 1-3 UTF-8 bytes: most keys are decided by their length alone
  if (units <= MAX_RAW_KEY_BYTES / 3) return key
  const bytes = units <= MAX_RAW_KEY_BYTES || units > MAX_KEY_BYTES / 3 ? Buffer.byteLength(key) : units
  if (units > MAX_KEY_BYTES || bytes > MAX_KEY_BYTES) {
    throw invalidArgument(`a key is at most ${MAX_KEY_BYTES} bytes (UTF-8), got one of ${bytes} bytes`)
  }
  return bytes <= MAX_RAW_KEY_BYTES ? key : hashName(key)
}

/**
 * The store name of the counter of `identifier` and a key known by `id` (keyId's): the
 * identifier's escapeName, `_`, and the id's escapeName (a hashed id as it is). Neither part
 * can hold `_`, so the name is read one way only; a name that would be too long hashes its
 * key, then its identifier (each part stays readable while it fits). Several windows add
 * `_<window>` (a second `_`: never the name of one window).
 */
/** The last identifier escaped, and its escape: a door names all its counters with one (a one-entry cache). */
let lastIdentifier = ''
let lastEscaped = ''

function nameOf(identifier, id) {
  const hashed = id.length > MAX_RAW_KEY_BYTES // a key kept as is has at most 64 code units
  if (identifier !== lastIdentifier) {
    lastEscaped = escapeName(identifier)
    lastIdentifier = identifier
  }
  let idPart = lastEscaped
  let keyPart = hashed ? id : escapeName(id)
  if (idPart.length + 1 + keyPart.length <= MAX_NAME) return `${idPart}_${keyPart}`
  if (!hashed) keyPart = hashName(id)
  if (idPart.length + 1 + keyPart.length > MAX_NAME) idPart = hashName(identifier)
  return `${idPart}_${keyPart}`
}

/** The store name of the counter of `identifier` and `key`. */
function counterName(identifier, key) {
  return nameOf(identifier, keyId(String(key)))
}

/** The 8 16-bit groups of an IPv6 address (which may end in an IPv4 address). */
function ipv6Groups(ip) {
  let text = ip.split('%')[0]
  let tail = []
  const lastColon = text.lastIndexOf(':')
  const last = text.slice(lastColon + 1)
  if (last.includes('.')) {
    // the IPv4 part stands for the last two groups
    const v4 = last.split('.').map(Number)
    tail = [(v4[0] << 8) | v4[1], (v4[2] << 8) | v4[3]]
    text = text.slice(0, lastColon + 1)
    if (!text.endsWith('::')) text = text.slice(0, -1)
  }
  const parse = (s) => (s === '' ? [] : s.split(':').map((g) => parseInt(g, 16)))
  if (!text.includes('::')) return [...parse(text), ...tail]
  const [head, rest] = text.split('::')
  const left = parse(head)
  const right = parse(rest)
  return [...left, ...Array(8 - tail.length - left.length - right.length).fill(0), ...right, ...tail]
}

/** RFC 5952 text of 8 groups: the longest run of 2+ zero groups becomes `::`. */
function ipv6Text(groups) {
  let best = -1
  let bestLength = 1
  for (let i = 0; i < 8;) {
    if (groups[i] !== 0) {
      i++
      continue
    }
    let j = i
    while (j < 8 && groups[j] === 0) j++
    if (j - i > bestLength) {
      best = i
      bestLength = j - i
    }
    i = j
  }
  const hex = groups.map((g) => g.toString(16))
  if (best < 0) return hex.join(':')
  return `${hex.slice(0, best).join(':')}::${hex.slice(best + bestLength).join(':')}`
}

/**
 * The IPv4 address an IPv6 address stands for, or null, as the peers read it: IPv4-mapped
 * (`::ffff:0:0/96`, by its bits, whichever notation) and, with `compatible` (express-rate-limit),
 * IPv4-compatible written as such (`::1.2.3.4`: the notation tells it from `::1`, which shares its
 * range). Any other address that ends in a dotted quad (`2001:db8::1.2.3.4`, NAT64's
 * `64:ff9b::1.2.3.4`) is an IPv6 address, keyed by its network: its last bits are the client's own.
 */
function embeddedIPv4(ip, groups, compatible) {
  const [a, b, c, d, e, f] = groups
  const zero = a === 0 && b === 0 && c === 0 && d === 0 && e === 0
  const v4 = (zero && f === 0xffff) || (compatible && zero && f === 0 && ip.includes('.'))
  if (!v4) return null
  return `${groups[6] >> 8}.${groups[6] & 255}.${groups[7] >> 8}.${groups[7] & 255}`
}

/** `groups` with all but the first `subnet` bits zero. */
function masked(groups, subnet) {
  return groups.map((g, i) => {
    const bits = Math.max(0, Math.min(16, subnet - 16 * i))
    return bits === 16 ? g : bits === 0 ? 0 : g & ((0xffff << (16 - bits)) & 0xffff)
  })
}

/**
 * express-rate-limit's `ipKeyGenerator(ip, ipv6Subnet = 56)`: an IPv4 address as it is; an
 * IPv6 one as its /`subnet` network in CIDR form (`2001:db8:1234:5600::/56`: one customer
 * usually holds a whole /56 or /64), or unchanged with `subnet` false; an IPv4-mapped or
 * IPv4-compatible address (embeddedIPv4) as that IPv4 address.
 */
function ipKey(ip, subnet = 56) {
  if (typeof ip !== 'string' || ip.length === 0) {
    throw invalidArgument('the request has no client IP: give a keyGenerator (or set trust proxy)')
  }
  if (!net.isIPv6(ip)) return ip
  const groups = ipv6Groups(ip)
  const v4 = embeddedIPv4(ip, groups, true)
  if (v4 !== null) return v4
  if (subnet === false) return ip
  return `${ipv6Text(masked(groups, subnet))}/${subnet}`
}

/**
 * @fastify/rate-limit's `normalizeIP(ip, ipv6Subnet = 64)`: an IPv4 address in lower case;
 * an IPv6 one as the first address of its /`subnet` network, without the length
 * (`2001:db8:1234:56ff::`), or whole at 128 (RFC 5952 text); an IPv4-mapped address as that IPv4
 * address (embeddedIPv4; the peer keys `::1.2.3.4` as an IPv6 address).
 */
function normalizeIP(ip, subnet = 64) {
  if (typeof ip !== 'string' || ip.length === 0) {
    throw invalidArgument('the request has no client IP: give a keyGenerator (or set trustProxy)')
  }
  if (!net.isIPv6(ip)) return ip.toLowerCase()
  const groups = ipv6Groups(ip)
  const v4 = embeddedIPv4(ip, groups, false)
  if (v4 !== null) return v4
  return ipv6Text(subnet < 128 ? masked(groups, subnet) : groups)
}

/** A key generator's answer as the key (a string), or ERR_INVALID_ARGUMENT. */
function checkedKey(raw) {
  if ((typeof raw !== 'string' && typeof raw !== 'number') || raw === '') {
    throw invalidArgument(`keyGenerator must return a non-empty string, got ${describeValue(raw)}`)
  }
  return String(raw)
}

module.exports = { keyId, nameOf, counterName, escapeName, ipKey, normalizeIP, checkedKey }
