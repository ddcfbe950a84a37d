//! The distributed pacer: a leaky bucket of `max_burst` in front of a queue paced at `qps`.
//!
//! This is the algorithm of @clickup/distributed-pacer with its defects fixed. One pacer key
//! holds three numbers:
//!
//! - `watermark` (weight units): the bucket level after the last saved call, `<= max_burst`;
//! - `next_shot_us` (µs): the queue tail, the earliest start of the next queued call;
//! - `last_drip_us` (µs): when the state was last saved.
//!
//! A call of weight `w > 0` at `now_us`:
//!
//! 1. If the tail is not in the future, the bucket leaks `qps * factor` units per second for the
//!    time since `max(last_drip, tail)`. Counting from the tail (the reference counts from the
//!    last call) is the fix for its rate-limit over-admission: time spent draining the queue is
//!    not credited to the bucket as well, so the bucket's leak and the queue's spacing never pay
//!    out the same second twice.
//! 2. `watermark += w`. If it is still `<= max_burst` the call has room: it starts now and the
//!    tail does not move. Otherwise it overflows: it starts at the tail (now, if the tail is in
//!    the past: the reference's "first overflowing call is free") and pushes the tail by
//!    `ceil(w * 1e6 / qps)` µs. The bucket is clamped to `max_burst`.
//! 3. `pace` always saves (every call reserves its slot). `rate_limit` admits only a call that
//!    starts now and saves only what it admits; a refusal's delay is the tail, when a retry
//!    would be admitted if nobody else takes the slot first.
//!
//! A call of weight 0 is a probe: it never changes state. It reports delay 0 when the bucket has
//! room (or nothing is queued) and the time to the tail otherwise, so it never jumps the queue.
//!
//! Bound (tested by property): over any span of T seconds, `rate_limit` admits at most
//! `max_burst + qps * T` weight plus the one call that opened the span, given `factor <= 1`.
//!
//! All arithmetic is f64 in exactly the order `lua/pacer.lua` uses, so the Lua (Redis doubles)
//! and this model agree bit for bit; the conformance test checks it on a real Redis.

/// How a call uses its outcome: `Pace` reserves a slot and sleeps until it, `RateLimit` is
/// admitted now or refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
  Pace,
  RateLimit,
}

/// Validated options of one pacer.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Params {
  /// Weight units per second, `> 0`.
  pub qps: f64,
  /// Bucket capacity in weight units, `>= 0`.
  pub max_burst: f64,
  /// Leak rate of the bucket as a fraction of `qps`, in `(0, 1]`.
  pub factor: f64,
  pub mode: Mode,
}

/// The stored state of one pacer key.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct State {
  pub watermark: f64,
  pub next_shot_us: f64,
  pub last_drip_us: f64,
}

/// The answer to one call.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Decision {
  /// Start of this call's slot minus now, µs (integer-valued, at most [`MAX_DELAY_US`]).
  /// 0 = start now.
  pub delay_us: f64,
  /// Bucket level after the leak and before this call's weight (for the `reason` string).
  pub watermark_before: f64,
  /// `pace`: always true. `rate_limit`: the call was admitted (and, unless weight 0, charged),
  /// which is exactly when `delay_us == 0`.
  pub admitted: bool,
}

/// Margin added to every key's TTL beyond the time its state matters, ms.
pub const TTL_MARGIN_MS: f64 = 120_000.0;
/// Longest TTL, ms (10 years). Extreme but valid inputs (qps 1e-6, weight 1e9) schedule a
/// tail 1e21 µs away; Redis refuses such an expiry, and a state that matters for longer than
/// ten years may as well reset.
pub const MAX_TTL_MS: f64 = 315_360_000_000.0;
/// Longest reported delay, µs (~285 years): Redis replies carry 64-bit integers, and a delay
/// must stay exact (and above 0) to mean "refused".
pub const MAX_DELAY_US: f64 = 9e15;

fn capped(delay_us: f64) -> f64 {
  if delay_us > MAX_DELAY_US {
    MAX_DELAY_US
  } else {
    delay_us
  }
}

/// What a step asks the store to do with the key.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Outcome {
  pub decision: Decision,
  /// The state to save, with its TTL in ms; `None` = write nothing.
  pub save: Option<(State, f64)>,
}

/// One pacer call: the whole algorithm, pure. `state` is `None` for a fresh key.
pub fn step(state: Option<State>, params: &Params, weight: f64, now_us: f64) -> Outcome {
  let Params { qps, max_burst, factor, mode } = *params;
  let (mut watermark, stored_tail, last_drip) = match state {
    Some(s) => (s.watermark, s.next_shot_us, s.last_drip_us),
    None => (0.0, 0.0, now_us),
  };
  if stored_tail <= now_us {
    let since = if last_drip > stored_tail { last_drip } else { stored_tail };
    if since < now_us {
      watermark -= (now_us - since) * qps * factor / 1e6;
      if watermark < 0.0 {
        watermark = 0.0;
      }
    }
  }
  let tail = if stored_tail > now_us { stored_tail } else { now_us };
  let watermark_before = watermark;

  if weight == 0.0 {
    let delay_us = if watermark < max_burst || tail <= now_us { 0.0 } else { capped(tail - now_us) };
    // A pace probe reserves nothing, so it never holds back the members of its composite.
    let admitted = mode == Mode::Pace || delay_us == 0.0;
    let decision = Decision { delay_us, watermark_before, admitted };
    return Outcome { decision, save: None };
  }

  watermark += weight;
  let (shot, new_tail) =
    if watermark <= max_burst { (now_us, tail) } else { (tail, tail + (weight * 1e6 / qps).ceil()) };
  if watermark > max_burst {
    watermark = max_burst;
  }
  let admitted = mode == Mode::Pace || shot <= now_us;
  let decision = Decision { delay_us: capped(shot - now_us), watermark_before, admitted };
  if !admitted {
    return Outcome { decision, save: None };
  }
  let next = State { watermark, next_shot_us: new_tail, last_drip_us: now_us };
  Outcome { decision, save: Some((next, ttl_ms(&next, params, now_us))) }
}

