//! The adaptive rate's unit tests, on a manual clock (see the module docs).

use super::*;

const P: Params =
  Params { max_qps: 100.0, min_qps: 1.0, start_qps: 50.0, inc_abs: 0.0, inc_rel: 0.01, decrease: 0.1, burst: 0.0 };

/// A pace of weight 1 telling `ok` successes, the latest sent `ago` µs before `now`.
fn pace(s: &mut State, p: &Params, ok: f64, ago: f64, now: f64) -> Slot {
  s.pace(p, 1.0, ok, ago, -1.0, now)
}

/// A throttled answer with a block of `block` µs.
fn throttle(s: &mut State, p: &Params, block: f64, now: f64) -> Reported {
  s.report(p, &Answer { throttled: true, block_us: block, ..Answer::default() }, now)
}

/// `n` successes spread evenly over [from, to) µs, each told by a pace.
fn serve(s: &mut State, p: &Params, n: usize, from: f64, to: f64) {
  for i in 0..n {
    pace(s, p, 1.0, 0.0, from + (to - from) * i as f64 / n as f64);
  }
}

#[test]
fn paces_at_the_rate_from_start_qps() {
  let mut s = State::default();
  let a = pace(&mut s, &P, 0.0, 0.0, 0.0);
  let b = pace(&mut s, &P, 0.0, 0.0, 0.0);
  assert_eq!((a.delay_us, a.rate, b.delay_us), (0.0, 50.0, 20_000.0));
}

#[test]
fn a_burst_starts_at_once_after_a_quiet_spell_and_a_block_spends_it() {
  let p = Params { burst: 2.0, ..P };
  let mut s = State::default();
  let delays: Vec<f64> = (0..4).map(|_| pace(&mut s, &p, 0.0, 0.0, 1e6).delay_us).collect();
  assert_eq!(delays, [0.0, 0.0, 0.0, 20_000.0]);
  s.report(&p, &Answer { block_us: 1e6, ..Answer::default() }, 10e6);
  let after: Vec<f64> = (0..2).map(|_| pace(&mut s, &p, 0.0, 0.0, 11e6).delay_us).collect();
  assert_eq!(after, [0.0, 20_000.0]);
}

#[test]
fn refuses_a_slot_past_max_wait_without_charging() {
  let mut s = State::default();
  pace(&mut s, &P, 0.0, 0.0, 0.0);
  let refused = s.pace(&P, 1.0, 0.0, 0.0, 10_000.0, 0.0);
  assert!(!refused.admitted);
  assert_eq!(pace(&mut s, &P, 0.0, 0.0, 0.0).delay_us, 20_000.0);
}

#[test]
fn blocks_extend_and_never_add_up() {
  let mut s = State::default();
  let block =
    |s: &mut State, us: f64, now: f64| s.report(&P, &Answer { block_us: us, ..Answer::default() }, now).block_us;
  assert_eq!(block(&mut s, 5e6, 0.0), 5e6);
  assert_eq!(block(&mut s, 5e6, 1000.0), 5e6 - 1000.0);
  assert_eq!(block(&mut s, 1e6, 2000.0), 5e6 - 2000.0);
  assert_eq!(pace(&mut s, &P, 0.0, 0.0, 2000.0).delay_us, 5e6 - 2000.0);
  // a second or more past the end: extended (an upstream that asks for longer)
  assert_eq!(block(&mut s, 7e6, 3000.0), 7e6);
  // after it: a new block
  assert_eq!(block(&mut s, 1e6, 20e6), 1e6);
}

#[test]
fn a_burst_then_refusals_cuts_to_the_geometric_middle_and_climbs_fast() {
  let mut s = State::default();
  let p = Params { max_qps: 1000.0, start_qps: 1000.0, ..P };
  pace(&mut s, &p, 0.0, 0.0, 0.0);
  // 5 served (a burst) then a 429: 5 per second against 1000 says only "too fast"
  serve(&mut s, &p, 5, 1000.0, 6000.0);
  let r = throttle(&mut s, &p, 1e6, 8000.0);
  assert!(r.decreased);
  assert!((r.rate - (5.0f64 * 1000.0).sqrt()).abs() < 1e-9, "{r:?}");
  assert_eq!(s.mark, 0.0);
  // nothing served at all: by BLIND; a little less than half of the rate served: by half
  let mut none = State::default();
  pace(&mut none, &p, 0.0, 0.0, 0.0);
  assert_eq!(throttle(&mut none, &p, 1e6, 8000.0).rate, 1000.0 / BLIND);
  // fast climb (no mark): a second of calls at the rate raises it by FAST_INC_REL
  let rate = r.rate;
  serve(&mut s, &p, rate as usize, 1.01e6, 2.01e6);
  let up = pace(&mut s, &p, 0.0, 0.0, 2.01e6).rate;
  assert!((up / rate - (1.0 + FAST_INC_REL)).abs() < 0.02, "{up} from {rate}");
}

