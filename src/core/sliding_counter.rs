//! Approximate sliding window ("sliding counter", as Cloudflare describes it): per window, two
//! counters, the calls of the current calendar window and of the one before it. The weight
//! in the sliding window ending now is estimated as `prev × (interval − elapsed) / interval +
//! curr`, where `elapsed` is how far into the current calendar window `now` is: the previous
//! window's calls are assumed to have been spread evenly over it. Several windows on one
//! name are decided together: a call is admitted only if every window's estimate has room for
//! its weight, and then it is charged to all of them; a refused call charges none.
//!
//! Bound: the estimate is never below `curr`, so the calls of one calendar window never
//! exceed the limit. Over a sliding window the estimate can be wrong in both directions when
//! the previous window's calls were bunched (at its end: more admitted than the limit; at its
//! start: fewer). State is two counters and a window start per window, whatever the limit.
//!
//! Units: time in integer µs since the epoch, windows aligned on multiples of their interval.
//! All arithmetic is on doubles in the order `lua/sliding_counter.lua` uses, so both decide
//! alike. The estimate only falls as time passes (at a calendar boundary `curr` becomes `prev`
//! at full weight), so a refused call's `retry_after_us` is exact: the first whole µs at
//! which every window has room (refused 1 µs before it, admitted at it).

use super::limit::{ttl_ms, MAX_DELAY_US};
use super::sliding::Window;

/// One window's counters.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Counter {
  /// Start of the calendar window `curr` counts, µs (a multiple of the interval).
  pub start_us: f64,
  /// Weight admitted in the calendar window before `start_us`.
  pub prev: f64,
  /// Weight admitted since `start_us`.
  pub curr: f64,
}

/// The state of one name: a counter per window, and the end of a block (µs; 0: never).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct State {
  pub counters: Vec<Counter>,
  pub blocked_until_us: f64,
}

/// What a call asks for.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Op {
  /// Charge `weight` to every window if all have room; otherwise charge nothing.
  Take,
  /// The answer a take would get, charging nothing.
  Peek,
  /// Drop the counters and any block: allowed, every window at its limit.
  Reset,
  /// Admit nobody for `us` µs from now (a later block in place is kept; the counts are kept):
  /// refused, no window's room reported, retry and reset no earlier than the block's end.
  Block { us: f64 },
  /// Charge `weight` to every window unconditionally; a negative weight refunds (from the
  /// previous calendar window first, never below zero).
  Adjust,
}

/// One window's answer.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct WindowDecision {
  /// Whole units the estimate leaves for later calls (≥ 0).
  pub remaining: f64,
  /// µs until this window has room for the weight (0 if it has now).
  pub retry_after_us: f64,
  /// µs until this window's estimate is back to 0.
  pub reset_after_us: f64,
}

/// A decision over several windows, as the sliding log's.
pub type Decision = super::sliding::Decision<WindowDecision>;

/// The counters of `c` as seen at `now_us`: rolled forward to the calendar window holding
/// `now_us`, or kept as they are if the clock stepped back before their window.
pub fn rolled(c: &Counter, interval_us: f64, now_us: f64) -> Counter {
  let start_us = (now_us / interval_us).floor() * interval_us;
  if start_us <= c.start_us {
    *c
  } else if start_us == c.start_us + interval_us {
    Counter { start_us, prev: c.curr, curr: 0.0 }
  } else {
    Counter { start_us, prev: 0.0, curr: 0.0 }
  }
}

/// The estimated weight of the sliding window ending at `now_us`.
pub fn estimate(c: &Counter, interval_us: f64, now_us: f64) -> f64 {
  let elapsed = (now_us - c.start_us).clamp(0.0, interval_us);
  c.prev * (interval_us - elapsed) / interval_us + c.curr
}

/// Whether `weight` fits window `w` at `now_us`, counters `c` already rolled to `now_us`'s window.
fn fits(c: &Counter, w: &Window, weight: f64, now_us: f64) -> bool {
  estimate(&rolled(c, w.interval_us, now_us), w.interval_us, now_us) + weight <= w.limit
}

