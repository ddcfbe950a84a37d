//! The adaptive rate (sluice/fetch's `adaptive` option and what a response taught): one record
//! per key, shared by every process, that owns the key's rate, its pacing queue and its block.
//!
//! - `pace` reserves the next slot: it starts at the latest of the queue's tail, now less
//!   `burst / rate` seconds, and the block's end (at once when that is not in the future), and
//!   moves the tail by `weight / rate` seconds. With `max_wait_us` >= 0 a slot further away
//!   than that is refused and nothing is charged.
//! - `give` gives back a slot a caller will not use (aborted, timed out or refused by its own
//!   deadline before the slot started) while it is the last one queued: the tail moves back by
//!   the slot's width, never before now, so the next caller takes its place. Nothing else
//!   changes.
//! - Both calls take the successes a process saw since it last told (`ok`, the latest of their
//!   calls sent `sent_ago_us` ago; sluice/fetch tells them as they come). They are counted in
//!   one-second windows that run through blocks (what was *served* is the last second's count,
//!   a sliding estimate), and in the current *cycle* when their call was sent in it. Each
//!   raises the rate by its share (`1 / rate` s) of a second's climb, `inc_abs + rate *
//!   inc_rel`, fast (`FAST_INC_REL`) while there is no mark or the rate is under 0.9 of it,
//!   never during a back-off period or a plateau, and never while the rate is more than
//!   `INC_CAP` times what calls are served.
//! - `report` records what a response said: a block (`block_us`; while one is under way it is
//!   extended only when the new end is a second or more past it), a learned rate (a ceiling
//!   until `learned_ttl_us` from now), and a throttled answer, which lowers the rate once per
//!   back-off period (the block, at least a second):
//!   - when the upstream stated its limit (a learned rate in force), to `(1 - decrease)` times
//!     the lower of the rate and that, with a plateau of `PLATEAU_US`;
//!   - else it ends a *cycle* (`cycle.rs`): from the last decrease, the back-off period then
//!     `f` seconds of calls until the refused call was sent, `S` successes of calls sent in
//!     it. A fresh record's first refusal reads `S` as the upstream's burst (`be`) and cuts to
//!     the geometric middle of the rate and what was served (by half at least, by `BLIND` at
//!     most), to climb fast from there. Later ones settle `decrease` under the largest of
//!     `S / (block + f)`, `(S - be + 1) / f` (a bucket: the refused call bounds its rate), the
//!     last second's count (less `be` once two cycles of different lengths fitted a bucket,
//!     `b + r f`, which also lowers `be`; a fit that reads a window drops the burst term), and,
//!     after a climb of a tenth over a second of calls or more, the rate the refused call's
//!     slot was handed out at (`sendq`, at most 1.2 times what was served), then hold for
//!     `PLATEAU_US`. A cycle shorter than `max(0.2 s, 4 / rate)` measures nothing: the rate
//!     comes down by `decrease` only, or, when the last second served under `1 / BLIND` of
//!     it (a burst, the rest refused), to the geometric middle as at the first refusal (not in
//!     the model's best variant: its `shortBlind`, which brings a start 100 x over the limit
//!     down in a few blocks and changes no cell of the grid).
//! - A slot may use the burst `min(burst, be - 1)` once the upstream's burst is estimated.
//! - The rate stays in `[min_qps, ceiling]`, the ceiling being `max_qps` or a learned rate below
//!   it (which wins over `min_qps`).
//!
//! State (µs, qps): rate, tail, block end, hold end (back-off period), climb start (plateau
//! end), success window start, successes in it and in the previous one, creation, learned
//! rate and its end, mark; the cycle's start, its successes, the burst estimate, the rate at
//! the cycle's start, whether the last fit read a bucket; the last `CYCLES` cycles' `(S, f)`
//! and the queue's rate history (`SENDQ` pairs `(t, r)`: slots from `t` on were handed out at
//! `r`). Mirrored by `lua/adaptive.lua` (`RECORD` packed doubles). The rule was found in the JS
//! model (bench/adaptive-model.js, BENCHMARKS.md issue 36 item 4).

mod cycle;

