//! The adaptive rate (sluice/fetch's `adaptive` option and what a response taught): one record
//! per key, shared by every process, that owns the key's rate, its pacing queue and its block.
//!
//! - `pace` reserves the next slot: it starts at the latest of the queue's tail, now less
//!   `burst / rate` seconds, and the block's end (at once when that is not in the future), and
//!   moves the tail by `weight / rate` seconds. With `max_wait_us` >= 0 a slot
//!   further away than that is refused and nothing is charged. It also takes the successes a
//!   process saw since its last call (`ok`): they are counted in half-second windows (the
//!   served rate, over the last one or two of them while calls flow: the first call after a
//!   back-off period restarts the count at its end) and, outside a back-off period, raise the rate by `inc_abs + rate * inc_rel`
//!   per second of calls that succeed.
//! - `report` records what a response said: a block (`block_us`; while one is under way it is
//!   extended only when the new end is a second or more past it: the 429s of calls already on
//!   their way repeat the block, they never add up), a learned rate (a ceiling until `learned_ttl_us` from now), and a throttled
//!   answer, which lowers the rate once per back-off period to `(1 - decrease)` times the lower
//!   of the rate and the served rate measured over the last half second or so (its `mark`), so the
//!   fleet settles just under the upstream's limit instead of halving and climbing back (AIMD);
//!   a throttled answer less than half a second after calls started flowing (no served rate to go
//!   by yet) halves the rate, never below where the last measured decrease settled. The period is the block, at least one second; increases wait for
//!   it to end, and climb fast (a quarter of the rate per second) until there is a mark and
//!   while the rate is under 0.9 of it.
//! - The rate stays in `[min_qps, ceiling]`, the ceiling being `max_qps` or a learned rate below
//!   it (which wins over `min_qps`).
//!
//! State (µs, qps): rate, tail, block end, hold end (back-off period), last increase, success
//! window start, successes in it and in the previous one, creation, learned rate and its end,
//! mark. Mirrored by `lua/adaptive.lua` (12 packed doubles).