/// µs from `now_us` until `weight` fits window `w` (0 if it fits now): the first whole µs at
/// which it fits, found from the closed form and corrected against [`fits`] itself, so that
/// rounding can never make it late or early.
fn retry_us(c: &Counter, w: &Window, weight: f64, now_us: f64) -> f64 {
  if fits(c, w, weight, now_us) {
    return 0.0;
  }
  if weight > w.limit {
    return MAX_DELAY_US;
  }
  let i = w.interval_us;
  let r = rolled(c, i, now_us);
  // in the current calendar window, prev's share must fall to `limit - weight - curr`
  let room = w.limit - weight - r.curr;
  let guess = if room >= 0.0 && r.prev > 0.0 {
    r.start_us + (i - room * i / r.prev).ceil()
  } else {
    // not before the next window: there `curr` is the previous count
    let next = r.start_us + i;
    let room = w.limit - weight;
    if r.curr > 0.0 {
      next + (i - room * i / r.curr).ceil().max(0.0)
    } else {
      next
    }
  };
  // the guess is exact but for rounding: confirm it against `fits` itself (the estimate only
  // falls with time), and search around it only if rounding moved it
  let at = guess.max(now_us + 1.0);
  let fits_at = |t: f64| fits(c, w, weight, t);
  if fits_at(at) && (at - 1.0 <= now_us || !fits_at(at - 1.0)) {
    return at - now_us;
  }
  let (mut lo, mut hi, mut step) = (now_us, at, 1.0);
  while !fits_at(hi) {
    lo = hi;
    hi += step;
    step *= 2.0;
  }
  while hi - lo > 1.0 {
    let mid = lo + ((hi - lo) / 2.0).floor();
    if fits_at(mid) {
      hi = mid;
    } else {
      lo = mid;
    }
  }
  hi - now_us
}

/// µs until the estimate of window `w` is 0 (counters rolled to `now_us`).
pub fn reset_us(c: &Counter, w: &Window, now_us: f64) -> f64 {
  let r = rolled(c, w.interval_us, now_us);
  if r.curr > 0.0 {
    r.start_us + 2.0 * w.interval_us - now_us
  } else if r.prev > 0.0 {
    r.start_us + w.interval_us - now_us
  } else {
    0.0
  }
}

impl State {
  /// The counter of window `i`, fresh if the state has none (the windows changed).
  fn counter(&self, i: usize) -> Counter {
    self.counters.get(i).copied().unwrap_or_default()
  }

  /// Blocks the name for `duration_us` from now (a later block is kept); the block's end.
  pub fn block(&mut self, duration_us: f64, now_us: f64) -> f64 {
    self.blocked_until_us = self.blocked_until_us.max(now_us + duration_us);
    self.blocked_until_us
  }

