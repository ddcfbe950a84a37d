'use strict'
// A JavaScript port of the adaptive rule (src/core/adaptive/mod.rs, as on main at ff6f156), for
// trying changes to the rule in seconds instead of a release build: `install()` makes the
// MemoryStore's adaptive kind decide with it (lib/kinds/adaptive.js's `memory`), so the door
// and the simulation (__tests__/helpers/adaptive-sim.js) run unchanged. `SIM_MODEL=<json>` in
// bench/fetch-sim.js and bench/fetch-sim-grid.js installs it with those variant switches:
//   provisional: a throttled answer after less than a second of calls (since the record was
//     made or the last back-off period ended) keeps a provisional mark (negative): the rate
//     settles under it but climbs fast, with no plateau;
//   noClimbed: a settle after a fast climb keeps the (1 - decrease) margin too;
//   latePos: late successes (calls sent before a decrease, told during its block) raise a
//     measured mark only, not a provisional one;
//   cycle: each throttled answer ends a cycle (see BENCHMARKS.md, issue 36 item 4): the rate
//     settles under the largest of what the cycle served over its length, over its calls less
//     the upstream's burst (what a fresh record served before its first refusal), and the last
//     second's count; it needs the refused call's send time in the report (nums[3], which
//     lib/doors/fetch/gate.js sends since the adaptive branch; the native core ignores it);
//   last ('both', 'short', or unset): with cycle, when the last second's count takes part
//     (always, only after less than a second of calls, only after a second or more);
//   climbHi (a share, e.g. 0.03): with cycle, a refusal that ends a cycle in which the rate
//     climbed by a tenth or more over a second of calls or more settles no lower than the rate
//     it came at (at most 1.2 times the last second's count) less that share: a climb is
//     refused just past the limit (small bursts: the limit itself);
//   climbSend (a share): the climb goes on only while the rate is under (1 + share) times the
//     rate at which the slots now being sent were handed out (the queue's send rate: a deep
//     pacing queue sends at an older rate); worse over the grid (see BENCHMARKS.md);
//   hiSend: with climbHi, the rate a refusal came at is the rate the refused call's slot was
//     handed out at, not the record's rate now (best with climbHi 0: that rate is exact);
//   fit (1 or 2): the upstream's burst b and rate r from two cycles of different lengths (a
//     bucket serves b + r f in a cycle of f seconds of calls, a window the same whatever f,
//     read as a window: no (S - b) / f term); 1 takes the fitted r and b, 2 only lowers the
//     burst estimate with the fitted b (1 reads r low after a cycle that climbed from below the
//     limit);
//   corrAdd (calls): the refused call bounds r within [(S - b) / f, (S + 1 - b) / f]: add that
//     many calls to S - b (1: the upper end; the rate is cut by `decrease` below it anyway);
//   fitFirst (false: the first cycle takes no part in the fit), suffix (seconds), provis (a
//     count, true, or 'nofit'): tried, no better (see the comments where they act, and
//     BENCHMARKS.md);
//   retake: every slot handed out before a cut is void (the record's queue restarts at the
//     block's end, and a gate's caller that took its slot before its process saw the rate come
//     down takes a new one); it patches Gate.prototype for the run. Tried, worse (see
//     BENCHMARKS.md).
//   respace: a cut re-spaces the queue: the slots handed out before it that start after the
//     block's end `a` move to `a + (s - a) k` (k: the rate before over the rate after; the
//     record keeps its last cuts), the tail with them; a caller's probe when it wakes for its
//     slot (gate.js's recheck, for waits of RECHECK_MS or more) sends the slot's start and when
//     it was taken (nums[4], nums[5]; the native core ignores them) and sleeps on to the start
//     answered (patches Gate.prototype.wait);
//   horizon (ms): a process's callers ask for slots in order, one ask under way counting one
//     slot at the rate, and only while the latest slot the process holds starts within
//     `horizon` of now (a slot spent inside a block is taken again in that order too): the
//     record's queue is a horizon (and a slot per process) deep instead of every caller's
//     slot, so a changed rate reaches the sends within it (patches Gate.prototype.admit and
//     _send);
//   respaceKeep (1-8): the cuts the record keeps for respace (1 gives the same cells as 8);
//     respaceQ: a cut also records the re-spaced queue's rate for hiSend (no better);
//   lastLessB (a share of the burst): the last second's count less that share of the burst
//     estimate (a bucket serves its burst on top of a second's rate); lastLessBFit: only once a
//     fit read a bucket (without it a window's first cycle, read as a burst, is taken off);
//   fitGapN (calls): a pair of cycles also fits when their lengths differ by that many calls'
//     worth at the pair's mean rate (not only by fitGap, 25 %);
//   tried, not adopted (see BENCHMARKS.md): hiCut (a share: with climbHi, a refusal whose
//     estimate is the rate it came at cuts by that share), climbF (the climbed reading after
//     that share of a second), provLower (seconds: a mark only lower bounds give is
//     provisional, held that long), fitNoClimb (a cycle whose rate climbed a tenth is left out
//     of the fit), ratchet (refused again at or under the settled rate: no last-second count),
//     lead (ms: a waking caller probes that much before its slot), sendQStep / sendQMax /
//     sendQDt (the send-rate history bounded: an entry per share moved, at most N entries, at
//     most one per ms span);
//   shortBlind: a cycle too short to measure whose last second served under 1 / BLIND of the
//     rate cuts to the geometric middle, no mark, no plateau (a start 100 x over the limit
//     came down by `decrease` a block); in the native core since the port (issue 36 item 4);
// The native core (src/core/adaptive/cycle.rs) is the variant `{"cycle":1,"last":"both","fit":2,
// "climbHi":0,"hiSend":1,"corrAdd":1,"lastLessB":1,"lastLessBFit":1,"fitGapN":50,"sendQDt":100,
// "sendQMax":16,"shortBlind":1}` with the gate's horizon (lib/doors/fetch/horizon.js, not this
// file's `horizon` patch: to run the model with its own, set Gate.prototype's horizon to null).
// `SIM_MODEL={}` is the rule on main before the port (ff6f156; it gave the same numbers as that
// native core, per second, on the cell: L 100, burst 20, 50 ms, 4 x 16). Not the rule:
// the rule is the Rust core and its Lua mirror; a change found here is made there.