/// One second, µs: the success window and the shortest back-off period.
pub const SECOND_US: f64 = 1_000_000.0;
/// How long a record is kept after the last time it matters (its rate is remembered), µs.
pub const KEEP_US: f64 = 600.0 * SECOND_US;
/// The success window, µs: the served rate is measured over the last one or two of them.
pub const WINDOW_US: f64 = 500_000.0;

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
  pub last_inc_us: f64,
  pub win_start_us: f64,
  pub cur_ok: f64,
  pub prev_ok: f64,
  pub created_us: f64,
  pub learned_qps: f64,
  pub learned_until_us: f64,
  /// The served rate the last measured decrease started from (0: none yet): below 0.9 of it the
  /// rate climbs fast (`FAST_INC_REL`), above it it probes slowly.
  pub mark: f64,
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
      ..State::default()
    };
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

  /// Moves the one-second success window up to `now_us`. The first call after a back-off
  /// period restarts it at the period's end: the served rate is measured while calls flow,
  /// never over a block (which would settle the rate under the upstream's limit).
  fn roll(&mut self, now_us: f64) {
    if self.hold_until_us > self.win_start_us && now_us >= self.hold_until_us {
      self.prev_ok = 0.0;
      self.cur_ok = 0.0;
      self.win_start_us = self.hold_until_us;
    }
    if now_us >= self.win_start_us + 2.0 * WINDOW_US {
      self.prev_ok = 0.0;
      self.cur_ok = 0.0;
      self.win_start_us = now_us;
    } else if now_us >= self.win_start_us + WINDOW_US {
      self.prev_ok = self.cur_ok;
      self.cur_ok = 0.0;
      self.win_start_us += WINDOW_US;
    }
  }

  /// Successes per second over the last second or so since calls started flowing (0: none
  /// measured).
  pub fn served(&self, now_us: f64) -> f64 {
    let flowing = now_us - self.created_us.max(self.hold_until_us);
    let span = flowing.min(WINDOW_US + (now_us - self.win_start_us));
    (self.prev_ok + self.cur_ok) / (span / SECOND_US).max(0.25)
  }

  /// Reserves a slot for `weight` (see the module docs).
  pub fn pace(&mut self, p: &Params, weight: f64, ok: f64, max_wait_us: f64, now_us: f64) -> Slot {
    self.init(p, now_us);
    self.roll(now_us);
    self.cur_ok += ok;
    if ok > 0.0 && now_us >= self.hold_until_us {
      let dt = (now_us - self.last_inc_us).clamp(0.0, SECOND_US);
      let rel = if self.mark == 0.0 || self.rate < 0.9 * self.mark { FAST_INC_REL } else { p.inc_rel };
      self.rate += (p.inc_abs + self.rate * rel) * dt / SECOND_US;
    }
    if now_us > self.last_inc_us {
      self.last_inc_us = now_us;
    }
    self.clamp(p, now_us);
    let start = self.tail_us.max(now_us - p.burst * SECOND_US / self.rate).max(self.block_until_us);
    let delay_us = (start - now_us).max(0.0);
    if max_wait_us >= 0.0 && delay_us > max_wait_us {
      return Slot { delay_us, rate: self.rate, admitted: false };
    }
    self.tail_us = start + weight * SECOND_US / self.rate;
    Slot { delay_us, rate: self.rate, admitted: true }
  }

  /// Records what a response said (see the module docs).
  pub fn report(
    &mut self,
    p: &Params,
    throttled: bool,
    block_us: f64,
    learned_qps: f64,
    learned_ttl_us: f64,
    now_us: f64,
  ) -> Reported {
    self.init(p, now_us);
    self.roll(now_us);
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
      // the served rate means something after a second of calls flowing (no block, no hold):
      // settle under it; before that, only that the rate is too high: halve it
      let served = self.served(now_us);
      if now_us - self.created_us.max(self.hold_until_us) >= WINDOW_US && served > 0.0 {
        self.mark = self.rate.min(served);
        self.rate = self.mark * (1.0 - p.decrease);
      } else {
        // never below where the last measured decrease settled
        self.rate = (self.rate * 0.5).max(self.mark * (1.0 - p.decrease)).min(self.rate);
      }
      self.hold_until_us = now_us + block_us.max(SECOND_US);
      self.last_inc_us = self.hold_until_us;
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
mod tests {
  use super::*;

  const P: Params =
    Params { max_qps: 100.0, min_qps: 1.0, start_qps: 50.0, inc_abs: 0.0, inc_rel: 0.01, decrease: 0.1, burst: 0.0 };

  #[test]
  fn paces_at_the_rate_from_start_qps() {
    let mut s = State::default();
    let a = s.pace(&P, 1.0, 0.0, -1.0, 0.0);
    let b = s.pace(&P, 1.0, 0.0, -1.0, 0.0);
    assert_eq!((a.delay_us, a.rate, b.delay_us), (0.0, 50.0, 20_000.0));
  }

  #[test]
  fn a_burst_starts_at_once_after_a_quiet_spell_and_a_block_spends_it() {
    let p = Params { burst: 2.0, ..P };
    let mut s = State::default();
    let delays: Vec<f64> = (0..4).map(|_| s.pace(&p, 1.0, 0.0, -1.0, 1e6).delay_us).collect();
    assert_eq!(delays, [0.0, 0.0, 0.0, 20_000.0]);
    s.report(&p, false, 1e6, 0.0, 0.0, 10e6);
    let after: Vec<f64> = (0..2).map(|_| s.pace(&p, 1.0, 0.0, -1.0, 11e6).delay_us).collect();
    assert_eq!(after, [0.0, 20_000.0]);
  }

  #[test]
  fn refuses_a_slot_past_max_wait_without_charging() {
    let mut s = State::default();
    s.pace(&P, 1.0, 0.0, -1.0, 0.0);
    let refused = s.pace(&P, 1.0, 0.0, 10_000.0, 0.0);
    assert!(!refused.admitted);
    assert_eq!(s.pace(&P, 1.0, 0.0, -1.0, 0.0).delay_us, 20_000.0);
  }

  #[test]
  fn blocks_extend_and_never_add_up() {
    let mut s = State::default();
    assert_eq!(s.report(&P, false, 5e6, 0.0, 0.0, 0.0).block_us, 5e6);
    assert_eq!(s.report(&P, false, 5e6, 0.0, 0.0, 1000.0).block_us, 5e6 - 1000.0);
    assert_eq!(s.report(&P, false, 1e6, 0.0, 0.0, 2000.0).block_us, 5e6 - 2000.0);
    assert_eq!(s.pace(&P, 1.0, 0.0, -1.0, 2000.0).delay_us, 5e6 - 2000.0);
    // a second or more past the end: extended (an upstream that asks for longer)
    assert_eq!(s.report(&P, false, 7e6, 0.0, 0.0, 3000.0).block_us, 7e6);
    // after it: a new block
    assert_eq!(s.report(&P, false, 1e6, 0.0, 0.0, 20e6).block_us, 1e6);
  }

  #[test]
  fn a_throttled_answer_settles_under_the_served_rate_once_per_period() {
    let mut s = State::default();
    s.pace(&P, 1.0, 0.0, -1.0, 0.0);
    // 40 served per second for two seconds, at a rate of 50
    for i in 1..=80 {
      s.pace(&P, 1.0, 1.0, -1.0, i as f64 * 25_000.0);
    }
    let r = s.report(&P, true, 1e6, 0.0, 0.0, 2e6);
    assert!(r.decreased);
    // 0.9 x the ~40/s served, measured over the last half second or so (one success more or
    // less there is 2/s)
    assert!((r.rate - 36.0).abs() < 2.0, "{r:?}");
    assert!((s.mark - 40.0).abs() <= 2.0, "{}", s.mark);
    let again = s.report(&P, true, 1e6, 0.0, 0.0, 2.5e6);
    assert!(!again.decreased);
    assert_eq!(again.rate, r.rate);
  }

  #[test]
  fn the_served_rate_is_measured_while_calls_flow_never_over_a_block() {
    let mut s = State::default();
    // created at 0.5 s (the success window's phase), 40 served per second until 2.5 s
    s.pace(&P, 1.0, 0.0, -1.0, 0.5e6);
    for i in 1..=80 {
      s.pace(&P, 1.0, 1.0, -1.0, 0.5e6 + i as f64 * 25_000.0);
    }
    assert!(s.report(&P, true, 1.25e6, 0.0, 0.0, 2.5e6).decreased); // hold (and block) until 3.75 s
                                                                    // then 30 served per second for 1.2 s: the success window, still in its phase, would
                                                                    // count a quarter of a second of the block in its previous second
    for i in 1..=36 {
      s.pace(&P, 1.0, 1.0, -1.0, 3.75e6 + i as f64 * 1e6 / 30.0);
    }
    let r = s.report(&P, true, 1e6, 0.0, 0.0, 4.95e6);
    assert!(r.decreased);
    assert!((s.mark - 30.0).abs() < 1.5, "mark {} (served while flowing: 30)", s.mark);
  }

  #[test]
  fn successes_raise_the_rate_after_the_hold_up_to_the_ceiling() {
    let mut s = State::default();
    s.report(&P, true, 1e6, 0.0, 0.0, 0.0); // no served rate yet: 50 -> 25, hold 1 s
    let held = s.pace(&P, 1.0, 1.0, -1.0, 500_000.0).rate;
    assert_eq!(held, 25.0);
    let mut rate = held;
    for i in 1..=600 {
      rate = s.pace(&P, 1.0, 1.0, -1.0, 1e6 + i as f64 * 1e6).rate;
    }
    assert_eq!(rate, 100.0);
  }

  #[test]
  fn a_learned_rate_is_a_ceiling_until_it_expires_and_wins_over_min_qps() {
    let mut s = State::default();
    s.report(&P, false, 0.0, 0.5, 10e6, 0.0);
    assert_eq!(s.pace(&P, 1.0, 0.0, -1.0, 0.0).rate, 0.5);
    assert_eq!(s.ceiling(&P, 10e6), 100.0);
  }
}