  /// Decides one call at `now_us`; a reset and a block as [`Op`] says. While blocked, takes
  /// and peeks are refused as a peek would be answered, with no room reported and no retry or
  /// reset before the block's end; adjustments apply as usual. The state then matters for
  /// [`State::ttl_ms`].
  pub fn step(&mut self, windows: &[Window], weight: f64, op: Op, now_us: f64) -> Decision {
    match op {
      Op::Reset => {
        *self = State::default();
        let idle = |w: &Window| WindowDecision { remaining: w.limit, retry_after_us: 0.0, reset_after_us: 0.0 };
        return Decision { allowed: true, retry_after_us: 0.0, windows: windows.iter().map(idle).collect() };
      }
      Op::Block { us } => {
        let left = self.block(us, now_us) - now_us;
        let windows = (windows.iter().enumerate())
          .map(|(i, w)| {
            let reset_after_us = reset_us(&self.counter(i), w, now_us).max(left);
            WindowDecision { remaining: 0.0, retry_after_us: left, reset_after_us }
          })
          .collect();
        return Decision { allowed: false, retry_after_us: left, windows };
      }
      Op::Take | Op::Peek | Op::Adjust => {}
    }
    let blocked = self.blocked_until_us > now_us && op != Op::Adjust;
    let op = if blocked { Op::Peek } else { op };
    let mut answers = Vec::with_capacity(windows.len());
    let mut allowed = true;
    for (i, w) in windows.iter().enumerate() {
      let c = self.counter(i);
      let ok = op == Op::Adjust || fits(&c, w, weight, now_us);
      allowed &= ok;
      answers.push(if ok { 0.0 } else { retry_us(&c, w, weight, now_us) });
    }
    let charge = op == Op::Adjust || (allowed && op == Op::Take && weight > 0.0);
    if charge {
      let counters = windows
        .iter()
        .enumerate()
        .map(|(i, w)| {
          let mut r = rolled(&self.counter(i), w.interval_us, now_us);
          if weight >= 0.0 {
            r.curr += weight;
          } else {
            // a refund comes off the previous window first: whichever window the refunded
            // call was charged to, the estimate falls by at most its weight (admits less,
            // never more); what the previous window lacks comes off the current one
            let from_prev = r.prev.min(-weight);
            r.prev -= from_prev;
            r.curr = (r.curr + weight + from_prev).max(0.0);
          }
          r
        })
        .collect();
      self.counters = counters;
    }
    let block_us = if blocked { (self.blocked_until_us - now_us).ceil() } else { 0.0 };
    let windows = windows
      .iter()
      .enumerate()
      .zip(answers)
      .map(|((i, w), retry_after_us)| {
        let c = rolled(&self.counter(i), w.interval_us, now_us);
        let left = (w.limit - estimate(&c, w.interval_us, now_us)).floor().max(0.0);
        WindowDecision {
          remaining: if blocked { 0.0 } else { left },
          retry_after_us: retry_after_us.max(block_us),
          reset_after_us: reset_us(&c, w, now_us).max(block_us),
        }
      })
      .collect::<Vec<_>>();
    let allowed = allowed && !blocked;
    let retry_after_us = if allowed { 0.0 } else { windows.iter().map(|d| d.retry_after_us).fold(0.0, f64::max) };
    Decision { allowed, retry_after_us, windows }
  }

  /// How long the state matters, ms (its TTL): until every window's estimate is 0 and any
  /// block has ended; `None` when nothing is counted or blocked.
  pub fn ttl_ms(&self, windows: &[Window], now_us: f64) -> Option<f64> {
    let counted = windows.iter().enumerate().map(|(i, w)| reset_us(&self.counter(i), w, now_us)).fold(0.0, f64::max);
    let span = counted.max(self.blocked_until_us - now_us);
    (span > 0.0).then(|| ttl_ms(span))
  }
}

/// The index of the window that describes a decision: the one that refuses longest, or when
/// admitted the one with the least room left (the first on ties).
pub fn most_restrictive(d: &Decision) -> usize {
  let mut best = 0;
  for (i, w) in d.windows.iter().enumerate().skip(1) {
    let b = &d.windows[best];
    let worse = if d.allowed { w.remaining < b.remaining } else { w.retry_after_us > b.retry_after_us };
    if worse {
      best = i;
    }
  }
  best
}

#[cfg(test)]
mod tests {
  use super::super::sliding::testing::*;
  use super::*;
  use proptest::prelude::*;

  #[test]
  fn weighs_the_previous_window_by_its_overlap() {
    let windows = [w(10.0, 1.0)];
    let mut s = State::default();
    for _ in 0..10 {
      assert!(s.step(&windows, 1.0, Op::Take, 0.5 * S).allowed);
    }
    assert!(!s.step(&windows, 1.0, Op::Take, 0.9 * S).allowed, "the calendar window is full");
    // at 1.25 s the previous window still weighs 10 × 0.75 = 7.5: 2 more fit, not 3
    let d = s.step(&windows, 2.0, Op::Take, 1.25 * S);
    assert!(d.allowed);
    assert_eq!(d.windows[0].remaining, 0.0);
    let d = s.step(&windows, 1.0, Op::Take, 1.25 * S);
    assert!(!d.allowed);
    // 10 × (1 − e) + 2 + 1 ≤ 10 ⇔ e ≥ 0.3: at 1.3 s
    assert_eq!(d.retry_after_us, 0.05 * S);
    assert!(!s.step(&windows, 1.0, Op::Peek, 1.3 * S - 1.0).allowed, "refused just before");
    assert!(s.step(&windows, 1.0, Op::Take, 1.3 * S).allowed, "admitted at retryAfter");
  }

