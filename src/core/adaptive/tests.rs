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
fn a_throttled_answer_settles_under_what_was_served_once_per_period_then_holds() {
  let mut s = State::default();
  pace(&mut s, &P, 0.0, 0.0, 0.0);
  s.mark = 45.0; // measured before: the rate climbs slowly (inc_rel)
                 // 40 served per second for two seconds
  serve(&mut s, &P, 80, 25_000.0, 2_025_000.0);
  let r = throttle(&mut s, &P, 1e6, 2.03e6);
  assert!(r.decreased);
  assert!((s.mark - 40.0).abs() <= 1.0, "mark {}", s.mark);
  assert!((r.rate - 0.9 * s.mark).abs() < 1e-9, "{r:?}");
  // the 429s of the calls already on their way: the same period
  let again = throttle(&mut s, &P, 1e6, 2.5e6);
  assert!(!again.decreased);
  assert_eq!(again.rate, r.rate);
  // after the block, calls that succeed do not raise it for PLATEAU_US...
  let from = 2.03e6 + 1e6 + PLATEAU_US;
  serve(&mut s, &P, 36 * 30, from - 30e6, from);
  assert_eq!(pace(&mut s, &P, 0.0, 0.0, from - 1.0).rate, r.rate);
  // ...then by inc_rel per second of calls, each its share
  serve(&mut s, &P, 36, from, from + 1e6);
  let climbed = pace(&mut s, &P, 0.0, 0.0, from + 1e6).rate;
  assert!((climbed / r.rate - 1.01).abs() < 0.001, "{climbed} from {}", r.rate);
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
fn after_a_fast_climb_it_settles_at_what_was_served() {
  let mut s = State::default();
  let p = Params { max_qps: 1000.0, start_qps: 1000.0, ..P };
  pace(&mut s, &p, 0.0, 0.0, 0.0);
  throttle(&mut s, &p, 1e6, 1000.0); // nothing served: blind, 62.5
                                     // the climb: 2 seconds of calls at the rate, then the upstream refuses at about 80
  serve(&mut s, &p, 140, 1.01e6, 3.01e6);
  let before = s.rate;
  assert!(before > 80.0, "climbed to {before}");
  let r = throttle(&mut s, &p, 1e6, 3.02e6);
  // what was served over the last second (70 a second: its calls were slots taken at lower
  // rates), not under it
  assert_eq!(r.rate, s.mark);
  assert!((s.mark - 70.0).abs() < 2.0, "{}", s.mark);
}

#[test]
fn the_next_measure_counts_the_block_as_nothing_served() {
  // a fixed window of 100 per second whose first second straddled two of its windows: 200
  // served in 0.2 s, the rate settles at 0.9 x 200; after the block, 100 more in 0.5 s, and
  // a 429: what was served over the last second is 100, not 100 plus a share of the 200
  let mut s = State::default();
  let p = Params { max_qps: 1000.0, start_qps: 1000.0, ..P };
  pace(&mut s, &p, 0.0, 0.0, 0.0);
  serve(&mut s, &p, 200, 0.0, 0.2e6);
  let first = throttle(&mut s, &p, 1e6, 0.2e6);
  assert_eq!((s.mark, first.rate), (200.0, 180.0));
  serve(&mut s, &p, 100, 1.2e6, 1.7e6);
  let second = throttle(&mut s, &p, 1e6, 1.7e6);
  assert!(second.decreased);
  assert_eq!(s.mark, 100.0);
}

#[test]
fn late_successes_of_calls_sent_before_a_decrease_belong_to_its_measure() {
  let mut s = State::default();
  let p = Params { max_qps: 1000.0, start_qps: 1000.0, ..P };
  pace(&mut s, &p, 0.0, 0.0, 0.0);
  serve(&mut s, &p, 80, 0.0, 0.3e6);
  throttle(&mut s, &p, 1e6, 0.3e6);
  assert_eq!((s.mark, s.rate), (80.0, 72.0));
  // 20 more told during the block, of calls sent before the 429 (20 ms before it)
  pace(&mut s, &p, 20.0, 0.04e6, 0.32e6);
  assert_eq!((s.mark, s.rate), (100.0, 90.0));
  // one sent after it (a process that had not heard of the block yet): counted, not the measure's
  pace(&mut s, &p, 1.0, 0.01e6, 0.35e6);
  assert_eq!((s.mark, s.rate, s.cur_ok), (100.0, 90.0, 1.0));
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
  t.report(
    &p,
    &Answer { throttled: false, ok: 0.0, sent_ago_us: 0.0, block_us: 0.0, learned_qps: 100.0, learned_ttl_us: 1000.0 },
    0.0,
  );
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
