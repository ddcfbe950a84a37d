'use strict'
// The per-key gate of sluice/fetch: waits for a key's slot (the key's record of the adaptive
// kind, shared by every process on the store: its rate, queue, block and learned rate), reads
// each response (Retry-After, learned limits, throttled answers) into that record, and counts
// what happened per key. `FetchDoor` (lib/doors/fetch/door.js) holds the gates of one pacedFetch or
// interceptor.

const ADAPTIVE = require('../../kinds/adaptive')
const { OverLimitError } = require('../../base/errors')
const { nowMs, elapsedMs, aborted } = require('../../classes/base')
const { sleepUntil, moveUp } = require('./slots')
const { Horizon } = require('./horizon')
const { ruledAdmit } = require('./rules')
const { storeKey } = require('../../store/keys')
const { learn, remember, LEARNED_TTL_MS } = require('./headers')
const { MAX_QPS } = require('./options')

/** A key with no rate of its own still has a record: it holds the fleet's blocks and what was learned. */
const UNPACED_QPS = MAX_QPS
/** Adaptive, without `increase`: the rate grows by this share of itself per second of calls that succeed. */
const DEFAULT_INC_REL = 0.002
/** Gates kept per door; the oldest is dropped past this (its counts with it). */
const MAX_GATES = 10_000
/** Two blocks of one key whose ends are this close are the same block (reported twice). */
const SAME_BLOCK_MS = 5
/** Latest start of a slot given back, µs from now (the record refuses more). */
const { MAX_INTERVAL_US: MAX_GIVE_US } = require('../../store/bounds')
/** Calls of an unpaced key wait this long at most for the first call's answer (firstCall()), ms. */
const FIRST_WAIT_MS = 1000
/** A caller that waited this long for its slot asks the key's record for a block before it sends, ms. */
const RECHECK_MS = 25
const { pace: PACE, report: REPORT, give: GIVE } = ADAPTIVE.OP
/** What an answer that says nothing asks of a retry (observe()). */
const NOTHING = Object.freeze({ blockMs: 0, retryAfterMs: 0 })

/**
 * One key: its record in the store (the adaptive kind, lib/kinds/adaptive.js: the rate, the
 * queue, the block and the learned rate, shared by every process), and this process's counts.
 */
class Gate {
  constructor(door, key, limits) {
    this.door = door
    this.key = key
    this._storeKey = storeKey(door.store, 'adaptive', key, ADAPTIVE.VERSION)
    const { adaptive, maxBurst } = door.config
    const qps = limits ? limits.qps : door.config.qps
    // the rate's settings: [max, min, start, incAbs, incRel, decrease, burst]
    if (adaptive !== null) {
      const max = qps === undefined ? adaptive.maxQps : Math.min(qps, adaptive.maxQps)
      const min = Math.min(adaptive.minQps, max)
      this.params = [max, min, Math.max(min, Math.min(adaptive.startQps, max)), adaptive.increase ?? 0]
      this.params.push(adaptive.increase === undefined ? DEFAULT_INC_REL : 0, adaptive.decrease)
    } else {
      const r = qps === undefined ? UNPACED_QPS : qps
      this.params = [r, r, r, 0, 0, 0]
    }
    // (a key with no rate: one call at once after a quiet spell, so that a rate learned later
    // paces from its first slot; unpaced, the slots are a nanosecond apart anyway)
    this.params.push(qps === undefined && adaptive === null ? 1 : limits ? limits.maxBurst : maxBurst)
    this.paced = qps !== undefined || adaptive !== null
    /** the rate's settings of the door's options; `params` is these or a rule's (lib/doors/fetch/rules.js) */
    this._baseParams = this.params
    // an adaptive key's callers of this process ask in turn, within a horizon (horizon.js)
    this.horizon = adaptive !== null ? new Horizon(this) : null
    // the store's statistics (lib/store/stats.js): the key as a limiter of kind 'adaptive'
    this._statsKind = 'adaptive'
    this._statsName = key
    this._book = door.store._stats
    this.rate = this.params[2] // as the store last said
    this.ok = 0 // successes not yet told (adaptive: told at once by tell(); else with the next pace)
    this.okSentMs = -Infinity // elapsedMs() when the latest call among them was sent
    this.telling = false // a tell() under way
    this.answered = false // the first call of this process was answered (firstCall())
    this.first = null // resolves when it is
    this.releaseFirst = null
    this.nextSendMs = 0 // this process's next send of the key, at the earliest
    this.learnedQps = 0 // the learned rate last sent, and when
    this.learnedAtMs = -Infinity
    this.learned = null // { limit, windowMs } as last read
    this.windowMs = 0 // the longest reset seen while no window is stated, and until when
    this.windowUntilMs = 0
    this.blockedUntilMs = 0 // the latest block this process recorded, on the store's clock
    this.blockSetMs = -Infinity // when it was recorded
    this.waiters = [] // this process's callers sleeping for their slots, by slot ({ atMs, rearm })
    this.turns = [] // ... and for their turns of this process's spacing
    this.counts = {
      calls: 0,
      waited: 0,
      waitTimeMs: 0,
      throttled: 0,
      blocks: 0,
      retries: 0,
      refused: 0,
      // sent at once under shadow mode (a rule's or pacedFetch's) where it would have waited or been refused
      shadowRefused: 0,
      givenBack: 0,
      hostile: 0,
      degraded: 0,
      decreases: 0,
      errors: 0,
      // with a budget (pacedFetch's budget option): reservations made, given back (nothing
      // answered), and settles that fell back to the reserved amounts
      reserved: 0,
      cancelled: 0,
      budgetErrors: 0,
    }
  }

