//! Window limiter: at most `limit` units per interval that starts at the first call after the
//! previous window ended (Sidekiq Enterprise's `window`: a fixed window anchored at first use,
//! not a rolling log). State: the window's start (µs) and the units used in it. A call that
//! charges nothing (a refusal or weight 0) never opens a window. The key expires when its
//! window ends, so it can never lose its expiry and count forever (Sidekiq #2704).
//! [`Op::Backoff`] counts every call, refusals too, and moves the window's end: a call that
//! takes the count `over` the limit ends it `interval × 2^(over − 1)` from now (doubling), or
//! one interval from now (the state's start is stored as that end minus the interval, so the
//! next call reads one window as usual).
//! Mirrored by `lua/limit.lua` (kind 1).

use super::limit::{counter_step, ttl_ms, Decision, Op, Outcome, Params, Save, State, MAX_TTL_MS};

/// Longest window a backoff sets, µs (10 years, the longest TTL).
const MAX_BACKOFF_US: f64 = MAX_TTL_MS * 1000.0;
/// Most doublings of a backoff (beyond, the window is at its longest anyway).
const MAX_DOUBLINGS: f64 = 64.0;

pub fn step(state: Option<State>, p: &Params, weight: f64, op: Op, now_us: f64) -> Outcome {
  let (start_us, used) = match state {
    Some(s) if now_us < s.a + p.interval_us => (s.a, s.b),
    _ => (now_us, 0.0),
  };
  if let Op::Backoff { doubling } = op {
    return backoff(used, start_us + p.interval_us, p, weight, doubling, now_us);
  }
  counter_step(used, start_us, start_us + p.interval_us, p, weight, op, now_us)
}

/// [`Op::Backoff`] on a window of `used` units ending at `end_us`.
fn backoff(used: f64, end_us: f64, p: &Params, weight: f64, doubling: bool, now_us: f64) -> Outcome {
  let after = used + weight;
  let over = after - p.limit;
  let end_us = if over > 0.0 {
    let doublings = if doubling { (over - 1.0).min(MAX_DOUBLINGS) } else { 0.0 };
    let len = (p.interval_us * 2f64.powf(doublings)).min(MAX_BACKOFF_US);
    now_us + len
  } else {
    end_us
  };
  let reset_after_us = (end_us - now_us).ceil();
  let allowed = over <= 0.0;
  Outcome {
    decision: Decision {
      allowed,
      remaining: (p.limit - after).max(0.0),
      retry_after_us: if allowed { 0.0 } else { reset_after_us },
      reset_after_us,
    },
    save: Save::Set(State { a: end_us - p.interval_us, b: after, blocked_until_us: 0.0 }, ttl_ms(end_us - now_us)),
  }
}

#[cfg(test)]
mod tests {
  use super::*;

  const S: f64 = 1e6;

  #[test]
  fn backoff_doubles_the_window_for_each_call_over_the_limit() {
    let p = Params { limit: 2.0, interval_us: S };
    let mut state = None;
    let mut at = |now: f64| {
      let o = step(state, &p, 1.0, Op::Backoff { doubling: true }, now);
      state = o.save.state();
      o.decision
    };
    let t = 1_700_000_000.0 * S;
    assert!(at(t).allowed && at(t + 1.0).allowed);
    let first = at(t + 2.0);
    assert_eq!((first.allowed, first.remaining, first.retry_after_us), (false, 0.0, S), "over by 1: one window");
    assert_eq!(at(t + 3.0).retry_after_us, 2.0 * S, "over by 2: two windows from now");
    assert_eq!(at(t + 4.0).retry_after_us, 4.0 * S);
    // asked again after the first backoff would have ended, but within the last one
    assert_eq!(at(t + 2.5 * S).retry_after_us, 8.0 * S, "the count lives while the backoff does");
    // once the backoff ends, a new window opens at the next call
    let fresh = at(t + 2.5 * S + 8.0 * S);
    assert_eq!((fresh.allowed, fresh.remaining, fresh.reset_after_us), (true, 1.0, S));
  }

  #[test]
  fn continuing_restarts_the_window_for_each_call_over_the_limit() {
    let p = Params { limit: 1.0, interval_us: S };
    let mut state = None;
    let mut at = |now: f64| {
      let o = step(state, &p, 1.0, Op::Backoff { doubling: false }, now);
      state = o.save.state();
      o.decision
    };
    assert!(at(0.0).allowed);
    assert_eq!(at(0.5 * S).retry_after_us, S, "one window from the refused call");
    assert_eq!(at(1.2 * S).retry_after_us, S, "the count lives on: still over");
    assert!(at(2.2 * S).allowed, "a window without calls ends it");
  }

  #[test]
  fn backoff_is_capped_at_ten_years() {
    let p = Params { limit: 1.0, interval_us: 1e9 };
    let s = State { a: 0.0, b: 500.0, blocked_until_us: 0.0 };
    let d = step(Some(s), &p, 1.0, Op::Backoff { doubling: true }, 1.0).decision;
    assert_eq!(d.retry_after_us, MAX_BACKOFF_US);
  }
}
