//! Sliding-window limiter: any number of exact sliding windows on one name (say 25 per 5 s
//! and 300 per 60 s), decided and charged together: a call is admitted only if every window
//! has room for its weight, and then it is charged to all of them; a refused call charges
//! none (the two-window script this generalises charged the windows that still had room).
//!
//! State: a sliding log of admitted calls, oldest first, each `(at_us, before, weight)`:
//! when it was admitted, the total weight admitted before it (a running sum), and its
//! weight. A window of `interval` covers `(now - interval, now]`: a call exactly `interval`
//! old has left it. The weight in a window is `total - before` of its oldest call, so a
//! decision costs one lookup per window, whatever the weights. A call's time is
//! `max(now, newest)`, so the log stays in order even if the clock steps back.
//!
//! Every call first drops the calls that have left the longest window, so the log holds at
//! most the longest window's limit in calls (each admitted call weighs at least 1; weight-0
//! calls are not logged). `retryAfter` of a window that refuses is exact: the time until
//! enough of its oldest calls have left it for the weight to fit; the call's `retryAfter`
//! is the largest over the windows that refuse (each window's room only grows with time).
//!
//! The running sum is rebased to 0 when it passes [`REBASE_AT`] (decisions use differences
//! only), so it stays an exact integer in a double. Mirrored by `lua/sliding.lua`: a sorted
//! set per name, score = `at_us`, member = `before` (17 digits, so equal scores sort in log
//! order) `:` weight.

use super::limit::MAX_DELAY_US;
use std::collections::VecDeque;

/// When the running sum passes this, every `before` is rebased (far below 2^53).
pub const REBASE_AT: f64 = 1e15;

/// One window of a limiter.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Window {
  /// Units admitted per interval (≥ 1).
  pub limit: f64,
  /// µs (≥ 1).
  pub interval_us: f64,
}

/// One admitted call in the log.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Entry {
  pub at_us: f64,
  /// Total weight admitted before this call (since the last rebase).
  pub before: f64,
  pub weight: f64,
}

/// What a call asks for.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Op {
  /// Charge `weight` to every window if all of them have room; otherwise charge nothing.
  Take,
  /// The answer a take would get, charging nothing.
  Peek,
  /// Drop the log and any block: allowed, every window at its limit.
  Reset,
  /// Admit nobody for `us` µs from now (a later block in place is kept; the log is kept):
  /// refused, no window's room reported, retry after the block's end.
  Block { us: f64 },
}

/// One window's answer.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct WindowDecision {
  /// Units left in this window after this call.
  pub remaining: f64,
  /// µs until this window has room for the weight (0 if it has now).
  pub retry_after_us: f64,
}

/// A decision over several windows, each answered by a `W` (this kind's [`WindowDecision`];
/// the sliding counter's has a reset time too).
#[derive(Clone, Debug, PartialEq)]
pub struct Decision<W = WindowDecision> {
  pub allowed: bool,
  /// µs until every window has room (0 when allowed).
  pub retry_after_us: f64,
  pub windows: Vec<W>,
}

/// The log of one name, and the end of a block on it (µs; 0: never blocked).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Log {
  entries: VecDeque<Entry>,
  blocked_until_us: f64,
}

/// The longest interval, µs.
pub fn longest_us(windows: &[Window]) -> f64 {
  windows.iter().map(|w| w.interval_us).fold(0.0, f64::max)
}

impl Log {
  pub fn entries(&self) -> &VecDeque<Entry> {
    &self.entries
  }

  pub fn is_empty(&self) -> bool {
    self.entries.is_empty()
  }

  /// Total weight admitted (since the last rebase), including the newest call.
  fn total(&self) -> f64 {
    self.entries.back().map_or(0.0, |e| e.before + e.weight)
  }

  /// Index of the oldest call inside a window starting after `boundary_us`.
  fn first_after(&self, boundary_us: f64) -> usize {
    self.entries.partition_point(|e| e.at_us <= boundary_us)
  }

