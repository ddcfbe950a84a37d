// @ts-check
'use strict'
// sluice/fetch under the store's rules (store.rules, DESIGN §9; kind 'adaptive', a key's name):
// a deny refuses with no store call, an allow sends at once, an override of qps/maxBurst is the
// record's rate and burst for the call, shadow mode (a rule's or the door's `mode`) asks for a
// slot now and sends at once whatever the record answers.

const { OverLimitError } = require('../../base/errors')
const { nowMs, elapsedMs, aborted } = require('../../classes/base')
const ADAPTIVE = require('../../kinds/adaptive')

const { pace: PACE } = ADAPTIVE.OP

/**
 * A call under the rule of store.rules for this key (or the door's mode 'shadow'), or null
 * when it goes as usual: a deny refuses (OverLimitError, reason 'denied', no store call), an
 * allow sends at once (nothing paced), shadow asks the record for a slot now and sends at
 * once whatever it answers (a would-be wait or refusal counted in `shadowRefused`); an
 * override of `qps`/`maxBurst` is the record's rate and burst for this call.
 */
async function ruledAdmit(gate, signal) {
  const { store, config } = gate.door
  const rule = store.rules._forName('adaptive', gate.key)?.rule
  const book = gate._book
  if (rule !== undefined && rule.access === 'deny') {
    gate.counts.refused++
    if (book !== null) {
      book.decision(gate, false, 1, false, false)
      book.event(gate, 'denied')
    }
    throw new OverLimitError(`${gate.key}: denied by a rule of store.rules`, {
      limiter: gate.key,
      retryAfterMs: 0,
      reason: 'denied',
    })
  }
  if (signal && signal.aborted) throw aborted(signal)
  if (rule !== undefined && rule.access === 'allow') {
    gate.sent(false)
    return elapsedMs(store)
  }
  // the key's rate and burst while the rule is in force (every call of the key reads the same
  // rule): the rule's (an adaptive key's maximum, a fixed key's rate), else the door's
  let params = gate._baseParams
  if (rule !== undefined && (rule.qps !== undefined || rule.maxBurst !== undefined)) {
    params = params.slice()
    if (rule.qps !== undefined) {
      params[0] = rule.qps
      params[1] = Math.min(params[1], rule.qps)
      params[2] = Math.min(params[2], rule.qps)
      if (config.adaptive === null) params[1] = params[2] = rule.qps
    }
    if (rule.maxBurst !== undefined) params[6] = rule.maxBurst
    const same = gate.params.length === params.length && gate.params.every((v, i) => v === params[i])
    if (!same) gate.params = params
  } else gate.params = params
  const mode = rule !== undefined && rule.mode !== undefined ? rule.mode : config.mode
  if (mode !== 'shadow') return null
  // shadow: a slot now or none (maxWaitUs 0: never a wait), the call sent at once either way
  const ok = gate.ok
  gate.ok = 0
  let answer
  try {
    answer = await gate._send([PACE, 1, ok, 0])
  } catch (err) {
    gate.ok += ok // told with the next call
    throw err
  }
  const [delayUs, rate, admitted] = answer
  gate.rate = rate / 1000
  if (!admitted || delayUs >= 1000) {
    if (admitted) gate.free(nowMs(store) + delayUs / 1000) // a slot ahead it took: given back
    gate.counts.shadowRefused++
    if (book !== null) book.event(gate, 'shadowRefused')
  }
  gate.sent(false)
  return elapsedMs(store)
}

module.exports = { ruledAdmit }