const SECOND = 1e6
const WINDOW = 1e6
const PLATEAU = 30e6
const INC_CAP = 1.5
const BLIND = 16
const FAST = 0.25

let V = {}

class State {
  constructor() {
    this.rate = 0
  }

  init(p, now) {
    if (this.rate > 0) return
    Object.assign(this, { rate: p.start, tail: 0, bu: 0, hu: 0, li: now, ws: now, cur: 0, prev: 0, cr: now })
    Object.assign(this, { lq: 0, lu: 0, mark: 0, cs: now, cok: 0, be: -1, r0: p.start })
    // sendQ: the rate each part of the queue was handed out at ({ t: first slot's start, r });
    // cycles: the cycles' calls and lengths ({ S, f }, µs), for the fit
    Object.assign(this, { sendQ: [{ t: now, r: p.start }], cycles: [] })
  }

  /** The rate at which the slot sent at `t` was handed out (the queue's send rate then). */
  sendRate(t) {
    const q = this.sendQ
    for (let i = q.length - 1; i >= 0; i--) if (q[i].t <= t) return q[i].r
    return q[0].r
  }

  /** Records that slots from `t` on are spaced at the rate now (keeps 3 s of history). */
  handOut(t, now) {
    const q = this.sendQ
    // sendQStep (a share): a new entry only when the rate moved by that much since the last
    // one; sendQMax: at most that many entries (a bounded ring, for the native core)
    const lastR = q[q.length - 1].r
    const lastT = q[q.length - 1].t
    if (lastR !== this.rate && Math.abs(this.rate - lastR) >= (V.sendQStep ?? 0) * lastR) {
      // sendQDt (ms): an entry at most that often (the last one's rate is updated meanwhile)
      if (V.sendQDt && q.length > 1 && t - lastT < V.sendQDt * 1000) q[q.length - 1].r = this.rate
      else q.push({ t: Math.max(t, lastT), r: this.rate })
    }
    while (q.length > 2 && q[1].t < now - 3 * SECOND) q.shift()
    while (V.sendQMax && q.length > V.sendQMax) q.shift()
  }