  /// Blocks the name for `duration_us` from now (a later block in place is kept); returns
  /// the block's end. The log is kept.
  pub fn block(&mut self, duration_us: f64, now_us: f64) -> f64 {
    self.blocked_until_us = self.blocked_until_us.max(now_us + duration_us);
    self.blocked_until_us
  }

  /// Decides one call at `now_us` (trimming the calls that left the longest window first);
  /// a reset and a block as [`Op`] says. While blocked, a call is refused as a peek would be
  /// answered, with no window's room reported (remaining 0) and no retry before the block's
  /// end. The log then matters until [`Log::expires_us`].
  pub fn step(&mut self, windows: &[Window], weight: f64, op: Op, now_us: f64) -> Decision {
    match op {
      Op::Reset => {
        *self = Log::default();
        let windows = windows.iter().map(|w| WindowDecision { remaining: w.limit, retry_after_us: 0.0 }).collect();
        return Decision { allowed: true, retry_after_us: 0.0, windows };
      }
      Op::Block { us } => {
        let left = self.block(us, now_us) - now_us;
        let windows = windows.iter().map(|_| WindowDecision { remaining: 0.0, retry_after_us: left }).collect();
        return Decision { allowed: false, retry_after_us: left, windows };
      }
      Op::Take | Op::Peek => {}
    }
    if self.blocked_until_us > now_us {
      let left = (self.blocked_until_us - now_us).ceil();
      let mut d = self.decide(windows, weight, Op::Peek, now_us);
      d.allowed = false;
      d.retry_after_us = d.retry_after_us.max(left);
      for w in &mut d.windows {
        w.remaining = 0.0;
        w.retry_after_us = w.retry_after_us.max(left);
      }
      return d;
    }
    self.decide(windows, weight, op, now_us)
  }

  fn decide(&mut self, windows: &[Window], weight: f64, op: Op, now_us: f64) -> Decision {
    let longest = longest_us(windows);
    let gone = self.first_after(now_us - longest);
    self.entries.drain(..gone);
    let total = self.total();
    let mut answers = Vec::with_capacity(windows.len());
    let mut allowed = true;
    for w in windows {
      let first = self.first_after(now_us - w.interval_us);
      let used = self.entries.get(first).map_or(0.0, |e| total - e.before);
      let fits = used + weight <= w.limit;
      allowed &= fits;
      let retry_after_us = if fits { 0.0 } else { self.retry_us(first, used + weight - w.limit, w, now_us) };
      answers.push((used, WindowDecision { remaining: 0.0, retry_after_us }));
    }
    if allowed && op == Op::Take && weight > 0.0 {
      let at_us = self.entries.back().map_or(now_us, |e| e.at_us.max(now_us));
      self.entries.push_back(Entry { at_us, before: total, weight });
      if total + weight > REBASE_AT {
        let base = self.entries[0].before;
        for e in &mut self.entries {
          e.before -= base;
        }
      }
    }
    let charged = if allowed && op == Op::Take { weight } else { 0.0 };
    let windows = windows
      .iter()
      .zip(answers)
      .map(|(w, (used, mut d))| {
        d.remaining = (w.limit - used - charged).max(0.0);
        d
      })
      .collect::<Vec<_>>();
    let retry_after_us = if allowed { 0.0 } else { windows.iter().map(|d| d.retry_after_us).fold(0.0, f64::max) };
    Decision { allowed, retry_after_us, windows }
  }

  /// µs until `needed` units have left the window whose oldest call is at `first`: the time
  /// its `k`-th oldest call leaves, for the smallest `k` whose calls weigh `needed` together.
  fn retry_us(&self, first: usize, needed: f64, w: &Window, now_us: f64) -> f64 {
    let Some(start) = self.entries.get(first).map(|e| e.before) else {
      return MAX_DELAY_US;
    };
    let (mut lo, mut hi) = (first, self.entries.len());
    while lo < hi {
      let mid = (lo + hi) / 2;
      let e = &self.entries[mid];
      if e.before + e.weight - start < needed {
        lo = mid + 1;
      } else {
        hi = mid;
      }
    }
    match self.entries.get(lo) {
      Some(e) => (e.at_us + w.interval_us - now_us).max(0.0),
      None => MAX_DELAY_US,
    }
  }

