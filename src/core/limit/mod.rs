//! What the rate limiters share: their parameters, their two-number state, the operations a
//! call can ask for and the decision it gets back. The algorithms themselves live in
//! [`bucket`], [`window`] and [`leaky`]; all three
//! are mirrored by `lua/limit.lua`, which decides a batch of mixed kinds in one script call.
//!
//! Units: time in integer µs (`now_us` is µs since the epoch), `limit` and weights in
//! units of the limiter (calls or points), all plain `f64` so the Lua mirror computes the
//! same doubles in the same order. Weights are integers ≤ 1e9 (checked at the edge), so the
//! counters are exact.

use super::{bucket, leaky, window};

/// Longest delay ever reported, µs (the pacer's cap): "not within any sensible wait".
pub const MAX_DELAY_US: f64 = 9e15;
/// Longest TTL ever set, ms (10 years).
pub const MAX_TTL_MS: f64 = crate::core::bounds::MAX_INTERVAL_MS;

/// The algorithm behind a limiter, as numbered in the batch encoding.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
  /// `limit` per calendar-aligned interval ([`bucket`]).
  Bucket = 0,
  /// `limit` per interval starting at the first call ([`window`]).
  Window = 1,
  /// Burst of `limit`, refilled continuously at `limit` per interval ([`leaky`]); also the
  /// engine of the points limiter.
  Leaky = 2,
}

impl Kind {
  pub fn from_code(code: f64) -> Option<Kind> {
    match code {
      0.0 => Some(Kind::Bucket),
      1.0 => Some(Kind::Window),
      2.0 => Some(Kind::Leaky),
      _ => None,
    }
  }
}

/// A limiter's configuration, as the step needs it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Params {
  /// Units admitted per interval (> 0).
  pub limit: f64,
  /// The interval, µs (> 0).
  pub interval_us: f64,
}

/// What a call asks for.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Op {
  /// Charge `weight` if it is admitted now, or (leaky only) within `max_wait_us` by
  /// reserving a later slot; otherwise charge nothing. Weight 0 is a pure probe.
  Take { max_wait_us: f64 },
  /// The decision `Take { max_wait_us: 0 }` would get, without charging anything.
  Peek,
  /// Charge `weight` unconditionally; negative refunds (never below an empty state).
  Adjust,
  /// Window only: charge `weight` (≥ 1) unconditionally, admitted while the count stays
  /// within the limit; a call that takes it `over` the limit ends the window
  /// `interval × 2^(over − 1)` from now when `doubling` (at most 10 years), so a client that
  /// keeps asking keeps doubling its wait (@fastify/rate-limit's `exponentialBackoff`), else
  /// one interval from now (its `continueExceeding`): its store counts every request and
  /// sets the key's expiry so. See [`window::step`].
  Backoff { doubling: bool },
  /// Deletes the key's state: the limiter is back at full capacity (allowed, remaining =
  /// limit). Decided by [`step`]; never reaches an algorithm's step.
  Reset,
  /// Admits nobody for `us` µs from now (a later block in place is kept); the counts are kept,
  /// a fresh key gets a state every algorithm reads as empty. Refused, remaining 0, retry and
  /// reset after the block's end. Decided by [`step`]; never reaches an algorithm's step.
  Block { us: f64 },
  /// Window only, weight 1 (@nestjs/throttler's storage contract): counts the call while the
  /// key is not blocked; the call that takes the count over the limit blocks the key for
  /// `block_us` (refused, the count kept); calls while blocked are refused and not counted
  /// (retry after = the block's end, reset after = the window's); the first call after a block
  /// starts over (a new window, counting 1). A zero `block_us` blocks for no time: that call
  /// starts over at once (counting 1 in the window in place), as the peer's storage does.
  /// Decided by [`step`] ([`throttle`]); never reaches an algorithm's step.
  Throttle { block_us: f64 },
}