  /**
   * fit: the upstream's rate and burst from two cycles of different lengths: a bucket serves
   * `b + r f` in a cycle of `f` seconds of calls (its successes grow with f), a window about the
   * same whatever f. Answers { r, b } (per second, calls), { window: true }, or null.
   */
  fit(S, f) {
    for (let i = this.cycles.length - 1; i >= 0; i--) {
      const c = this.cycles[i]
      const mean = ((S + c.S) / (f + c.f)) * SECOND
      // fitGapN (calls): a pair whose lengths differ by less than fitGap may still fit when
      // the difference is worth that many calls at the pair's mean rate (counts are whole)
      const apart = Math.abs(f - c.f) >= (V.fitGap ?? 0.25) * Math.max(f, c.f)
      if (!apart && !(V.fitGapN && (Math.abs(f - c.f) / SECOND) * mean >= V.fitGapN)) continue
      const r = ((S - c.S) / (f - c.f)) * SECOND
      if (r < (V.fitWin ?? 0.2) * mean) return { window: true }
      const b = S - (r * f) / SECOND
      if (b < -0.1 * S) return null
      return { r, b: Math.max(0, b) }
    }
    return null
  }

  ceiling(p, now) {
    return this.lq > 0 && this.lu > now ? Math.min(p.max, this.lq) : p.max
  }

  clamp(p, now) {
    this.rate = Math.min(Math.max(this.rate, p.min), this.ceiling(p, now))
  }

  roll(now) {
    if (now >= this.ws + 2 * WINDOW) {
      this.prev = 0
      this.cur = 0
      this.ws += Math.floor((now - this.ws) / WINDOW) * WINDOW
    } else if (now >= this.ws + WINDOW) {
      this.prev = this.cur
      this.cur = 0
      this.ws += WINDOW
    }
  }

  served(now) {
    const into = Math.min(1, Math.max(0, (now - this.ws) / WINDOW))
    return this.prev * (1 - into) + this.cur
  }

  flowServed(now) {
    const flowing = Math.min(WINDOW, Math.max(WINDOW / 10, now - Math.max(this.hu, this.cr)))
    return (this.served(now) * WINDOW) / flowing
  }

  countOk(p, ok, ago, now) {
    if (ok <= 0) return
    if (V.cycle && now - ago >= this.cs) {
      this.cok += ok
      if (V.suffix) (this.sends ??= []).push({ t: now - ago, ok })
    }
    const late = V.latePos ? this.mark > 0 : this.mark !== 0
    if (!V.cycle && late && now < this.bu && now < this.hu && now < this.ws + WINDOW && now - ago < this.ws) {
      const k = this.rate / Math.abs(this.mark)
      this.mark += Math.sign(this.mark) * ok
      this.rate = Math.abs(this.mark) * k
      return
    }
    this.cur += ok
    // climbSend: the climb is bounded by the rate the slots now being sent were handed out at
    const sendOk = !V.climbSend || this.rate < (1 + V.climbSend) * this.sendRate(now)
    if (now >= this.hu && now >= this.li && sendOk && this.rate < INC_CAP * this.flowServed(now)) {
      const rel = this.mark <= 0 || this.rate < 0.9 * this.mark ? FAST : p.incRel
      this.rate += (p.incAbs + this.rate * rel) * Math.min(ok / this.rate, 1)
    }
  }

