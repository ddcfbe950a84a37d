//! The pacer's unit and property tests, on a manual clock (see the module docs).

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
fn the_last_slot_given_back_goes_to_the_next_caller_and_an_earlier_one_stays_spent() {
  let p = params(10.0, 0.0, 1.0, Mode::Pace);
  let mut k = Key::new();
  let t0 = 1_000.0 * S;
  let delays: Vec<f64> = (0..4).map(|_| k.call(&p, 1.0, t0).delay_us).collect();
  assert_eq!(delays, vec![0.0, 100_000.0, 200_000.0, 300_000.0]);
  // a slot with others queued after it is not taken back (nothing saved)
  assert!(give(k.state, &p, 1.0, 190_000.0, t0 + 10_000.0).is_none());
  // the last one is, within 1 ms of the caller's estimate: the next caller takes its place
  let (s, ttl) = give(k.state, &p, 1.0, 290_400.0, t0 + 10_000.0).unwrap();
  assert!(ttl > 0.0);
  k.state = Some(s);
  assert_eq!(k.call(&p, 1.0, t0 + 10_000.0).delay_us, 290_000.0);
  // a fresh key has nothing to give back
  assert!(give(None, &p, 1.0, 0.0, t0).is_none());
}

#[test]
fn a_weight_given_back_with_no_queue_leaves_the_bucket_never_below_empty() {
  let p = params(10.0, 5.0, 1.0, Mode::RateLimit);
  let mut k = Key::new();
  let t0 = 1_000.0 * S;
  for _ in 0..5 {
    assert!(k.call(&p, 1.0, t0).admitted);
  }
  let (s, _) = give(k.state, &p, 2.0, 0.0, t0).unwrap();
  assert_eq!(s.watermark, 3.0);
  k.state = Some(s);
  assert!(k.call(&p, 2.0, t0).admitted, "the bucket has room for what was given back");
  let (s, _) = give(k.state, &p, 1e6, 0.0, t0 + S).unwrap();
  assert_eq!((s.watermark, s.last_drip_us), (0.0, t0 + S));
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