  /** One call of the key's record: `[delayUs | blockUs, rate in milli-qps, admitted | decreased, blockUs, degraded]`. */
  _send(head, params = this.params) {
    const nums = new Float64Array(ADAPTIVE.WIDTH)
    nums.set(head)
    nums.set(params, 8)
    // with successes told: how long ago the latest of their calls was sent, µs
    if (head[2] > 0) nums[15] = Math.max(0, Math.ceil((elapsedMs(this.door.store) - this.okSentMs) * 1000))
    return this.door.store._call(ADAPTIVE, new ADAPTIVE.Call(this, nums))
  }

  /** The registry's options of the key (store.limiters(), the dashboard): its settings as sent. */
  _statsOptions() {
    const [max, min, , , , , burst] = this.params
    return {
      qps: this.paced || max < UNPACED_QPS ? max : null,
      minQps: min,
      maxBurst: burst,
      adaptive: this.door.config.adaptive !== null,
      params: this.params,
    }
  }

  /** Counts a call or retry sent now (the store's statistics: admitted). */
  sent(degraded) {
    if (this._book !== null) this._book.decision(this, true, 1, false, degraded)
  }

  overLimit(delayMs) {
    this.counts.refused++
    if (this._book !== null) this._book.decision(this, false, 1, false, false)
    return new OverLimitError(`${this.key}: the next slot is ${delayMs} ms away, over maxWaitMs`, {
      limiter: this.key,
      retryAfterMs: delayMs,
    })
  }

  /**
   * Waits for this key's slot (and past any block) for a call or a retry, honouring `signal`
   * (ERR_ABORTED); the whole wait, an adaptive key's turn to ask included (horizon.js), is
   * bounded by `maxWaitMs`: a slot further than what is left of it is refused (OverLimitError,
   * nothing reserved). A slot taken and then given up (an
   * abort while waiting for it, a new slot after a block) is given back to the key's record,
   * so its capacity goes to the next caller; no call goes once its signal aborted.
   */
  async admit(signal) {
    const { store, config } = this.door
    // the store's rules (store.rules, kind 'adaptive', the key's name): one property read without
    if (store.rules._table.size > 0 || config.mode === 'shadow') {
      const ruled = await ruledAdmit(this, signal)
      if (ruled !== null) return ruled
    } else if (this.params !== this._baseParams) this.params = this._baseParams // a rule gone
    return this._admitPaced(signal)
  }