  pace(p, weight, ok, ago, maxWait, now, probe) {
    this.init(p, now)
    this.roll(now)
    this.countOk(p, ok, ago, now)
    this.clamp(p, now)
    if (V.respace && weight === 0 && probe && probe.takenAgo > 0) {
      // respace: a slot taken before a cut, re-spaced as the cuts since moved the queue
      const s = this.remap(now + probe.startIn, now - probe.takenAgo)
      return [Math.max(0, s - now), this.rate, 1]
    }
    const burst = V.cycle && this.be >= 0 ? Math.min(p.burst, Math.max(0, this.be - 1)) : p.burst
    const start = Math.max(this.tail, now - (burst * SECOND) / this.rate, this.bu)
    const delay = Math.max(0, start - now)
    if (maxWait >= 0 && delay > maxWait) return [delay, this.rate, 0]
    this.tail = start + (weight * SECOND) / this.rate
    this.handOut(start, now)
    return [delay, this.rate, 1]
  }

  /** respace: the start `s` of a slot taken at `taken`, moved by every cut since. */
  remap(s, taken) {
    for (const c of this.cuts ?? []) if (c.at > taken && s > c.a) s = c.a + (s - c.a) * c.k
    return s
  }

  /** respace: a cut from `before` to the rate now re-spaces the queue from the block's end. */
  respace(before, now) {
    if (!(this.rate < before)) return
    const a = Math.max(now, this.bu)
    const k = before / this.rate
    ;(this.cuts ??= []).push({ at: now, a, k })
    if (this.cuts.length > (V.respaceKeep ?? 8)) this.cuts.shift()
    if (this.tail > a) this.tail = a + (this.tail - a) * k
    // respaceQ: the slots from a on are spaced at the rate now (for hiSend's sendRate)
    if (V.respaceQ) {
      const q = this.sendQ
      while (q.length > 1 && q[q.length - 1].t >= a) q.pop()
      q.push({ t: a, r: this.rate })
    }
  }

  give(p, weight, startIn, now) {
    this.init(p, now)
    this.roll(now)
    const width = (weight * SECOND) / this.rate
    const given = this.tail > now && Math.abs(this.tail - (now + startIn + width)) <= Math.min(width / 2, 1000)
    if (given) this.tail = Math.max(this.tail - width, now)
    return [0, this.rate, given ? 1 : 0]
  }

