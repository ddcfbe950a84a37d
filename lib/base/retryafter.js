'use strict'

// Reads a Retry-After value (RFC 9110 §10.2.3: delta-seconds or an HTTP-date) as whole ms to
// wait: what `block({ retryAfter })` takes from an upstream 429.

const { invalidArgument, describeValue } = require('./errors')

const DAYS = ['sun', 'mon', 'tue', 'wed', 'thu', 'fri', 'sat']
const LONG_DAYS = ['sunday', 'monday', 'tuesday', 'wednesday', 'thursday', 'friday', 'saturday']
const MONTHS = ['jan', 'feb', 'mar', 'apr', 'may', 'jun', 'jul', 'aug', 'sep', 'oct', 'nov', 'dec']
const TIME = '(\\d{2}):(\\d{2}):(\\d{2})'
// RFC 9110 §5.6.7: IMF-fixdate, and the obsolete rfc850-date and asctime-date forms (names
// matched without case, as many senders get it wrong; a day name that does not match the
// date is ignored, as the RFC allows)
const IMF_FIXDATE = new RegExp(`^([a-z]{3}), (\\d{1,2}) ([a-z]{3}) (\\d{4}) ${TIME} gmt$`, 'i')
const RFC850_DATE = new RegExp(`^([a-z]{6,9}), (\\d{2})-([a-z]{3})-(\\d{2}) ${TIME} gmt$`, 'i')
const ASCTIME_DATE = new RegExp(`^([a-z]{3}) ([a-z]{3}) ([ \\d]\\d) ${TIME} (\\d{4})$`, 'i')
// delta-seconds (1*DIGIT), and decimal fractions of a second (rounded up to whole ms)
const DELTA_SECONDS = /^(\d*)(?:\.(\d*))?$/

const bad = (value) =>
  invalidArgument(
    `retryAfter must be a Retry-After value (delta-seconds, or an HTTP-date such as ` +
      `"Sun, 06 Nov 1994 08:49:37 GMT"), got ${describeValue(value)}`,
  )

/** Whole ms of a decimal number of seconds `whole.frac` (digits only), rounded up. */
function decimalSecondsMs(whole, frac) {
  // beyond 15 digits the value is more than 30 million years: far past any accepted block
  if (whole.length > 15) return Infinity
  const padded = frac.padEnd(3, '0')
  const roundUp = /[1-9]/.test(padded.slice(3)) ? 1 : 0
  return Number(whole || '0') * 1000 + Number(padded.slice(0, 3)) + roundUp
}

/** ms since the epoch of an HTTP-date, or NaN when `text` is none (or not a real date). */
function httpDateMs(text, nowMs) {
  let day, month, year, hour, minute, second, dayName
  let m = IMF_FIXDATE.exec(text)
  if (m) {
    ;[, dayName, day, month, year, hour, minute, second] = m
    if (!DAYS.includes(dayName.toLowerCase())) return NaN
  } else if ((m = RFC850_DATE.exec(text))) {
    ;[, dayName, day, month, year, hour, minute, second] = m
    if (!LONG_DAYS.includes(dayName.toLowerCase())) return NaN
    // RFC 9110: a two-digit year more than 50 years in the future is the most recent past
    // year with the same last two digits
    const thisYear = new Date(nowMs).getUTCFullYear()
    year = Math.floor(thisYear / 100) * 100 + Number(year)
    if (year > thisYear + 50) year -= 100
  } else if ((m = ASCTIME_DATE.exec(text))) {
    ;[, dayName, month, day, hour, minute, second, year] = m
    if (!DAYS.includes(dayName.toLowerCase())) return NaN
  } else {
    return NaN
  }
  const mon = MONTHS.indexOf(month.toLowerCase())
  const [y, d, h, mi, s] = [Number(year), Number(day), Number(hour), Number(minute), Number(second)]
  if (mon < 0 || d < 1 || h > 23 || mi > 59 || s > 60) return NaN
  const date = new Date(0)
  date.setUTCFullYear(y, mon, d) // not Date.UTC: it reads years 0-99 as 1900-1999
  if (date.getUTCDate() !== d) return NaN // 30 Feb and the like
  return date.getTime() + ((h * 60 + mi) * 60 + s) * 1000
}

/**
 * How long a `Retry-After` value asks to wait, in whole ms from `nowMs` (ms since the epoch,
 * the store's clock): delta-seconds (fractions rounded up to the ms) as a string or a
 * number, or an HTTP-date (IMF-fixdate, rfc850-date, asctime-date). 0 (and a date not in
 * the future) is 0. Anything else: ERR_INVALID_ARGUMENT.
 */
function retryAfterMs(value, nowMs) {
  if (typeof value === 'number') {
    if (!Number.isFinite(value) || value < 0) throw bad(value)
    // the shortest decimal that reads back as `value` (what the sender meant by 1.1 is 1100 ms)
    const text = String(value)
    if (text.includes('e')) return value < 1 ? (value > 0 ? 1 : 0) : Infinity
    const m = DELTA_SECONDS.exec(text)
    return decimalSecondsMs(m[1], m[2] || '')
  }
  if (typeof value !== 'string') throw bad(value)
  const text = value.trim()
  const delta = DELTA_SECONDS.exec(text)
  if (delta) {
    if (delta[1] === '' && !delta[2]) throw bad(value)
    return decimalSecondsMs(delta[1], delta[2] || '')
  }
  const at = httpDateMs(text, nowMs)
  if (Number.isNaN(at)) throw bad(value)
  return Math.max(0, Math.ceil(at - nowMs))
}

module.exports = { retryAfterMs }
