//! Leaky limiter: a bucket of `limit` units that drains continuously at `limit` per interval,
//! so a burst of `limit` passes at once and then one unit every `interval / limit` (Sidekiq
//! Enterprise's `leaky`; with points as units, the points limiter).
//!
//! State: `tat`, the time the bucket will be empty (µs). A call of weight `w` fits when
//! `max(tat, now) + w·T - now ≤ interval`, with `T = interval / limit` per unit. This is exact
//! where Sidekiq's drop counter is not: no fractional drip is lost, and `retryAfter` is the
//! exact time the weight fits.
//!
//! Reservations fix Sidekiq's starvation (#5315, every refused waiter gets the same
//! `next_drip` and they race for it): with `max_wait_us > 0`, a call that fits within that
//! wait is charged now for its future slot and told how long to wait, so waiters queue in
//! arrival order, each with its own slot. `Adjust` settles the points limiter's estimates:
//! a refund moves `tat` back (never before now), an extra charge moves it forward even past
//! the capacity (a debt the next calls wait out).
//!
//! The key expires when the bucket has drained. Mirrored by `lua/limit.lua` (kind 2).

use super::limit::{ttl_ms, Decision, Op, Outcome, Params, Save, State};

pub fn step(state: Option<State>, p: &Params, weight: f64, op: Op, now_us: f64) -> Outcome {
  let per_unit_us = p.interval_us / p.limit;
  let tat = match state {
    Some(s) if s.a > now_us => s.a,
    _ => now_us,
  };
  let (allowed, wait_us, tat_after) = match op {
    Op::Take { max_wait_us } => {
      let wait_us = tat + weight * per_unit_us - now_us - p.interval_us;
      let allowed = wait_us <= max_wait_us;
      (allowed, wait_us, if allowed { tat + weight * per_unit_us } else { tat })
    }
    // reset and block never reach here (see `limit::step`)
    Op::Peek | Op::Reset | Op::Block { .. } | Op::Throttle { .. } => {
      let wait_us = tat + weight * per_unit_us - now_us - p.interval_us;
      (wait_us <= 0.0, wait_us, tat)
    }
    // Backoff is the window's alone (the store refuses it for other kinds): here, an adjustment
    Op::Adjust | Op::Backoff { .. } => (true, 0.0, (tat + weight * per_unit_us).max(now_us)),
  };
  let changed = tat_after != tat;
  let backlog_us = tat_after - now_us;
  Outcome {
    decision: Decision {
      allowed,
      remaining: ((p.interval_us - backlog_us) / per_unit_us).floor().max(0.0),
      retry_after_us: wait_us.max(0.0).ceil(),
      reset_after_us: backlog_us.ceil(),
    },
    save: Save::set_if(changed, State { a: tat_after, b: 0.0, blocked_until_us: 0.0 }, ttl_ms(backlog_us)),
  }
}