  report(p, a, now) {
    this.init(p, now)
    this.roll(now)
    this.countOk(p, a.ok, a.ago, now)
    if (a.learned > 0) {
      this.lq = a.learned
      this.lu = now + a.ttl
    }
    if (a.block > 0 && now + a.block > Math.max(this.bu, now) + SECOND * (this.bu > now ? 1 : 0)) {
      this.bu = now + a.block
    }
    let decreased = false
    const before = this.rate
    if (a.throttled && now >= this.hu) {
      const served = this.served(now)
      let plateau = 0
      const learned = this.lu > now ? this.lq : 0
      if (V.cycle && learned === 0) {
        const sendT = a.tAgo >= 0 ? now - a.tAgo : now
        const S = this.cok
        if (this.be < 0) {
          // the first refusal of a fresh record: what was served before it is the burst, about
          this.be = S
          // fitFirst false: the first cycle takes no part in the fit (a window entered part way)
          if (V.fit && V.fitFirst !== false) this.cycles.push({ S, f: Math.max(0, sendT - this.cs) })
          this.mark = 0
          this.rate = Math.min(Math.max(Math.sqrt(served * this.rate), this.rate / BLIND), this.rate * 0.5)
        } else {
          const blockT = Math.max(0, this.hu - this.cs)
          const f = sendT - Math.max(this.hu, this.cs)
          const lower = (S / Math.max(1, blockT + Math.max(f, 0))) * SECOND
          let corrected = f > 0 ? ((S - this.be) / f) * SECOND : 0
          let window = false
          // fitNoClimb: a cycle in which the rate climbed by a tenth or more went slower than
          // the limit for a while (it served less than b + r f): it takes no part in the fit
          const climbing = V.fitNoClimb && this.rate >= 1.1 * this.r0
          if (V.fit && f > 0 && !climbing) {
            const fitted = this.fit(S, f)
            this.fitted = fitted !== null
            if (fitted !== null) this.bucketFit = !fitted.window
            if (fitted !== null && fitted.window) {
              window = true
              corrected = 0
            } else if (fitted !== null && V.fit === 2) {
              // fit 2: the fit only lowers the burst (a cycle whose calls went slower than
              // the limit for a while served less than b + r f: its fit reads r low, b high)
              this.be = Math.min(this.be, fitted.b)
              corrected = ((S - this.be) / f) * SECOND
            } else if (fitted !== null) {
              corrected = Math.min(fitted.r, (S / f) * SECOND)
              this.be = fitted.b
            }
            this.cycles.push({ S, f })
            if (this.cycles.length > 4) this.cycles.shift()
          }
          // suffix (seconds): a bucket that ran out at the refused call served b + r (end - t)
          // since the last time t it was full; in a cycle whose calls went slower than the
          // limit for a while (a climb) that time is not the cycle's start: the largest
          // (successes since t - b) / (end - t) over the cycle's suffixes of `suffix` s or more
          if (V.suffix && f > 0 && !window && this.sends) {
            const xs = this.sends.filter((x) => x.t <= sendT).sort((a, b) => b.t - a.t)
            let n = 0
            for (const x of xs) {
              n += x.ok
              const len = sendT - x.t
              if (len >= V.suffix * SECOND) corrected = Math.max(corrected, ((n - this.be) / len) * SECOND)
            }
          }
          // corrAdd (calls): the refusal shows the bucket ran out at the refused call, so the
          // cycle's calls bound r within [(S - b) / f, (S + 1 - b) / f]: add a part of that call
          if (V.corrAdd && f > 0 && !window && corrected > 0) corrected += (V.corrAdd / f) * SECOND
          const short = f < Math.max(0.2 * SECOND, (4 * SECOND) / this.rate)
          let last =
            V.last === 'short' ? (f < SECOND ? served : 0) : V.last === 'both' ? served : f >= SECOND ? served : 0
          // lastLessB: a bucket serves its burst on top of a second's rate: the last second's
          // count less the burst estimate (not when the fit reads a window)
          if (V.lastLessB && !window && (V.lastLessBFit === undefined || this.bucketFit))
            last = Math.max(0, last - V.lastLessB * this.be)
          // climbHi: a refusal that ends a cycle in which the rate climbed (by a tenth or more,
          // over a second of calls or more) comes just past the limit: the rate it came at, less
          // `climbHi` of it, is a floor of the estimate (a small burst: the limit itself)
          const climbed = V.climbHi !== undefined && f >= (V.climbF ?? 1) * SECOND && this.rate >= 1.1 * this.r0
          // hiSend: the rate it came at is the rate the refused call's slot was handed out at
          const at = V.hiSend ? this.sendRate(sendT) : this.rate
          const hi = climbed && !window ? Math.min(at, 1.2 * served) * (1 - V.climbHi) : 0
          // ratchet: refused again at or under the rate the last mark settled at (no climb
          // since): that mark was too high, and so is the last second's count it came from
          // (a bucket's burst on top of its rate): the cycle's own bounds only
          const again = V.ratchet && this.mark > 0 && this.rate <= this.mark * (1 - p.dec) * 1.001
          const est = short ? this.rate : again ? Math.max(lower, corrected, hi) : Math.max(lower, corrected, last, hi)
          if (V.trace)
            console.log('cycle', {
              t: (now - this.cr) / 1e6,
              S,
              blockT,
              f,
              lower,
              corrected,
              rate: this.rate,
              be: this.be,
              window,
              at,
            })
          this.mark = Math.min(this.rate, est)
          // hiCut (a share): a refusal read as the rate it came at after a climb (hi decides)
          // overshot the limit by up to a climb's step: cut by this share instead of decrease
          const fromHi = V.hiCut !== undefined && !short && hi > 0 && hi >= Math.max(lower, corrected, last)
          this.rate = this.mark * (1 - (fromHi ? V.hiCut : p.dec))
          plateau = PLATEAU
          // shortBlind: a cycle too short to measure when the upstream served under 1 / BLIND
          // of the rate over the last second (a burst, the rest refused: far over the limit)
          // cuts to the geometric middle with no mark and no plateau, as a fresh record's
          // first refusal does (a start 100 x over the limit otherwise comes down by
          // `decrease` a block)
          if (V.shortBlind && short && served * BLIND < this.mark) {
            this.mark = 0
            this.rate = Math.min(Math.max(Math.sqrt(served * est), est / BLIND), est * 0.5)
            plateau = 0
          }
          // provis (a count): a cycle of under a second of calls and fewer successes than
          // that measures little: a provisional mark (negative: a fast climb) and no plateau
          // (provis: true, any cycle under a second: tried, far worse)
          // provLower: an estimate that only the cycle's whole length (block included) or the
          // last second's count gives is a lower bound (a bucket refills at most its burst
          // during the block, and the last second held the block): a
          // provisional mark, climbing fast after a short hold (`provLower` seconds)
          if (V.provLower !== undefined && !short && !window && est > Math.max(corrected, hi)) {
            this.mark = -this.mark
            plateau = V.provLower * SECOND
          } else if (
            V.provis &&
            !short &&
            f < SECOND &&
            (V.provis === true || (V.provis === 'nofit' ? !this.fitted : S < V.provis))
          ) {
            this.mark = -this.mark
            plateau = 0
          }
        }
        this.cs = now
        this.cok = 0
        this.sends = []
        this.r0 = this.rate
      } else if (learned > 0) {
        this.mark = Math.min(this.rate, learned)
        this.rate = this.mark * (1 - p.dec)
        plateau = PLATEAU
      } else if (served * BLIND >= this.rate) {
        const flowed = now - Math.max(this.cr, this.hu) >= SECOND
        const measure = Math.min(this.rate, V.flowMark ? this.flowServed(now) : served)
        if (V.confirm) {
          const prior = Math.abs(this.mark)
          const tol = V.tol ?? 0.15
          if (this.mark < 0 && Math.abs(measure - prior) <= tol * prior) {
            // a second measure agrees with the first: the limit, about
            this.mark = Math.min(this.rate, Math.max(measure, prior))
            this.rate = this.mark * (1 - p.dec)
            plateau = PLATEAU
          } else {
            this.mark = -measure
            this.rate = measure * (1 - p.dec)
            plateau = (V.short ?? 2) * SECOND
          }
        } else if (V.provisional && !flowed) {
          this.rate = measure * (1 - p.dec)
          this.mark = -measure
        } else {
          const climbed = this.mark <= 0 && flowed && !V.noClimbed
          this.mark = measure
          this.rate = measure * (climbed ? 1 : 1 - p.dec)
          plateau = PLATEAU
        }
      } else {
        this.mark = 0
        this.rate = Math.min(Math.max(Math.sqrt(served * this.rate), this.rate / BLIND), this.rate * 0.5)
      }
      this.hu = now + Math.max(a.block, SECOND)
      this.li = this.hu + plateau
      // retake: every slot handed out before the cut is void (the gates take new ones after
      // the block), so the queue restarts at the block's end at the new rate
      if (V.retake) this.tail = Math.min(this.tail, Math.max(now, this.bu))
      this.prev = 0
      this.cur = 0
      this.ws = now
      decreased = true
    }
    this.clamp(p, now)
    if (decreased && V.respace) this.respace(before, now)
    return [Math.max(0, this.bu - now), this.rate, decreased ? 1 : 0]
  }
}

