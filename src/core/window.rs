//! Window limiter: at most `limit` units per interval that starts at the first call after the
//! previous window ended (Sidekiq Enterprise's `window`: a fixed window anchored at first use,
//! not a rolling log). State: the window's start (µs) and the units used in it. A call that
//! charges nothing (a refusal or weight 0) never opens a window. The key expires when its
//! window ends, so it can never lose its expiry and count forever (Sidekiq #2704).
//! Mirrored by `lua/limiter.lua` (kind 1).

use super::limit::{counter_step, Op, Outcome, Params, State};

pub fn step(state: Option<State>, p: &Params, weight: f64, op: Op, now_us: f64) -> Outcome {
  let (start_us, used) = match state {
    Some(s) if now_us < s.a + p.interval_us => (s.a, s.b),
    _ => (now_us, 0.0),
  };
  counter_step(used, start_us, start_us + p.interval_us, p, weight, op, now_us)
}
