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
mod tests {
  use super::*;
  use proptest::prelude::*;

  const S: f64 = 1e6;

  fn params(qps: f64, max_burst: f64, factor: f64, mode: Mode) -> Params {
    Params { qps, max_burst, factor, mode }
  }

  /// Runs calls on one key, keeping the state like a store would.
  struct Key {
    state: Option<State>,
  }
  impl Key {
    fn new() -> Self {
      Key { state: None }
    }
    fn call(&mut self, p: &Params, weight: f64, now_us: f64) -> Decision {
      let o = step(self.state, p, weight, now_us);
      if let Some((s, ttl)) = o.save {
        assert!(ttl > 0.0 && ttl.is_finite());
        self.state = Some(s);
      }
      o.decision
    }
  }

  #[test]
  fn pace_spaces_calls_at_qps_after_the_burst() {
    let p = params(10.0, 2.0, 0.5, Mode::Pace);
    let mut k = Key::new();
    let t0 = 1_000.0 * S;
    let delays: Vec<f64> = (0..6).map(|_| k.call(&p, 1.0, t0).delay_us).collect();
    // B = 2 gives 3 free calls (the first overflow is free), then 100 ms apart.
    assert_eq!(delays, vec![0.0, 0.0, 0.0, 100_000.0, 200_000.0, 300_000.0]);
  }

  #[test]
  fn rate_limit_refuses_until_the_tail_and_admits_at_it() {
    let p = params(10.0, 0.0, 1.0, Mode::RateLimit);
    let mut k = Key::new();
    let t0 = 5.0 * S;
    assert!(k.call(&p, 1.0, t0).admitted);
    let refused = k.call(&p, 1.0, t0 + 50_000.0);
    assert!(!refused.admitted);
    assert_eq!(refused.delay_us, 50_000.0);
    assert!(!k.call(&p, 1.0, t0 + 99_999.0).admitted);
    assert!(k.call(&p, 1.0, t0 + 100_000.0).admitted);
  }

  #[test]
  fn rate_limit_does_not_double_admit_when_the_queue_drains() {
    // The reference admits two calls per 1/qps here (bucket leak + free overflow).
    let p = params(10.0, 5.0, 1.0, Mode::RateLimit);
    let mut k = Key::new();
    let mut admitted = 0;
    let mut t = 0.0;
    while t < 10.0 * S {
      if k.call(&p, 1.0, t).admitted {
        admitted += 1;
      }
      t += 1_000.0; // 1000 calls/s offered
    }
    // 5 burst + 1 free overflow + 10/s for ~10 s.
    assert!(admitted <= 6 + 100, "admitted {admitted}");
    assert!(admitted >= 100, "admitted {admitted}");
  }

  #[test]
  fn weight_zero_never_mutates_and_respects_the_queue() {
    let p = params(10.0, 0.0, 0.5, Mode::Pace);
    let mut k = Key::new();
    k.call(&p, 1.0, 0.0);
    k.call(&p, 1.0, 0.0); // queued to 100 ms
    let before = k.state;
    let probe = step(k.state, &p, 0.0, 10_000.0);
    assert_eq!(probe.save, None);
    assert_eq!(probe.decision.delay_us, 190_000.0);
    assert_eq!(k.state, before);
    assert_eq!(step(None, &p, 0.0, 0.0).decision.delay_us, 0.0);
  }

  #[test]
  fn a_refused_rate_limit_writes_nothing() {
    let p = params(1.0, 0.0, 1.0, Mode::RateLimit);
    let first = step(None, &p, 1.0, 0.0);
    let s = first.save.unwrap().0;
    assert_eq!(step(Some(s), &p, 1.0, 1.0).save, None);
  }

  #[test]
  fn fresh_key_overflowing_weight_passes_and_blocks_the_rest() {
    let p = params(10.0, 5.0, 1.0, Mode::RateLimit);
    let mut k = Key::new();
    assert!(k.call(&p, 20.0, 0.0).admitted);
    let next = k.call(&p, 1.0, 1.0);
    assert!(!next.admitted);
    assert_eq!(next.delay_us, 2_000_000.0 - 1.0);
  }

  #[test]
  fn ttl_covers_the_queue_and_the_drain() {
    let p = params(1.0, 100.0, 0.5, Mode::Pace);
    let o = step(None, &p, 1.0, 0.0);
    // drain of 100 units at 0.5/s = 200 s, plus the margin
    assert_eq!(o.save.unwrap().1, 200_000.0 + TTL_MARGIN_MS);
  }

  #[test]
  fn ttl_is_capped_for_extreme_schedules() {
    let p = params(1e-6, 1e9, 1e-9, Mode::Pace);
    let o = step(None, &p, 1e9, 0.0);
    assert_eq!(o.save.unwrap().1, MAX_TTL_MS);
  }