const states = new Map()

/**
 * retake: every slot handed out before a cut (the key's rate came down) is void: the record's
 * queue restarts at the block's end at the new rate, and a gate's caller whose slot was taken
 * before its process heard of the cut (a rate lower than the one it knew, in any answer of the
 * record) takes a new one when it wakes (lib/doors/fetch/gate.js takes one only when it wakes
 * inside a block): the slots handed out before a cut are spaced at the old rate.
 */
function patchGate() {
  const { Gate } = require('../lib/doors/fetch/gate.js')
  if (Gate.prototype.wait.patched) return
  const send = Gate.prototype._send
  Gate.prototype._send = async function (head) {
    const out = await send.call(this, head)
    const rate = out[1] / 1000
    if (rate < (this.seenRate ?? rate) - 0.001) this.cuts = (this.cuts ?? 0) + 1
    this.seenRate = rate
    return out
  }
  const wait = Gate.prototype.wait
  Gate.prototype.wait = async function (delayMs, slot, reservedMs, round, signal) {
    const epoch = this.cuts ?? 0
    const out = await wait.call(this, delayMs, slot, reservedMs, round, signal)
    if (out || !V.retake || round >= 8) return out
    return (this.cuts ?? 0) > epoch // a cut since the slot was taken: take another
  }
  Gate.prototype.wait.patched = true
}

