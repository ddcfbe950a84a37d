'use strict'

// The one encoding of a list of strings sent to the native side in a single string (one
// crossing, not one per part): each part as `<length>:<part>`, concatenated; `<length>` is the
// part's `.length` (UTF-16 code units) in decimal. src/codec.rs reads it. No byte of a part is
// ever read as structure, so a name may hold newlines, colons, braces or any control byte.
// Every list of keys, ids, names or arguments that crosses to Rust goes through here: never
// join values with a separator a name could contain.

/** `parts` (strings) as one encoded string. */
function encodeParts(parts) {
  let out = ''
  for (let i = 0; i < parts.length; i++) {
    const p = parts[i]
    out += p.length + ':' + p
  }
  return out
}

/** Appends `part` to an encoded string `out` (for lists built one part at a time). */
function appendPart(out, part) {
  return out + part.length + ':' + part
}

/** The parts of an encoded string (the inverse of encodeParts; throws on anything else). */
function decodeParts(text) {
  const out = []
  let at = 0
  while (at < text.length) {
    const colon = text.indexOf(':', at)
    const digits = text.slice(at, colon)
    if (colon < 0 || !/^(0|[1-9][0-9]{0,8})$/.test(digits)) throw new TypeError('malformed encoded list')
    const end = colon + 1 + Number(digits)
    if (end > text.length) throw new TypeError('malformed encoded list')
    out.push(text.slice(colon + 1, end))
    at = end
  }
  return out
}

module.exports = { encodeParts, appendPart, decodeParts }