/// How long a saved state matters: until the queue drains and the bucket has leaked empty,
/// rounded up to whole seconds (fewer distinct values: the Lua formats each one once), plus a
/// margin. After that the key is equivalent to a fresh one and may expire.
pub fn ttl_ms(state: &State, params: &Params, now_us: f64) -> f64 {
  let queued = state.next_shot_us - now_us;
  let drain = params.max_burst * 1e6 / (params.qps * params.factor);
  let busy = if queued > drain { queued } else { drain };
  let ttl = (busy / 1e6).ceil() * 1000.0 + TTL_MARGIN_MS;
  if ttl > MAX_TTL_MS {
    MAX_TTL_MS
  } else {
    ttl
  }
}

/// Gives back `weight` that a call took and will not use (it gave up before its slot, or its
/// caller decided not to make the call), exactly: a paced slot that starts `start_in_us` from
/// now goes back only while it is the last one queued (the tail is its end, within half its
/// width or 1 ms: the caller's estimate of the store's clock), and the tail moves back to its
/// start (never before now); a slot with later ones queued after it stays spent (taking it
/// back would let the next caller start with the last one queued: the caller keeps it for
/// its own process's next call). With no queue and `start_in_us` 0, the weight goes back to
/// the bucket (after its leak, never below empty). Returns the state to save and its TTL in
/// ms, or `None` when nothing was given back (a fresh key, or a slot with others after it).
/// Mirrored by `lua/pacer_give.lua`.
pub fn give(state: Option<State>, params: &Params, weight: f64, start_in_us: f64, now_us: f64) -> Option<(State, f64)> {
  let s = state?;
  let mut next = s;
  if s.next_shot_us > now_us {
    let width = (weight * 1e6 / params.qps).ceil();
    let tolerance = if width / 2.0 < 1000.0 { width / 2.0 } else { 1000.0 };
    let end = now_us + start_in_us + width;
    if (s.next_shot_us - end).abs() > tolerance {
      return None;
    }
    let back = s.next_shot_us - width;
    next.next_shot_us = if back > now_us { back } else { now_us };
  } else if start_in_us == 0.0 {
    let since = if s.last_drip_us > s.next_shot_us { s.last_drip_us } else { s.next_shot_us };
    let mut watermark = s.watermark;
    if since < now_us {
      watermark -= (now_us - since) * params.qps * params.factor / 1e6;
    }
    watermark -= weight;
    next.watermark = if watermark < 0.0 { 0.0 } else { watermark };
    next.last_drip_us = now_us;
  } else {
    return None;
  }
  Some((next, ttl_ms(&next, params, now_us)))
}

/// Blocks a pacer for `duration_us` from now (or keeps a later queue tail): the bucket is full
/// and the queue tail is at the block's end, so a rate-limit call is refused and a paced call
/// waits until then, and calls resume at `qps` after it. Returns the state to save and its
/// TTL in ms (the block, then the bucket's drain, plus the margin). Mirrored by
/// `lua/pacer_block.lua`.
pub fn block(state: Option<State>, params: &Params, duration_us: f64, now_us: f64) -> (State, f64) {
  let queued = state.map_or(now_us, |s| s.next_shot_us);
  let tail = if queued > now_us + duration_us { queued } else { now_us + duration_us };
  let next = State { watermark: params.max_burst, next_shot_us: tail, last_drip_us: now_us };
  let busy = tail - now_us + params.max_burst * 1e6 / (params.qps * params.factor);
  let ttl = (busy / 1e6).ceil() * 1000.0 + TTL_MARGIN_MS;
  (next, if ttl > MAX_TTL_MS { MAX_TTL_MS } else { ttl })
}

/// The result of a group of calls decided together (a `PacerComposite` call): in rate-limit
/// mode either every member is charged or none is.
pub fn step_group(states: &mut [Option<State>], members: &[(usize, Params, f64)], now_us: f64) -> Vec<Outcome> {
  // Members may share a key: each sees the tentative state left by the ones before it.
  let mut tentative: Vec<Option<State>> = states.to_vec();
  let mut outcomes = Vec::with_capacity(members.len());
  let mut all_admitted = true;
  for (slot, params, weight) in members {
    let outcome = step(tentative[*slot], params, *weight, now_us);
    if let Some((next, _)) = outcome.save {
      tentative[*slot] = Some(next);
    }
    all_admitted &= outcome.decision.admitted;
    outcomes.push(outcome);
  }
  if all_admitted {
    states.copy_from_slice(&tentative);
  } else {
    for outcome in &mut outcomes {
      outcome.save = None;
      outcome.decision.admitted = false;
    }
  }
  outcomes
}

#[cfg(test)]
mod tests;