  /** admit() past the rules: the key's slot, waited for. */
  async _admitPaced(signal) {
    const { store, config } = this.door
    const deadlineMs = nowMs(store) + config.maxWaitMs
    if (!this.answered) await this.firstCall(signal)
    for (let round = 0; ; round++) {
      if (signal && signal.aborted) throw aborted(signal)
      let reservedMs = nowMs(store)
      let leftMs = deadlineMs - reservedMs
      // a slot another caller of this process gave up, at its own time: no store call, no turn
      const spareMs = store._spares.size === 0 ? -1 : store._spares.take(this._storeKey, 1, reservedMs, leftMs)
      let delayMs
      let atMs = spareMs // the slot's start, on the store's clock
      let degraded = false
      const horizon = this.horizon
      if (spareMs >= 0) {
        delayMs = Math.ceil(spareMs - reservedMs)
        if (horizon !== null) horizon.hold(spareMs)
      } else {
        if (horizon !== null) {
          // an adaptive key: this caller's turn to ask (lib/doors/fetch/horizon.js)
          await horizon.turn(signal, deadlineMs, (ms) => this.overLimit(ms))
          horizon.asked()
          reservedMs = nowMs(store)
          leftMs = deadlineMs - reservedMs
        }
        const maxWaitUs = leftMs === Infinity ? -1 : Math.max(0, Math.floor(leftMs * 1000))
        const ok = this.ok
        this.ok = 0
        let answer
        try {
          answer = await this._send([PACE, 1, ok, maxWaitUs])
        } catch (err) {
          this.ok += ok // told with the next call
          if (horizon !== null) horizon.answered(null)
          throw err
        }
        const [delayUs, rate, admitted, blockUs, down] = answer
        this.rate = rate / 1000
        if (horizon !== null) horizon.answered(admitted ? reservedMs + delayUs / 1000 : null)
        degraded = down
        if (blockUs > 0) this.heardBlock(blockUs)
        if (degraded && round === 0) this.counts.degraded++
        // sub-ms delays go at once: pacing to the ms is what a timer can do
        delayMs = delayUs < 1000 ? 0 : Math.ceil(delayUs / 1000)
        if (!admitted) throw this.overLimit(delayMs)
        atMs = reservedMs + delayUs / 1000
      }
      const slot = { atMs, rearm: null } // atMs moves earlier when a slot ahead is given up
      let spent
      try {
        spent = await this.wait(delayMs, slot, reservedMs, round, signal)
      } catch (err) {
        if (!degraded) this.free(slot.atMs)
        throw err
      }
      if (spent) continue // spent inside a block: take one after it
      this.sent(degraded)
      return elapsedMs(store)
    }
  }

  /**
   * Waits `delayMs` for a slot taken at `reservedMs` (and this process's spacing); true when a
   * block recorded meanwhile ends after it (the slot is spent: take another), false when the
   * call may go; rejects when `signal` aborts (ERR_ABORTED).
   */
  async wait(delayMs, slot, reservedMs, round, signal) {
    const { store } = this.door
    if (delayMs > 0) {
      this.counts.waited++
      this.counts.waitTimeMs += delayMs
      if (this._book !== null) this._book.waited(this, delayMs)
      await sleepUntil(this.door.store, slot, signal, this.waiters)
      // a block another process's response recorded while this caller slept: its record
      // says so (a probe, weight 0, that takes no slot)
      // (the slot is granted already: a failed probe lets the call go)
      if (delayMs >= RECHECK_MS) {
        const told = this.ok
        this.ok = 0
        const askedMs = nowMs(store)
        try {
          const [, , , blockUs] = await this._send([PACE, 0, told, -1])
          if (blockUs > 0) this.heardBlock(blockUs, askedMs)
        } catch {
          this.ok += told
          this.counts.errors++
        }
      }
    }
    // a block recorded after this slot was taken (by a response of this process) and not
    // over yet: the slot is spent, take one after the block
    if (this.blockSetMs >= reservedMs && this.blockedUntilMs > nowMs(store) && round < 8) return true
    // timers that fire late together (a busy event loop) would send their calls in a bunch
    // into an upstream with a small burst: this process never sends two calls of a key closer
    // than the key's spacing (the fleet's slots are that far apart already)
    // (a turn given up goes to the latest caller here, or back: see freeTurn)
    if (this.paced) {
      const now = nowMs(store)
      const at = Math.max(now, this.nextSendMs)
      this.nextSendMs = at + 1000 / this.rate
      if (at > now + 1) {
        const turn = { atMs: at, rearm: null }
        try {
          await sleepUntil(this.door.store, turn, signal, this.turns)
        } catch (err) {
          this.freeTurn(turn.atMs)
          throw err
        }
      }
    }
    // an abort that came during the last probe: the call does not go
    if (signal && signal.aborted) throw aborted(signal)
    return false
  }