  /// When the log stops mattering (its newest call leaves the longest window, and any block
  /// has ended), µs.
  pub fn expires_us(&self, windows: &[Window]) -> Option<f64> {
    let newest = self.entries.back().map(|e| e.at_us + longest_us(windows));
    match newest {
      Some(t) => Some(t.max(self.blocked_until_us)),
      None if self.blocked_until_us > 0.0 => Some(self.blocked_until_us),
      None => None,
    }
  }
}

/// What the tests of both sliding limiters (this one and `sliding_counter`) share.
#[cfg(test)]
pub(crate) mod testing {
  use super::{Window, MAX_DELAY_US};
  use proptest::prelude::*;

  pub const S: f64 = 1_000_000.0;

  /// A window of `limit` per `secs` seconds.
  pub fn w(limit: f64, secs: f64) -> Window {
    Window { limit, interval_us: secs * S }
  }

  /// The property both limiters hold over takes on two windows (`ops`: weight, µs since the
  /// previous take): after each admission, the weight admitted that `counts` in a window
  /// (admitted at `t`, seen at `now`) is within its limit; a refusal's retryAfter is exact,
  /// refused 1 µs before it and admitted at it. `take` answers a take's allowed and retry.
  pub fn takes_hold_their_windows<S: Clone + Default>(
    ops: Vec<(u32, u64)>,
    limits: (u32, u32),
    take: impl Fn(&mut S, &[Window], f64, f64) -> (bool, f64),
    counts: impl Fn(f64, f64, &Window) -> bool,
  ) -> Result<(), TestCaseError> {
    let windows = [w(limits.0 as f64, 0.5), w(limits.1 as f64, 2.0)];
    let mut state = S::default();
    let mut now = 0.0;
    let mut admitted: Vec<(f64, f64)> = vec![];
    for (weight, dt) in ops {
      now += dt as f64;
      let weight = (weight as f64).min(limits.0.min(limits.1) as f64);
      let before = state.clone();
      let (allowed, retry_after_us) = take(&mut state, &windows, weight, now);
      if allowed {
        admitted.push((now, weight));
        for win in &windows {
          let sum: f64 = admitted.iter().filter(|(t, _)| counts(*t, now, win)).map(|(_, x)| x).sum();
          prop_assert!(sum <= win.limit);
        }
      } else {
        prop_assert!(retry_after_us > 0.0 && retry_after_us < MAX_DELAY_US);
        prop_assert!(!take(&mut before.clone(), &windows, weight, now + retry_after_us - 1.0).0);
        prop_assert!(take(&mut before.clone(), &windows, weight, now + retry_after_us).0);
      }
    }
    Ok(())
  }
}

#[cfg(test)]
mod tests {
  use super::testing::*;
  use super::*;
  use proptest::prelude::*;

  #[test]
  fn admits_up_to_each_limit_and_reports_remaining_per_window() {
    let windows = [w(2.0, 1.0), w(3.0, 10.0)];
    let mut log = Log::default();
    let d = log.step(&windows, 1.0, Op::Take, 0.0);
    assert!(d.allowed);
    assert_eq!(d.windows.iter().map(|x| x.remaining).collect::<Vec<_>>(), [1.0, 2.0]);
    assert!(log.step(&windows, 1.0, Op::Take, 1.0).allowed);
    let d = log.step(&windows, 1.0, Op::Take, 2.0);
    assert!(!d.allowed, "the 1 s window is full");
    assert_eq!(d.windows[0].retry_after_us, S - 2.0, "the first call leaves it at exactly 1 s");
    assert_eq!(d.windows[1].retry_after_us, 0.0);
    assert_eq!(d.retry_after_us, S - 2.0);
    assert_eq!(d.windows[1].remaining, 1.0, "a refused call charged neither window");
    assert!(!log.step(&windows, 1.0, Op::Take, S - 1.0).allowed, "denied just before");
    assert!(log.step(&windows, 1.0, Op::Take, S).allowed, "allowed at retryAfter");
    let d = log.step(&windows, 1.0, Op::Take, 5.0 * S);
    assert!(!d.allowed, "now the 10 s window is full");
    assert_eq!(d.retry_after_us, 5.0 * S);
  }