pub use cycle::{CYCLES, RECORD, SENDQ, SENDQ_DT_US};

/// One second, µs: the success window and the shortest back-off period.
pub const SECOND_US: f64 = 1_000_000.0;
/// How long a record is kept after the last time it matters (its rate is remembered), µs.
pub const KEEP_US: f64 = 600.0 * SECOND_US;
/// The success window, µs: what was served is the last one's count (sliding).
pub const WINDOW_US: f64 = 1_000_000.0;
/// How long a rate that settled under a measured limit holds before it climbs again (a probe
/// above the limit costs the fleet a block), µs.
pub const PLATEAU_US: f64 = 30.0 * SECOND_US;
/// The rate climbs only while it is at most this many times the served rate.
pub const INC_CAP: f64 = 1.5;
/// A throttled answer when the upstream served less than `1 / BLIND` of the rate over the last
/// second says only that the rate is too high (a burst was served, then refused).
pub const BLIND: f64 = 16.0;

/// The rate's settings, per call (a call may change them: they are the caller's options).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Params {
  pub max_qps: f64,
  pub min_qps: f64,
  pub start_qps: f64,
  pub inc_abs: f64,
  pub inc_rel: f64,
  pub decrease: f64,
  /// Calls that may start at once after a quiet spell (the queue's tail may lag now by
  /// `burst / rate` seconds); a block spends it.
  pub burst: f64,
}

/// A key's record. `rate == 0` means fresh (made on first use).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct State {
  pub rate: f64,
  pub tail_us: f64,
  pub block_until_us: f64,
  pub hold_until_us: f64,
  /// No climb before this (a plateau's end).
  pub last_inc_us: f64,
  pub win_start_us: f64,
  pub cur_ok: f64,
  pub prev_ok: f64,
  pub created_us: f64,
  pub learned_qps: f64,
  pub learned_until_us: f64,
  /// What the upstream served when the last measured decrease came (0: none, or a cut that
  /// measured nothing since): below 0.9 of it the rate climbs fast (`FAST_INC_REL`), above it
  /// it probes slowly.
  pub mark: f64,
  /// The cycle's start (creation, then each decrease), µs.
  pub cs_us: f64,
  /// Successes of calls sent at or after `cs_us`.
  pub cok: f64,
  /// The upstream's burst, as estimated (-1: none yet).
  pub be: f64,
  /// The rate at the cycle's start.
  pub r0: f64,
  /// 1 when the last fit of two cycles read a bucket, else 0.
  pub bucket_fit: f64,
  /// The last `CYCLES` cycles' `(S, f)` pairs (successes, µs of calls), oldest first.
  pub cyc: [f64; 2 * CYCLES],
  pub cyc_n: f64,
  /// The queue's rate history: `(t, r)` pairs (slots from `t` on were handed out at `r`),
  /// oldest first, at most `SENDQ`, one per `SENDQ_DT_US` (the last one's rate updated meanwhile).
  pub sendq: [f64; 2 * SENDQ],
  pub sendq_n: f64,
}

/// The climb per second, as a share of the rate, before the first measured decrease and while
/// the rate is below 0.9 of its mark.
pub const FAST_INC_REL: f64 = 0.25;

/// What `pace` answers: µs until the slot, the rate, and whether the slot was taken.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Slot {
  pub delay_us: f64,
  pub rate: f64,
  pub admitted: bool,
}

/// What a response said, as `report` takes it: throttled or not, the successes told with it
/// (`ok`, the latest of their calls sent `sent_ago_us` ago), a block (µs), a learned rate and
/// how long it holds (µs).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Answer {
  pub throttled: bool,
  pub ok: f64,
  pub sent_ago_us: f64,
  pub block_us: f64,
  pub learned_qps: f64,
  pub learned_ttl_us: f64,
  /// A throttled answer: how long ago its call was sent, µs (-1: unknown, now).
  pub sent_t_ago_us: f64,
}

/// What `report` answers: µs until the block ends (0: none), the rate, and whether it was lowered.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Reported {
  pub block_us: f64,
  pub rate: f64,
  pub decreased: bool,
}