  /**
   * A slot at `atMs` that a caller of this process gave up: the caller here with the latest
   * slot after it moves up to it (the capacity goes to a caller still waiting, and the fleet's
   * spacing holds), and that caller's slot is given back in its place.
   */
  free(atMs) {
    this.giveBack(moveUp(this.waiters, atMs))
  }

  /**
   * A turn of this process's spacing at `atMs` that its caller gave up: the latest caller
   * here moves up to it, and the latest turn is released (the next caller takes it).
   */
  freeTurn(atMs) {
    const freed = moveUp(this.turns, atMs)
    if (freed < this.nextSendMs) this.nextSendMs = freed
  }

  /**
   * Gives back a slot starting at `atMs` (the store's clock) that a caller of this process gave
   * up before it started: to the key's record while it is the last one queued (the next caller
   * of any process takes its place), else to this process's spare slots (the next caller here
   * takes it at its own time: lib/store/spares.js). Not awaited; a slot whose time has come is
   * spent.
   */
  giveBack(atMs) {
    const store = this.door.store
    const startInUs = Math.round((atMs - nowMs(store)) * 1000)
    if (!(startInUs > 0)) return
    this.counts.givenBack++
    const keep = () => store._spares.put(this._storeKey, atMs, 1)
    this._send([GIVE, 1, 0, Math.min(startInUs, MAX_GIVE_US), 0, 0, 0, 0]).then(
      ([, , given]) => given === 1 || keep(),
      () => {
        this.counts.errors++
        keep()
      },
    )
  }

  /**
   * A key with no rate given whose limits are learned (`learn`, unpaced): the first call of
   * this process goes alone and the others wait for its answer (its headers learned and told
   * to the store, so a stated limit paces them), at most FIRST_WAIT_MS, instead of going out
   * together as a first wave that an upstream with a small burst answers with 429s and a
   * block. Once answered (or failed), calls go at once. The wait honours `signal`.
   */
  async firstCall(signal) {
    if (this.paced || !this.door.config.learn) {
      this.answered = true
      return
    }
    if (this.first === null) {
      this.first = new Promise((resolve) => (this.releaseFirst = resolve))
      return // this call is the first
    }
    await new Promise((resolve, reject) => {
      const done = () => {
        clearTimeout(timer)
        if (signal) signal.removeEventListener('abort', onAbort)
        resolve()
      }
      const onAbort = () => {
        clearTimeout(timer)
        reject(aborted(signal))
      }
      const timer = setTimeout(done, FIRST_WAIT_MS)
      timer.unref?.()
      if (signal) {
        if (signal.aborted) return onAbort()
        signal.addEventListener('abort', onAbort, { once: true })
      }
      this.first.then(done)
    })
  }

  /** The first call was answered (or failed): every call goes at once from now on. */
  firstAnswered() {
    if (this.answered) return
    this.answered = true
    if (this.releaseFirst !== null) this.releaseFirst()
  }

  /**
   * Tells the key's record the successes not told yet, at once and beside the caller (one
   * report under way per key and process; what comes meanwhile goes with the next): the
   * adaptive rate's served measure is as current as the answers, not as this process's next
   * pace. Its answer brings the rate and any block.
   */
  tell() {
    if (this.telling || this.ok === 0) return
    this.telling = true
    const ok = this.ok
    this.ok = 0
    const askedMs = nowMs(this.door.store)
    this._send([REPORT, 0, ok, -1, 0, 0, 0, 0]).then(
      ([, rate, , blockUs]) => {
        this.rate = rate / 1000
        if (blockUs > 0) this.heardBlock(blockUs, askedMs)
        this.telling = false
        this.tell()
      },
      () => {
        this.ok += ok // told with the next call; the store's failure is counted where a call waits on it
        this.telling = false
      },
    )
  }