  #[test]
  fn weights_count_in_full_and_retry_waits_for_enough_of_them_to_leave() {
    let windows = [w(10.0, 1.0)];
    let mut log = Log::default();
    assert!(log.step(&windows, 3.0, Op::Take, 0.0).allowed);
    assert!(log.step(&windows, 3.0, Op::Take, 100.0).allowed);
    assert!(log.step(&windows, 3.0, Op::Take, 200.0).allowed);
    let d = log.step(&windows, 6.0, Op::Take, 300.0);
    assert!(!d.allowed);
    // 9 used; 5 must leave: the calls at 0 and 100 (3 + 3)
    assert_eq!(d.retry_after_us, 100.0 + S - 300.0);
    assert_eq!(d.windows[0].remaining, 1.0);
    assert!(log.step(&windows, 6.0, Op::Take, 100.0 + S).allowed);
  }

  #[test]
  fn peek_and_weight_zero_change_nothing_and_reset_by_dropping_the_log() {
    let windows = [w(1.0, 1.0)];
    let mut log = Log::default();
    assert!(log.step(&windows, 1.0, Op::Peek, 0.0).allowed);
    assert!(log.step(&windows, 0.0, Op::Take, 0.0).allowed);
    assert!(log.is_empty());
    assert!(log.step(&windows, 1.0, Op::Take, 0.0).allowed);
    assert!(log.step(&windows, 0.0, Op::Take, 1.0).allowed, "weight 0 always fits");
    assert_eq!(log.entries().len(), 1);
  }

  #[test]
  fn trims_calls_that_left_the_longest_window_and_keeps_order_when_the_clock_steps_back() {
    let windows = [w(100.0, 1.0), w(100.0, 2.0)];
    let mut log = Log::default();
    for t in 0..10 {
      log.step(&windows, 1.0, Op::Take, t as f64 * 0.5 * S);
    }
    assert_eq!(log.entries().len(), 4, "only the calls of the last 2 s are kept");
    assert_eq!(log.expires_us(&windows), Some(4.5 * S + 2.0 * S));
    log.step(&windows, 1.0, Op::Take, 4.0 * S);
    assert_eq!(log.entries().back().unwrap().at_us, 4.5 * S, "a step back is logged at the newest time");
  }

  #[test]
  fn the_running_sum_is_rebased_without_changing_decisions() {
    let windows = [w(1e9, 10.0)];
    let mut log = Log::default();
    log.entries.push_back(Entry { at_us: 0.0, before: REBASE_AT - 5e8, weight: 1e8 });
    assert!(log.step(&windows, 1e9 - 1e8, Op::Take, 1.0).allowed);
    assert_eq!(log.entries()[0].before, 0.0);
    let d = log.step(&windows, 1.0, Op::Peek, 2.0);
    assert!(!d.allowed);
    assert_eq!(d.windows[0].remaining, 0.0);
  }

  proptest! {
    /// Over any span of one window's interval, the admitted weight never exceeds its limit,
    /// and a refused call's retryAfter is exact: refused just before, admitted at it.
    #[test]
    fn never_exceeds_any_window_and_retry_after_is_exact(
      ops in proptest::collection::vec((0u32..4, 0u64..400_000), 1..120),
      limits in (1u32..6, 1u32..12),
    ) {
      let take = |log: &mut Log, windows: &[Window], weight: f64, now: f64| {
        let d = log.step(windows, weight, Op::Take, now);
        (d.allowed, d.retry_after_us)
      };
      // a window of `interval` covers (now - interval, now]
      takes_hold_their_windows(ops, limits, take, |t, now, win| t > now - win.interval_us)?;
    }
  }
}