/// Stored state: two numbers whose meaning depends on the kind.
/// Bucket and window: `a` = start of the current interval (µs), `b` = units used in it.
/// Leaky: `a` = the time the bucket will be empty ("theoretical arrival time", µs), `b` = 0.
/// Plus `blocked_until_us`: nobody is admitted before it ([`block`]; 0 = never blocked).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct State {
  pub a: f64,
  pub b: f64,
  pub blocked_until_us: f64,
}

/// The answer to one call. All times are whole µs (rounded up).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Decision {
  pub allowed: bool,
  /// Units that could be taken right after this call (≥ 0).
  pub remaining: f64,
  /// Denied: how long until this weight could be admitted. Admitted by a reservation: how
  /// long the caller must wait before using its slot. Otherwise 0.
  pub retry_after_us: f64,
  /// How long until the limiter is back to its full capacity.
  pub reset_after_us: f64,
}

/// What a call does to its key's stored state.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Save {
  /// Nothing: the state is unchanged.
  Keep,
  /// The state, to keep for its TTL (ms).
  Set(State, f64),
  /// The state, to keep for its TTL (ms) or the key's current TTL if that is longer (a
  /// block: the counts keep their own lifetime).
  AtLeast(State, f64),
  /// The key deleted (a reset).
  Delete,
}

impl Save {
  /// [`Save::Set`] when `changed`, else [`Save::Keep`].
  pub fn set_if(changed: bool, state: State, ttl_ms: f64) -> Save {
    if changed {
      Save::Set(state, ttl_ms)
    } else {
      Save::Keep
    }
  }

  /// The state saved, if any.
  pub fn state(self) -> Option<State> {
    match self {
      Save::Set(s, _) | Save::AtLeast(s, _) => Some(s),
      Save::Keep | Save::Delete => None,
    }
  }
}

/// A decision, and what becomes of the key's state.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Outcome {
  pub decision: Decision,
  pub save: Save,
}

/// One call of any kind. A reset deletes the key; a block saves its end (see [`Op::Block`]).
/// While the key is blocked, takes and peeks are refused (remaining 0, retry after no earlier
/// than the block's end); adjustments apply as usual and keep the block.
pub fn step(kind: Kind, state: Option<State>, params: &Params, weight: f64, op: Op, now_us: f64) -> Outcome {
  match op {
    Op::Reset => {
      let decision = Decision { allowed: true, remaining: params.limit, retry_after_us: 0.0, reset_after_us: 0.0 };
      return Outcome { decision, save: Save::Delete };
    }
    Op::Block { us } => {
      let (blocked, until) = block(state, us, now_us);
      let left = until - now_us;
      let decision = Decision { allowed: false, remaining: 0.0, retry_after_us: left, reset_after_us: left };
      return Outcome { decision, save: Save::AtLeast(blocked, ttl_ms(left)) };
    }
    Op::Throttle { block_us } => return throttle(state, params, block_us, now_us),
    _ => {}
  }
  let until = state.map_or(0.0, |s| s.blocked_until_us);
  if until > now_us && op != Op::Adjust {
    let inner = kind_step(kind, state, params, weight, Op::Peek, now_us).decision;
    let left = (until - now_us).ceil();
    let decision = Decision {
      allowed: false,
      remaining: 0.0,
      retry_after_us: inner.retry_after_us.max(left),
      reset_after_us: inner.reset_after_us.max(left),
    };
    return Outcome { decision, save: Save::Keep };
  }
  let mut outcome = kind_step(kind, state, params, weight, op, now_us);
  if until > now_us {
    if let Save::Set(s, ttl) = &mut outcome.save {
      s.blocked_until_us = until;
      *ttl = ttl.max(ttl_ms(until - now_us));
    }
  }
  outcome
}

/// Blocks a key for `duration_us` from now (or keeps a later block): the state to save, and
/// the block's end. The counts are kept; a fresh key gets a state every kind reads as empty.
fn block(state: Option<State>, duration_us: f64, now_us: f64) -> (State, f64) {
  let s = state.unwrap_or(State { a: -1.0, b: 0.0, blocked_until_us: 0.0 });
  let until = s.blocked_until_us.max(now_us + duration_us);
  (State { blocked_until_us: until, ..s }, until)
}