#[test]
fn the_climb_stops_when_the_rate_is_not_used() {
  let mut s = State::default();
  let p = Params { max_qps: 1000.0, start_qps: 100.0, ..P };
  pace(&mut s, &p, 0.0, 0.0, 0.0);
  // 10 calls a second succeed for a minute: the rate climbs to 1.5 x 10 at most... it starts
  // above that, so it never climbs
  for i in 0..600 {
    pace(&mut s, &p, 1.0, 0.0, 1e6 + i as f64 * 100_000.0);
  }
  assert_eq!(pace(&mut s, &p, 0.0, 0.0, 61e6).rate, 100.0);
}

#[test]
fn a_throttled_answer_under_a_stated_limit_settles_under_it_not_blind() {
  let mut s = State::default();
  let p = Params { max_qps: 1000.0, start_qps: 1000.0, ..P };
  // the first answers state 100 per second (learned for a minute); 5 served, then a 429
  s.report(&p, &Answer { learned_qps: 100.0, learned_ttl_us: 60e6, ..Answer::default() }, 0.0);
  serve(&mut s, &p, 5, 1000.0, 6000.0);
  let r = throttle(&mut s, &p, 1e6, 8000.0);
  assert_eq!((s.mark, r.rate), (100.0, 90.0));
  // once it expires, the measure decides again
  let mut t = State::default();
  t.report(&p, &Answer { learned_qps: 100.0, learned_ttl_us: 1000.0, ..Answer::default() }, 0.0);
  serve(&mut t, &p, 5, 1000.0, 6000.0);
  throttle(&mut t, &p, 1e6, 8000.0);
  assert_eq!(t.mark, 0.0);
}

#[test]
fn a_learned_rate_is_a_ceiling_until_it_expires_and_wins_over_min_qps() {
  let mut s = State::default();
  s.report(&P, &Answer { learned_qps: 0.5, learned_ttl_us: 10e6, ..Answer::default() }, 0.0);
  assert_eq!(pace(&mut s, &P, 0.0, 0.0, 0.0).rate, 0.5);
  assert_eq!(s.ceiling(&P, 10e6), 100.0);
}

#[test]
fn the_last_slot_given_back_goes_to_the_next_caller_and_an_earlier_one_stays_spent() {
  let mut s = State::default();
  let slots: Vec<f64> = (0..4).map(|_| pace(&mut s, &P, 0.0, 0.0, 0.0).delay_us).collect();
  assert_eq!(slots, vec![0.0, 20_000.0, 40_000.0, 60_000.0]);
  // a slot with later ones after it stays spent
  let before = s;
  assert!(!s.give(&P, 1.0, 39_000.0, 1_000.0).admitted);
  assert_eq!(s, before);
  // the last one goes back (the caller's estimate within 1 ms): the next caller takes it
  assert!(s.give(&P, 1.0, 59_400.0, 1_000.0).admitted);
  assert_eq!(pace(&mut s, &P, 0.0, 0.0, 1_000.0).delay_us, 59_000.0);
  // nothing else changed but the tail
  let tail = s.tail_us;
  assert!(s.give(&P, 1.0, 30_000.0, 30_000.0).admitted);
  assert_eq!(State { tail_us: tail, ..s }, State { tail_us: tail, ..before });
}

// --- The cycles (cycle.rs): a throttled answer with no stated limit ends one

const Q: Params =
  Params { max_qps: 1000.0, min_qps: 1.0, start_qps: 1000.0, inc_abs: 0.0, inc_rel: 0.0, decrease: 0.05, burst: 100.0 };