impl State {
  fn init(&mut self, p: &Params, now_us: f64) {
    if self.rate > 0.0 {
      return;
    }
    *self = State {
      rate: p.start_qps,
      tail_us: 0.0, // long ago: a fresh key has its whole burst
      last_inc_us: now_us,
      win_start_us: now_us,
      created_us: now_us,
      cs_us: now_us,
      be: -1.0,
      r0: p.start_qps,
      sendq_n: 1.0,
      ..State::default()
    };
    self.sendq[0] = now_us;
    self.sendq[1] = p.start_qps;
  }

  /// The highest rate allowed now.
  pub fn ceiling(&self, p: &Params, now_us: f64) -> f64 {
    if self.learned_qps > 0.0 && self.learned_until_us > now_us {
      p.max_qps.min(self.learned_qps)
    } else {
      p.max_qps
    }
  }

  fn clamp(&mut self, p: &Params, now_us: f64) {
    self.rate = self.rate.max(p.min_qps).min(self.ceiling(p, now_us));
  }

  /// Moves the one-second success windows up to `now_us` (aligned to the record's creation;
  /// they run through blocks: a block's time counts as time in which nothing was served).
  fn roll(&mut self, now_us: f64) {
    if now_us >= self.win_start_us + 2.0 * WINDOW_US {
      self.prev_ok = 0.0;
      self.cur_ok = 0.0;
      self.win_start_us += ((now_us - self.win_start_us) / WINDOW_US).floor() * WINDOW_US;
    } else if now_us >= self.win_start_us + WINDOW_US {
      self.prev_ok = self.cur_ok;
      self.cur_ok = 0.0;
      self.win_start_us += WINDOW_US;
    }
  }

  /// Successes per second over the last second (the previous window weighted by its share of
  /// it, as a sliding counter estimates), blocks included.
  pub fn served(&self, now_us: f64) -> f64 {
    let into = ((now_us - self.win_start_us) / WINDOW_US).clamp(0.0, 1.0);
    (self.prev_ok * (1.0 - into) + self.cur_ok) * SECOND_US / WINDOW_US
  }

  /// Takes the successes a process saw since it last told (with a pace or a report), the latest
  /// of their calls sent `sent_ago_us` ago: the cycle's when that call was sent in it; they
  /// count in the current window and, outside a back-off period and a plateau, raise the rate:
  /// each by its share (`1 / rate` s) of a second's climb, `inc_abs + rate * inc_rel` (fast,
  /// `FAST_INC_REL`, with no mark or under 0.9 of it), so the rate climbs as fast as calls
  /// that succeed use it, and never while it is more than `INC_CAP` times what is served.
  fn count_ok(&mut self, p: &Params, ok: f64, sent_ago_us: f64, now_us: f64) {
    if ok <= 0.0 {
      return;
    }
    if now_us - sent_ago_us >= self.cs_us {
      self.cok += ok;
    }
    self.cur_ok += ok;
    if now_us >= self.hold_until_us && now_us >= self.last_inc_us && self.rate < INC_CAP * self.flow_served(now_us) {
      let rel = if self.mark <= 0.0 || self.rate < 0.9 * self.mark { FAST_INC_REL } else { p.inc_rel };
      self.rate += (p.inc_abs + self.rate * rel) * (ok / self.rate).min(1.0);
    }
  }

  /// Successes per second while calls flowed: the last second's, over the part of it since the
  /// record was made or the last back-off period ended (a tenth of a second at least).
  fn flow_served(&self, now_us: f64) -> f64 {
    let flowing = (now_us - self.hold_until_us.max(self.created_us)).clamp(WINDOW_US / 10.0, WINDOW_US);
    self.served(now_us) * WINDOW_US / flowing
  }