/**
 * respace: a caller's probe when it wakes for its slot (lib/doors/fetch/gate.js's wait(), for
 * a wait of RECHECK_MS or more) also sends its slot's start and when it was taken (nums[4],
 * nums[5], µs; the native core ignores them), and the record answers the slot re-spaced by the
 * cuts since (State.remap): the caller sleeps on to it and asks again. Patches
 * Gate.prototype.wait for the run (the rest of wait() as in gate.js).
 */
function patchRespace() {
  const { Gate } = require('../lib/doors/fetch/gate.js')
  if (Gate.prototype.wait.respaced) return
  const { nowMs, aborted } = require('../lib/classes/base')
  const { sleepUntil } = require('../lib/doors/fetch/slots')
  const PACE = require('../lib/kinds/adaptive.js').OP.pace
  const RECHECK_MS = 25
  const wait = Gate.prototype.wait
  Gate.prototype.wait = async function (delayMs, slot, reservedMs, round, signal) {
    if (!V.respace && !V.horizon) return wait.call(this, delayMs, slot, reservedMs, round, signal)
    const { store } = this.door
    if (V.horizon) {
      // horizon: the slot is known: the next caller of this process may ask
      this.lastHeld = Math.max(this.lastHeld ?? 0, slot.atMs)
    }
    if (delayMs > 0) {
      this.counts.waited++
      this.counts.waitTimeMs += delayMs
      const lead = V.lead ?? 0
      let long = delayMs >= RECHECK_MS
      let takenMs = reservedMs // as of when the slot's start is known (re-spaced: the last probe)
      for (let k = 0; ; k++) {
        const probing = long && k < 6
        const at = slot.atMs
        if (probing && lead > 0) slot.atMs = at - lead
        await sleepUntil(store, slot, signal, this.waiters)
        slot.atMs = at
        if (!probing) break
        const told = this.ok
        this.ok = 0
        const askedMs = nowMs(store)
        let nextAt = at
        try {
          const [dUs, , , blockUs] = await this._send([
            PACE,
            0,
            told,
            -1,
            Math.round((at - askedMs) * 1000),
            Math.max(1, Math.round((askedMs - takenMs) * 1000)),
          ])
          if (blockUs > 0) this.heardBlock(blockUs, askedMs)
          // (without respace the record answers the queue's tail: not this slot's start)
          if (V.respace) nextAt = askedMs + dUs / 1000
          takenMs = askedMs
        } catch {
          this.ok += told
          this.counts.errors++
        }
        if (nextAt <= at + 0.5) {
          // not moved: wait out the lead, if any
          if (at > nowMs(store) + 0.5) await sleepUntil(store, slot, signal, this.waiters)
          break
        }
        slot.atMs = nextAt
        long = nextAt - nowMs(store) >= RECHECK_MS
        if (!long && nextAt > nowMs(store) + 0.5) {
          await sleepUntil(store, slot, signal, this.waiters)
          break
        }
      }
    }
    if (this.blockSetMs >= reservedMs && this.blockedUntilMs > nowMs(store) && round < 8) {
      // horizon: a slot spent inside a block is taken again in the process's turn
      if (V.horizon) await this.turn()
      return true
    }
    if (this.paced) {
      const now = nowMs(store)
      const at = Math.max(now, this.nextSendMs)
      this.nextSendMs = at + 1000 / this.rate
      if (at > now + 1) {
        const turn = { atMs: at, rearm: null }
        try {
          await sleepUntil(store, turn, signal, this.turns)
        } catch (err) {
          this.freeTurn(turn.atMs)
          throw err
        }
      }
    }
    if (signal && signal.aborted) throw aborted(signal)
    return false
  }
  Gate.prototype.wait.respaced = true
  // horizon (ms): a process's callers ask for slots in order, and only while the latest slot
  // it holds (each ask under way counting a slot at the rate) starts within `horizon` of now;
  // the others wait their turn in the process (the record's queue is a horizon deep, not
  // every caller's slot). (Spares and aborts are not handled: the simulation has none.)
  const admit = Gate.prototype.admit
  Gate.prototype.admit = async function (signal) {
    if (!V.horizon) return admit.call(this, signal)
    await this.turn()
    return admit.call(this, signal)
  }
  /** horizon: resolves when this caller may ask for a slot (in order, within the horizon). */
  Gate.prototype.turn = function () {
    return new Promise((resolve) => {
      ;(this.lane ??= []).push(resolve)
      pump(this)
    })
  }
  const send = Gate.prototype._send
  Gate.prototype._send = function (head) {
    if (!V.horizon || head[0] !== PACE || head[1] !== 1) return send.call(this, head)
    const askedMs = nowMs(this.door.store)
    if (this.released > 0) this.released--
    this.asking = (this.asking ?? 0) + 1
    const out = send.call(this, head)
    const settle = (r) => {
      this.asking--
      if (r) this.lastHeld = Math.max(this.lastHeld ?? 0, askedMs + r[0] / 1000)
      pump(this)
    }
    out.then(settle, () => settle(null))
    return out
  }
  /** Lets the next callers of `gate` ask while its slots reach less than a horizon ahead. */
  function pump(gate) {
    const store = gate.door.store
    while (gate.lane && gate.lane.length > 0) {
      const now = nowMs(store)
      const inFlight = (gate.asking ?? 0) + (gate.released ?? 0)
      const ahead = Math.max(gate.lastHeld ?? 0, now) + inFlight * (1000 / gate.rate) - now
      if (ahead > V.horizon) {
        if (!gate.pumpTimer) {
          gate.pumpTimer = true
          sleepUntil(store, { atMs: now + Math.max(1, ahead - V.horizon), rearm: null }, null, []).then(() => {
            gate.pumpTimer = false
            pump(gate)
          })
        }
        return
      }
      gate.released = (gate.released ?? 0) + 1
      gate.lane.shift()()
    }
  }
}