/// A throttled answer (a block of 1 s) whose call was sent `ago` µs before `now`.
fn refused(s: &mut State, p: &Params, ago: f64, now: f64) -> Reported {
  s.report(p, &Answer { throttled: true, block_us: 1e6, sent_t_ago_us: ago, ..Answer::default() }, now)
}

/// A cycle after the last decrease: `ok` successes told at once, `f` µs of calls after the back-off
/// period, the last of them refused (answered 10 ms after it was sent).
fn cycle(s: &mut State, p: &Params, ok: f64, f: f64) -> Reported {
  let sent = s.hold_until_us + f;
  s.report(p, &Answer { ok, ..Answer::default() }, sent);
  refused(s, p, 10_000.0, sent + 10_000.0)
}

/// A fresh record whose first cycle served `ok` in `f` µs before its first refusal.
fn first_cycle(p: &Params, ok: f64, f: f64) -> State {
  let mut s = State::default();
  pace(&mut s, p, 0.0, 0.0, 0.0);
  s.report(p, &Answer { ok, ..Answer::default() }, f);
  refused(&mut s, p, 10_000.0, f + 10_000.0);
  s
}

#[test]
fn a_fresh_records_first_cycle_reads_the_burst_and_a_slot_uses_less_than_it() {
  let s = first_cycle(&Q, 40.0, 0.2e6);
  // what was served before the first refusal is the burst, about; the cut is the geometric
  // middle of the rate and what was served, with no mark, and the next cycle starts
  assert_eq!((s.be, s.cyc_n, s.cyc[0], s.cyc[1], s.mark), (40.0, 1.0, 40.0, 0.2e6, 0.0));
  assert_eq!(s.rate, (40.0f64 * 1000.0).sqrt());
  assert_eq!((s.cs_us, s.cok, s.r0), (0.21e6, 0.0, s.rate));
  // after a quiet spell, a slot may start be - 1 = 39 slots early (not the 100 of `burst`): 40 at once
  let mut t = s;
  let now = 100e6;
  let at_once = (0..120).take_while(|_| pace(&mut t, &Q, 0.0, 0.0, now).delay_us == 0.0).count();
  assert_eq!(at_once, 40);
  let mut fresh = State::default();
  assert_eq!((0..120).take_while(|_| pace(&mut fresh, &Q, 0.0, 0.0, now).delay_us == 0.0).count(), 101);
}

#[test]
fn successes_of_calls_sent_before_the_cycle_are_not_its_own() {
  let mut s = first_cycle(&Q, 40.0, 0.2e6);
  // 5 told during the block, of calls sent before the refusal: not the new cycle's
  s.report(&Q, &Answer { ok: 5.0, sent_ago_us: 100_000.0, ..Answer::default() }, 0.3e6);
  assert_eq!(s.cok, 0.0);
  // 3 sent after it: the new cycle's
  s.report(&Q, &Answer { ok: 3.0, sent_ago_us: 10_000.0, ..Answer::default() }, 0.3e6);
  assert_eq!(s.cok, 3.0);
}

#[test]
fn two_cycles_of_a_token_bucket_fit_its_burst_and_rate() {
  // a bucket of 100/s with a burst of 20: 40 in the first 0.2 s, 70 in 0.5 s of calls
  let mut s = first_cycle(&Q, 40.0, 0.2e6);
  let r = cycle(&mut s, &Q, 70.0, 0.5e6);
  assert!(r.decreased);
  // b + r f: r = 30 / 0.3 s = 100, b = 70 - 50 = 20 (the first cycle's 40 lowered)
  assert!((s.be - 20.0).abs() < 1e-9, "{}", s.be);
  assert_eq!((s.bucket_fit, s.cyc_n), (1.0, 2.0));
  // the estimate: (S - be + 1) / f = 102/s (the refused call bounds the rate), then decrease
  assert!((s.mark - 102.0).abs() < 1e-9, "{}", s.mark);
  assert!((r.rate - 102.0 * 0.95).abs() < 1e-9, "{r:?}");
  assert_eq!(s.last_inc_us, s.hold_until_us + PLATEAU_US);
}