  /// Reserves a slot for `weight` (see the module docs).
  pub fn pace(&mut self, p: &Params, weight: f64, ok: f64, sent_ago_us: f64, max_wait_us: f64, now_us: f64) -> Slot {
    self.init(p, now_us);
    self.roll(now_us);
    self.count_ok(p, ok, sent_ago_us, now_us);
    self.clamp(p, now_us);
    // once the upstream's burst is estimated, a slot uses no more of it than that, less one
    let burst = if self.be >= 0.0 { p.burst.min((self.be - 1.0).max(0.0)) } else { p.burst };
    let start = self.tail_us.max(now_us - burst * SECOND_US / self.rate).max(self.block_until_us);
    let delay_us = (start - now_us).max(0.0);
    if max_wait_us >= 0.0 && delay_us > max_wait_us {
      return Slot { delay_us, rate: self.rate, admitted: false };
    }
    self.tail_us = start + weight * SECOND_US / self.rate;
    self.hand_out(start, now_us);
    Slot { delay_us, rate: self.rate, admitted: true }
  }

  /// Gives back a slot of `weight` that `pace` reserved and its caller will not use (it gave
  /// up before the slot started), exactly: only while it is the last one queued (the tail is
  /// its end: its start `start_in_us` from now, as the caller estimates it, plus its width at
  /// the rate, within half the width or 1 ms), the tail moving back by its width (never before
  /// now), so that the next caller takes its place. A slot with later ones after it stays
  /// spent (taking it back would let the next caller start with the last one queued; the
  /// caller's process keeps it for its own next call). Nothing else changes; `admitted`:
  /// given back.
  pub fn give(&mut self, p: &Params, weight: f64, start_in_us: f64, now_us: f64) -> Slot {
    self.init(p, now_us);
    self.roll(now_us);
    let width = weight * SECOND_US / self.rate;
    let tolerance = (width / 2.0).min(1000.0);
    let given = self.tail_us > now_us && (self.tail_us - (now_us + start_in_us + width)).abs() <= tolerance;
    if given {
      self.tail_us = (self.tail_us - width).max(now_us);
    }
    Slot { delay_us: 0.0, rate: self.rate, admitted: given }
  }

  /// Records what a response said (see the module docs).
  pub fn report(&mut self, p: &Params, a: &Answer, now_us: f64) -> Reported {
    let Answer { throttled, ok, sent_ago_us, block_us, learned_qps, learned_ttl_us, sent_t_ago_us } = *a;
    self.init(p, now_us);
    self.roll(now_us);
    self.count_ok(p, ok, sent_ago_us, now_us);
    if learned_qps > 0.0 {
      self.learned_qps = learned_qps;
      self.learned_until_us = now_us + learned_ttl_us;
    }
    // a block under way is extended only by a second or more: the 429s of calls already on
    // their way when it began (from every process) repeat it, they do not stack on it
    if block_us > 0.0
      && now_us + block_us > self.block_until_us.max(now_us) + SECOND_US * f64::from(self.block_until_us > now_us)
    {
      self.block_until_us = now_us + block_us;
    }
    let mut decreased = false;
    if throttled && now_us >= self.hold_until_us {
      let served = self.served(now_us);
      let learned = if self.learned_until_us > now_us { self.learned_qps } else { 0.0 };
      let plateau = if learned > 0.0 {
        // the upstream stated its limit (and the door paces under it): settle under it
        self.mark = self.rate.min(learned);
        self.rate = self.mark * (1.0 - p.decrease);
        PLATEAU_US
      } else {
        // no stated limit: the throttled answer ends a cycle (cycle.rs)
        self.end_cycle(p, served, sent_t_ago_us, now_us)
      };
      self.hold_until_us = now_us + block_us.max(SECOND_US);
      self.last_inc_us = self.hold_until_us + plateau;
      // the next measure counts from here: the back-off period as time in which nothing was
      // served, then what the next calls are served (not spread evenly over a window that
      // held the calls before it)
      self.prev_ok = 0.0;
      self.cur_ok = 0.0;
      self.win_start_us = now_us;
      decreased = true;
    }
    self.clamp(p, now_us);
    Reported { block_us: (self.block_until_us - now_us).max(0.0), rate: self.rate, decreased }
  }

  /// When the record may be dropped, µs: `KEEP_US` after the latest time it still matters.
  pub fn expires_us(&self, now_us: f64) -> f64 {
    let last = now_us
      .max(self.tail_us)
      .max(self.block_until_us)
      .max(self.hold_until_us)
      .max(self.learned_until_us.min(now_us + KEEP_US));
    last + KEEP_US
  }
}

#[cfg(test)]
mod tests;