/** Makes the MemoryStore's adaptive kind decide with this model, with `variant`'s switches. */
function install(variant = {}) {
  V = variant
  if (V.retake) patchGate()
  if (V.respace || V.horizon) patchRespace()
  const kind = require('../lib/kinds/adaptive.js')
  kind.memory = (store, c, degraded) => {
    const now = store._begin()
    const n = c.nums
    const key = c.owner._storeKey
    let s = states.get(key)
    if (s === undefined) states.set(key, (s = new State()))
    const p = { max: n[8], min: n[9], start: n[10], incAbs: n[11], incRel: n[12], dec: n[13], burst: n[14] }
    let r
    if (n[0] === kind.OP.pace) r = s.pace(p, n[1], n[2], n[15], n[3], now, { startIn: n[4], takenAgo: n[5] })
    else if (n[0] === kind.OP.report) {
      r = s.report(
        p,
        { ok: n[2], ago: n[15], tAgo: n[3], throttled: n[4] === 1, block: n[5], learned: n[6], ttl: n[7] },
        now,
      )
    } else r = s.give(p, n[1], Math.max(n[3], 0), now)
    // as the store answers: µs rounded up, the rate in milli-qps rounded down
    return [Math.ceil(r[0]), Math.floor(r[1] * 1000), r[2], Math.ceil(Math.max(0, s.bu - now)), degraded]
  }
}

/** Forgets every key (a new run). */
function reset() {
  states.clear()
}

module.exports = { install, reset }
