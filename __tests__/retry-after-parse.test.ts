// issue 24: the one Retry-After parser behind every block({ retryAfter }) (RFC 9110 §10.2.3:
// delta-seconds or an HTTP-date), with fractions of a second rounded up to the ms.
import { describe, expect, it } from 'vitest'

const { retryAfterMs } = require('../lib/base/retryafter.js') as {
  retryAfterMs: (value: unknown, nowMs: number) => number
}

const NOW = Date.UTC(1994, 10, 6, 8, 49, 0) // Sun, 06 Nov 1994 08:49:00 GMT

describe('issue-24-retry-after-parse: retryAfterMs', () => {
  it('delta-seconds, as a header string or a number; fractions rounded up to the ms', () => {
    const cases: [unknown, number][] = [
      ['0', 0],
      ['120', 120_000],
      ['  7\t', 7000],
      ['007', 7000],
      ['1.5', 1500],
      ['1.', 1000],
      ['.25', 250],
      ['0.0001', 1],
      ['1.0001', 1001],
      ['2.000000', 2000],
      [0, 0],
      [-0, 0],
      [3, 3000],
      [1.1, 1100], // not 1100.0000000000002 rounded up
      [0.3, 300],
      [2.675, 2675],
      [1e-7, 1],
      [315_360_000, 315_360_000_000],
    ]
    for (const [value, ms] of cases) expect(retryAfterMs(value, NOW), JSON.stringify(value)).toBe(ms)
    expect(retryAfterMs('99999999999999999999', NOW)).toBe(Infinity) // the caller refuses it
    expect(retryAfterMs(1e21, NOW)).toBe(Infinity)
  })

  it('HTTP-dates: IMF-fixdate, rfc850-date and asctime-date, from now', () => {
    for (const date of [
      'Sun, 06 Nov 1994 08:49:37 GMT',
      'Sunday, 06-Nov-94 08:49:37 GMT',
      'Sun Nov  6 08:49:37 1994',
      'sun, 06 nov 1994 08:49:37 gmt', // names in the wrong case are still understood
      ' Sun, 06 Nov 1994 08:49:37 GMT ',
    ]) {
      expect(retryAfterMs(date, NOW), date).toBe(37_000)
    }
    // whole ms, rounded up, when now is between two ms
    expect(retryAfterMs('Sun, 06 Nov 1994 08:49:37 GMT', NOW + 0.5)).toBe(37_000)
    expect(retryAfterMs('Sun, 06 Nov 1994 08:49:37 GMT', NOW + 1.5)).toBe(36_999)
    // a leap second
    expect(retryAfterMs('Sun, 06 Nov 1994 08:49:60 GMT', NOW)).toBe(60_000)
    // now or past: 0
    expect(retryAfterMs('Sun, 06 Nov 1994 08:49:00 GMT', NOW)).toBe(0)
    expect(retryAfterMs('Sun, 06 Nov 1994 08:48:59 GMT', NOW)).toBe(0)
    expect(retryAfterMs('Thu, 01 Jan 1970 00:00:00 GMT', NOW)).toBe(0)
    expect(retryAfterMs('Sat, 01 Jan 0050 00:00:00 GMT', NOW)).toBe(0)
    // a day name that does not match the date is ignored (RFC 9110 lets recipients)
    expect(retryAfterMs('Mon, 06 Nov 1994 08:49:37 GMT', NOW)).toBe(37_000)
  })

  it("rfc850's two-digit year: more than 50 years ahead is the last century", () => {
    const now2030 = Date.UTC(2030, 0, 1)
    const at = (y: number) => Date.UTC(y, 10, 6, 8, 49, 37)
    expect(retryAfterMs('Sunday, 06-Nov-79 08:49:37 GMT', now2030)).toBe(at(2079) - now2030)
    expect(retryAfterMs('Sunday, 06-Nov-81 08:49:37 GMT', now2030)).toBe(0) // 1981
    expect(retryAfterMs('Sunday, 06-Nov-31 08:49:37 GMT', now2030)).toBe(at(2031) - now2030)
  })

  it('garbage is ERR_INVALID_ARGUMENT', () => {
    for (const value of [
      '',
      ' ',
      '.',
      'soon',
      '-1',
      '+1',
      '1e3',
      '0x10',
      '1,5',
      '1 2',
      '１２', // full-width digits
      'Infinity',
      'NaN',
      -1,
      -0.5,
      NaN,
      Infinity,
      null,
      undefined,
      true,
      10n,
      ['5'],
      { retryAfter: 5 },
      new Date(NOW + 1000),
      'Sun, 06 Nov 1994 08:49:37', // no zone
      'Sun, 06 Nov 1994 08:49:37 UTC',
      'Sun, 06 Nov 1994 08:49:37 +0000',
      'Sun, 31 Nov 1994 08:49:37 GMT',
      'Sun, 06 Nov 1994 24:00:00 GMT',
      'Sun, 06 Nov 1994 08:60:00 GMT',
      'Sun, 06 Nvm 1994 08:49:37 GMT',
      'Fun, 06 Nov 1994 08:49:37 GMT',
      'Funday, 06-Nov-94 08:49:37 GMT',
      'Sun, 06-Nov-94 08:49:37 GMT',
      'Sun Nov 6 08:49:37 1994', // asctime pads the day with a space
      '1994-11-06T08:49:37Z',
      'Sun, 06 Nov 1994 08:49:37 GMT, Sun, 06 Nov 1994 08:49:38 GMT',
    ]) {
      let thrown: unknown = null
      try {
        retryAfterMs(value, NOW)
      } catch (err) {
        thrown = err
      }
      expect(thrown, String(value)).toMatchObject({ code: 'ERR_INVALID_ARGUMENT' })
      expect((thrown as Error).message).toMatch(/^retryAfter must be a Retry-After value/)
    }
  })
})
