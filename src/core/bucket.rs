//! Bucket limiter: at most `limit` units per calendar-aligned interval (Sidekiq Enterprise's
//! `bucket`). Intervals are aligned to the Unix epoch, so a second, minute, hour or day
//! bucket starts on the UTC boundary; 5 per second admits 5 at 12:42:51.999 and 5 more at
//! 12:42:52.000. State: the start of the bucket it counts (µs) and the units used in it; a
//! state from an earlier bucket counts as empty. The key expires when its bucket ends.
//! Mirrored by `lua/limit.lua` (kind 0).

use super::limit::{counter_step, Op, Outcome, Params, State};

pub fn step(state: Option<State>, p: &Params, weight: f64, op: Op, now_us: f64) -> Outcome {
  let start_us = (now_us / p.interval_us).floor() * p.interval_us;
  let used = match state {
    Some(s) if s.a == start_us => s.b,
    _ => 0.0,
  };
  counter_step(used, start_us, start_us + p.interval_us, p, weight, op, now_us)
}