  #[test]
  fn a_clock_going_backwards_never_inflates_the_bucket() {
    let p = params(10.0, 3.0, 1.0, Mode::RateLimit);
    let mut k = Key::new();
    for _ in 0..4 {
      k.call(&p, 1.0, 10.0 * S);
    }
    let back = k.call(&p, 1.0, 9.0 * S);
    assert!(!back.admitted);
  }

  #[test]
  fn group_charges_no_member_when_one_refuses() {
    let user = params(10.0, 100.0, 1.0, Mode::RateLimit);
    let global = params(1.0, 0.0, 1.0, Mode::RateLimit);
    let mut states = vec![None, None];
    let members = [(0, user, 1.0), (1, global, 1.0)];
    let first = step_group(&mut states, &members, 0.0);
    assert!(first.iter().all(|o| o.decision.admitted));
    let user_after_first = states[0];
    for t in [1_000.0, 2_000.0] {
      let o = step_group(&mut states, &members, t);
      assert!(!o[1].decision.admitted && !o[0].decision.admitted);
      assert!(o.iter().all(|o| o.save.is_none()));
    }
    assert_eq!(states[0], user_after_first);
  }

  #[test]
  fn group_members_sharing_a_key_see_each_other() {
    let p = params(10.0, 1.0, 1.0, Mode::RateLimit);
    let mut states = vec![None];
    let o = step_group(&mut states, &[(0, p, 1.0), (0, p, 1.0), (0, p, 1.0)], 0.0);
    // 1 room + 1 free overflow; the third is refused, so none is charged.
    assert!(!o[2].decision.admitted);
    assert_eq!(states[0], None);
  }

  fn arb_params(mode: Mode) -> impl Strategy<Value = Params> {
    (1u32..200, 0u32..20, 1u32..=4).prop_map(move |(qps, burst, f)| Params {
      qps: qps as f64 / 4.0,
      max_burst: burst as f64,
      factor: f as f64 / 4.0,
      mode,
    })
  }

  proptest! {
    /// Over any span of T seconds, admitted weight <= max_burst + qps*T + the opening call.
    #[test]
    fn rate_limit_never_exceeds_the_bound(
      p in arb_params(Mode::RateLimit),
      calls in prop::collection::vec((1u32..5, 0u64..200_000), 1..300),
    ) {
      let mut k = Key::new();
      let mut t = 1_000_000.0;
      let mut admitted: Vec<(f64, f64)> = vec![];
      for (w, gap) in calls {
        t += gap as f64;
        let w = w as f64 / 2.0;
        if k.call(&p, w, t).admitted { admitted.push((t, w)); }
      }
      let max_w = admitted.iter().map(|a| a.1).fold(0.0, f64::max);
      for i in 0..admitted.len() {
        let mut sum = 0.0;
        for j in i..admitted.len() {
          sum += admitted[j].1;
          let span_s = (admitted[j].0 - admitted[i].0) / 1e6;
          // +2 µs per admission of slack: tails are rounded up to whole µs.
          prop_assert!(sum <= p.max_burst + p.qps * span_s + max_w + 1e-9,
            "sum {} over {} s, p {:?}", sum, span_s, p);
        }
      }
    }

    /// A refusal's delay is exact: refused just before it, admitted at it.
    #[test]
    fn retry_after_is_exact(
      p in arb_params(Mode::RateLimit),
      calls in prop::collection::vec((1u32..4, 0u64..50_000), 1..60),
    ) {
      let mut k = Key::new();
      let mut t = 0.0;
      for (w, gap) in calls {
        t += gap as f64;
        let w = w as f64;
        let d = k.call(&p, w, t);
        if !d.admitted {
          let at = t + d.delay_us;
          prop_assert!(!step(k.state, &p, w, at - 1.0).decision.admitted);
          prop_assert!(step(k.state, &p, w, at).decision.admitted);
        }
      }
    }

    /// Weight 0 never changes state, in either mode.
    #[test]
    fn weight_zero_is_a_pure_probe(
      p in arb_params(Mode::Pace),
      calls in prop::collection::vec((0u32..3, 0u64..300_000), 1..60),
    ) {
      let mut k = Key::new();
      let mut t = 0.0;
      for (w, gap) in calls {
        t += gap as f64;
        if w == 0 {
          prop_assert_eq!(step(k.state, &p, 0.0, t).save, None);
        } else {
          k.call(&p, w as f64, t);
        }
      }
    }

    /// Pace under overload schedules exactly at qps: the n-th queued call starts n/qps later.
    #[test]
    fn pace_schedule_is_monotonic_and_spaced(p in arb_params(Mode::Pace), n in 1usize..100) {
      let mut k = Key::new();
      let mut last = -1.0;
      for _ in 0..n {
        let d = k.call(&p, 1.0, 0.0);
        prop_assert!(d.delay_us >= last);
        if last >= 0.0 && d.delay_us > 0.0 {
          prop_assert!(d.delay_us - last <= (1e6 / p.qps).ceil());
        }
        last = d.delay_us;
      }
    }
  }
}