#[test]
fn after_a_fit_read_a_bucket_the_last_seconds_count_is_less_its_burst() {
  let mut s = first_cycle(&Q, 40.0, 0.2e6);
  cycle(&mut s, &Q, 70.0, 0.5e6);
  // (as if the rate were far above: the mark is the estimate, not the rate)
  (s.rate, s.r0) = (500.0, 500.0);
  // a second of calls served 120 (the burst of 20 on top of 100/s): read as 100 + 1/s, not 120
  cycle(&mut s, &Q, 120.0, 1e6);
  assert_eq!((s.be, s.bucket_fit), (20.0, 1.0));
  assert!((s.mark - 101.0).abs() < 1e-9, "{}", s.mark);
}

#[test]
fn two_cycles_of_a_fixed_window_read_a_window() {
  // a window of 100/s entered part way: the first cycle serves its rest (100 in 50 ms), the
  // next 100 in 0.5 s of calls: what a cycle serves does not grow with its length
  let mut s = first_cycle(&Q, 100.0, 0.05e6);
  cycle(&mut s, &Q, 100.0, 0.5e6);
  // no burst term: the last second's count, 100 (not (100 - 100 + 1) / 0.5 s), and the burst
  // estimate untouched
  assert_eq!((s.bucket_fit, s.be, s.mark), (0.0, 100.0, 100.0));
}

#[test]
fn a_cycle_shorter_than_its_measure_only_lowers_the_rate_by_decrease() {
  let mut s = first_cycle(&Q, 40.0, 0.2e6);
  let before = s.rate;
  // 20 served over the last second: at least 1 / BLIND of the rate (200)
  // (told at once, they climb the rate a little: no plateau after the first refusal)
  cycle(&mut s, &Q, 20.0, 0.1e6);
  assert!(s.mark >= before && s.mark < before * 1.1, "{} from {before}", s.mark);
  assert_eq!(s.rate, s.mark * 0.95);
}

#[test]
fn the_queues_rate_history_is_bounded_to_one_entry_per_100_ms_16_and_3_s() {
  let check = |spacing: f64, expect_n: f64| {
    let mut s = State::default();
    pace(&mut s, &Q, 0.0, 0.0, 0.0);
    for k in 1..200 {
      let t = k as f64 * spacing;
      s.rate = 10.0 + k as f64;
      s.hand_out(t, t);
      let n = s.sendq_n as usize;
      assert!((1..=SENDQ).contains(&n));
      // the latest slots are at the rate now; entries are 100 ms apart at least (but the
      // second: the first entry is the record's creation, never updated)
      assert_eq!(s.send_rate(t), s.rate);
      for i in 2..n {
        assert!(s.sendq[2 * i] - s.sendq[2 * i - 2] >= SENDQ_DT_US, "{spacing} {k} {:?}", &s.sendq[..2 * n]);
      }
    }
    assert_eq!(s.sendq_n, expect_n, "{spacing}");
    s
  };
  // 150 ms apart: 16 entries (3 s would hold 21); 400 ms apart: the 3 s kept, and one before
  check(150_000.0, 16.0);
  let s = check(400_000.0, 9.0);
  let now = 199.0 * 400_000.0;
  assert!(s.sendq[2] >= now - 3e6 && s.sendq[0] < now - 3e6);
  // 50 ms apart: every other pace moves the last entry's rate only
  let s = check(50_000.0, 16.0);
  // a slot handed out at a time between two entries was spaced at the earlier one's rate
  let t = s.sendq[2 * 14] + 1.0;
  assert_eq!(s.send_rate(t), s.sendq[2 * 14 + 1]);
}

#[test]
fn a_short_cycle_far_over_the_limit_cuts_to_the_geometric_middle() {
  // 100 x over: the first refusal cut by BLIND at most (10,000 to 625), the burst of 5 served
  // again after the block, refused 10 ms later: too short to measure, 5 a second against 625
  let p = Params { max_qps: 10_000.0, start_qps: 10_000.0, ..Q };
  let mut s = first_cycle(&p, 5.0, 0.001e6);
  assert_eq!(s.rate, 10_000.0 / BLIND);
  let before = s.rate;
  cycle(&mut s, &p, 5.0, 0.01e6);
  assert_eq!((s.mark, s.rate), (0.0, (5.0 * before).sqrt()));
  // no plateau: the climb starts after the block
  assert_eq!(s.last_inc_us, s.hold_until_us);
}