  #[test]
  fn several_windows_are_all_or_nothing_and_report_each() {
    let windows = [w(2.0, 1.0), w(3.0, 10.0)];
    let mut s = State::default();
    assert!(s.step(&windows, 1.0, Op::Take, 0.0).allowed);
    assert!(s.step(&windows, 1.0, Op::Take, 1.0).allowed);
    let d = s.step(&windows, 1.0, Op::Take, 2.0);
    assert!(!d.allowed);
    assert_eq!(d.windows[1].remaining, 1.0, "the refused call charged neither window");
    assert_eq!(most_restrictive(&d), 0);
    // next second: the 1 s window's previous count weighs 2 × (1 − e); a call fits at e = 0.5
    assert_eq!(d.retry_after_us, 1.5 * S - 2.0);
    assert!(s.step(&windows, 1.0, Op::Take, 1.5 * S).allowed);
    let d = s.step(&windows, 1.0, Op::Take, 5.0 * S);
    assert!(!d.allowed, "the 10 s window holds 3");
    assert_eq!(most_restrictive(&d), 1);
    // 3 × (1 − e / 10 s) + 1 ≤ 3 from e = 3,333,334 µs into the next 10 s window
    assert_eq!(d.retry_after_us, 10.0 * S + 3_333_334.0 - 5.0 * S);
  }

  #[test]
  fn peek_and_weight_zero_change_nothing_adjust_refunds_and_a_block_refuses() {
    let windows = [w(3.0, 1.0)];
    let mut s = State::default();
    assert!(s.step(&windows, 1.0, Op::Peek, 0.0).allowed);
    assert!(s.step(&windows, 0.0, Op::Take, 0.0).allowed);
    assert_eq!(s, State::default());
    s.step(&windows, 2.0, Op::Take, 0.0);
    s.step(&windows, -1.0, Op::Adjust, 1.0);
    assert_eq!(s.counters[0].curr, 1.0);
    s.step(&windows, 2.0, Op::Take, S);
    s.step(&windows, -2.0, Op::Adjust, S + 1.0);
    assert_eq!((s.counters[0].prev, s.counters[0].curr), (0.0, 1.0), "the previous window first");
    s.step(&windows, -5.0, Op::Adjust, S + 1.0);
    assert_eq!((s.counters[0].prev, s.counters[0].curr), (0.0, 0.0), "never below zero");
    assert_eq!(s.block(2.0 * S, S + 1.0), 3.0 * S + 1.0);
    let d = s.step(&windows, 1.0, Op::Take, S + 2.0);
    assert!(!d.allowed);
    assert_eq!(d.windows[0].remaining, 0.0);
    assert_eq!(d.retry_after_us, 2.0 * S - 1.0);
    assert!(s.step(&windows, 1.0, Op::Take, 3.0 * S + 1.0).allowed);
    assert_eq!(s.ttl_ms(&windows, 3.0 * S + 1.0), Some(2.0 * S / 1000.0));
  }

  #[test]
  fn a_stale_state_counts_nothing_and_a_clock_step_back_keeps_the_counts() {
    let windows = [w(1.0, 1.0)];
    let mut s = State::default();
    assert!(s.step(&windows, 1.0, Op::Take, 5.0 * S).allowed);
    assert!(!s.step(&windows, 1.0, Op::Take, 4.0 * S).allowed, "an earlier clock still sees the count");
    assert!(s.step(&windows, 1.0, Op::Take, 7.0 * S).allowed);
    assert_eq!(s.ttl_ms(&windows, 10.0 * S), None);
  }

  proptest! {
    /// Every calendar window of every limit admits at most its limit; a refused call's
    /// retryAfter is exact (refused 1 µs before, admitted at it).
    #[test]
    fn never_exceeds_a_calendar_window_and_retry_after_is_exact(
      ops in proptest::collection::vec((0u32..4, 0u64..400_000), 1..120),
      limits in (1u32..6, 1u32..12),
    ) {
      let take = |s: &mut State, windows: &[Window], weight: f64, now: f64| {
        let d = s.step(windows, weight, Op::Take, now);
        (d.allowed, d.retry_after_us)
      };
      // a calendar window counts from the multiple of its interval at or before now
      takes_hold_their_windows(ops, limits, take, |t, now, win| t >= (now / win.interval_us).floor() * win.interval_us)?;
    }
  }
}