/// [`Op::Throttle`] on a window's state (see there). Mirrored by `lua/limit.lua` (`throttle`).
fn throttle(state: Option<State>, p: &Params, block_us: f64, now_us: f64) -> Outcome {
  let until = state.map_or(0.0, |s| s.blocked_until_us);
  // the window in place: a block that ended ends its window too (the count starts over)
  let (start_us, used) = match state {
    Some(s) if now_us < s.a + p.interval_us && (until <= 0.0 || until > now_us) => (s.a, s.b),
    _ => (now_us, 0.0),
  };
  let end_us = start_us + p.interval_us;
  let reset_after_us = (end_us - now_us).ceil();
  if until > now_us {
    let left = (until - now_us).ceil();
    let decision = Decision { allowed: false, remaining: 0.0, retry_after_us: left, reset_after_us };
    return Outcome { decision, save: Save::Keep };
  }
  let ttl = ttl_ms(end_us - now_us);
  let counted = |b: f64| State { a: start_us, b, blocked_until_us: 0.0 };
  if used + 1.0 <= p.limit || block_us <= 0.0 {
    let after = if used + 1.0 <= p.limit { used + 1.0 } else { 1.0 };
    let decision = Decision { allowed: true, remaining: p.limit - after, retry_after_us: 0.0, reset_after_us };
    return Outcome { decision, save: Save::Set(counted(after), ttl) };
  }
  let blocked = State { blocked_until_us: now_us + block_us, ..counted(used + 1.0) };
  let left = block_us.ceil();
  let decision = Decision { allowed: false, remaining: 0.0, retry_after_us: left, reset_after_us };
  Outcome { decision, save: Save::Set(blocked, ttl.max(ttl_ms(block_us))) }
}

fn kind_step(kind: Kind, state: Option<State>, params: &Params, weight: f64, op: Op, now_us: f64) -> Outcome {
  match kind {
    Kind::Bucket => bucket::step(state, params, weight, op, now_us),
    Kind::Window => window::step(state, params, weight, op, now_us),
    Kind::Leaky => leaky::step(state, params, weight, op, now_us),
  }
}

/// A TTL in whole ms for state that matters for `span_us` more, at least 1 ms.
pub fn ttl_ms(span_us: f64) -> f64 {
  (span_us / 1000.0).ceil().clamp(1.0, MAX_TTL_MS)
}

/// The counter step shared by bucket and window: `used` units of `limit` in an interval that
/// started at `start_us` and ends at `end_us`.
pub(crate) fn counter_step(
  used: f64,
  start_us: f64,
  end_us: f64,
  p: &Params,
  weight: f64,
  op: Op,
  now_us: f64,
) -> Outcome {
  let reset_after_us = (end_us - now_us).ceil();
  let (allowed, used_after) = match op {
    Op::Take { .. } => {
      let allowed = used + weight <= p.limit;
      (allowed, if allowed { used + weight } else { used })
    }
    // reset and block never reach here (see `step`)
    Op::Peek | Op::Reset | Op::Block { .. } | Op::Throttle { .. } => (used + weight <= p.limit, used),
    // Backoff is the window's (core::window); on a calendar bucket the store refuses it
    Op::Adjust | Op::Backoff { .. } => (true, (used + weight).max(0.0)),
  };
  let changed = used_after != used;
  let retry_after_us = if allowed {
    0.0
  } else if weight > p.limit {
    MAX_DELAY_US
  } else {
    reset_after_us
  };
  Outcome {
    decision: Decision { allowed, remaining: (p.limit - used_after).max(0.0), retry_after_us, reset_after_us },
    save: Save::set_if(changed, State { a: start_us, b: used_after, blocked_until_us: 0.0 }, ttl_ms(end_us - now_us)),
  }
}

#[cfg(test)]
mod tests;