  /**
   * A block in the key's record, `blockUs` from when the record answered a call asked at
   * `askedMs`, that another process's response may have recorded: this process's callers that
   * took their slots before it and wake inside it take new ones after it (every process
   * waits, not only the one that was told). Counted from the asking, it ends no later than the
   * record's (a caller that wakes within a round trip of the end goes).
   */
  heardBlock(blockUs, askedMs) {
    const until = askedMs + blockUs / 1000
    if (until <= this.blockedUntilMs + SAME_BLOCK_MS) return
    this.blockedUntilMs = until
    this.blockSetMs = nowMs(this.door.store)
  }

  /**
   * Reads a response: counts it, learns the key's limits (with `learn`), and records in the
   * key's record a block (Retry-After on a `blockStatuses` answer, or an exhausted quota, capped
   * at `maxBlockMs`), a learned
   * rate and a throttled answer (the adaptive rate comes down); `sentMs`: when the call went
   * (what admit() answered). Resolves with what the answer asked of a retry, `{ blockMs,
   * retryAfterMs }` (the key's block, 0: none; the Retry-After it gave). Never throws.
   */
  async observe(status, get, sentMs = elapsedMs(this.door.store)) {
    try {
      return await this._observe(status, get, sentMs)
    } finally {
      this.firstAnswered()
    }
  }

  async _observe(status, get, sentMs) {
    const { store, config } = this.door
    const throttled = status === 429 || status === 503
    const blocking = config.blockStatuses.has(status)
    if (throttled) {
      this.counts.throttled++
      if (this._book !== null) this._book.event(this, 'throttled')
    } else if (status < 400) {
      this.ok++
      if (sentMs > this.okSentMs) this.okSentMs = sentMs
      if (config.adaptive !== null) this.tell()
    }
    const now = nowMs(store)
    let l
    try {
      l = learn(get, now, config.maxBlockMs)
    } catch {
      this.counts.hostile++
      return NOTHING
    }
    this.counts.hostile += l.hostile
    const learned = config.learn ? remember(this, l, now) : null
    // Retry-After blocks the fleet on a blocking status only (429, 503: on a 2xx it is a polling
    // hint); an exhausted quota on any answer (learned) or a throttled one
    const seen = {
      blockMs: Math.max(blocking ? l.retryAfterMs : 0, config.learn || throttled ? l.quotaBlockMs : 0),
      retryAfterMs: l.retryAfterMs,
    }
    let blockMs = seen.blockMs
    const until = now + blockMs
    if (blockMs > 0 && until <= this.blockedUntilMs + SAME_BLOCK_MS) blockMs = 0 // this process sent it already
    const decreases = throttled && config.adaptive !== null
    if (blockMs === 0 && learned === null && !decreases) return seen
    if (blockMs > 0) {
      this.blockedUntilMs = until
      this.blockSetMs = now
      this.counts.blocks++
      if (this._book !== null) this._book.event(this, 'blocks')
    }
    // this process's successes not told yet go first: the served rate a throttled answer
    // settles under counts them
    const ok = this.ok
    this.ok = 0
    try {
      const ttlUs = learned === null ? 0 : learned.ttlMs * 1000
      const [, rate, decreased] = await this._send([
        REPORT,
        0,
        ok,
        // a throttled answer: how long ago its call was sent, µs (the end of a cycle of calls:
        // bench/adaptive-model.js's `cycle` variant reads it; the native core ignores it)
        throttled ? Math.min(MAX_GIVE_US, Math.max(0, Math.ceil((elapsedMs(store) - sentMs) * 1000))) : -1,
        throttled ? 1 : 0,
        blockMs * 1000,
        learned === null ? 0 : learned.qps,
        ttlUs,
      ])
      this.rate = rate / 1000
      if (decreased && config.adaptive !== null) this.counts.decreases++
    } catch {
      this.ok += ok // told with the next call
      this.counts.errors++ // the response still reaches the caller; the store's state is its own concern
    }
    return seen
  }

  stats() {
    const now = nowMs(this.door.store)
    const out = { key: this.key, ...this.counts, qps: this.paced || this.rate < UNPACED_QPS ? this.rate : null }
    if (this.learned !== null && now < this.learnedAtMs + Math.max(LEARNED_TTL_MS, this.learned.windowMs)) {
      out.learned = { limit: this.learned.limit, windowMs: this.learned.windowMs }
    }
    if (this.blockedUntilMs > now) out.blockedMs = this.blockedUntilMs - now
    return out
  }
}

module.exports = { Gate, MAX_GATES }
