//! Tests of the budget model (`super`): table-driven cases on a manual clock, and properties:
//! the charge bound per dimension (debts and refunds counted), exact waits, refusals and reads
//! that change nothing.

use super::*;
use proptest::prelude::*;

const S: f64 = 1e6;

fn dim(limit: f64, interval_us: f64, max_burst: f64) -> Dimension {
  Dimension { limit, interval_us, max_burst, max_debt: limit + max_burst }
}

fn reserve(state: &mut State, dims: &[Dimension], id: &str, amounts: &[f64], now: f64) -> Reply {
  let r = Request::Reserve { id, amounts, ttl_us: 600.0 * S, max_wait_us: 1e15 };
  step(state, dims, &r, now).0
}

#[test]
fn charges_every_dimension_and_queues_on_the_tightest() {
  // 60 requests and 6000 tokens per minute, no burst
  let dims = [dim(60.0, 60.0 * S, 0.0), dim(6000.0, 60.0 * S, 0.0)];
  let mut st = State::default();
  let t0 = 1000.0 * S;
  assert_eq!(reserve(&mut st, &dims, "a", &[1.0, 3000.0], t0).delay_us, 0.0);
  // tokens: 3000 take 30 s to replenish; requests: 1 takes 1 s
  let b = reserve(&mut st, &dims, "b", &[1.0, 100.0], t0);
  assert_eq!(b.delay_us, 30.0 * S);
  // requests idle until b starts count as used: the queue holds them
  assert_eq!(b.dimensions, vec![(31.0, 2.0), (3100.0, 3100.0)]);
  // FIFO: a call charging only requests waits behind b (and for b's request)
  assert_eq!(reserve(&mut st, &dims, "c", &[1.0, 0.0], t0).delay_us, 31.0 * S);
}

#[test]
fn refuses_past_max_wait_and_changes_nothing() {
  let dims = [dim(10.0, S, 0.0)];
  let mut st = State::default();
  reserve(&mut st, &dims, "a", &[10.0], 0.0);
  let before = st.clone();
  let r = Request::Reserve { id: "b", amounts: &[1.0], ttl_us: S, max_wait_us: 999_999.0 };
  let (reply, changed) = step(&mut st, &dims, &r, 0.0);
  assert_eq!((reply.status, reply.delay_us, changed), (REFUSED, S, false));
  assert_eq!(st, before);
}

#[test]
fn a_refund_is_visible_at_once_and_debt_delays_the_next() {
  let dims = [dim(100.0, S, 0.0)];
  let mut st = State::default();
  reserve(&mut st, &dims, "a", &[100.0], 0.0);
  assert_eq!(step(&mut st, &dims, &Request::Settle { id: "a", actual: &[20.0] }, 0.0).0.status, OK);
  // 20 spent: the next waits 0.2 s instead of 1 s
  assert_eq!(reserve(&mut st, &dims, "b", &[1.0], 0.0).delay_us, 200_000.0);
  // b used 51: 50 of debt, half a second more for c
  step(&mut st, &dims, &Request::Settle { id: "b", actual: &[51.0] }, 200_000.0);
  assert_eq!(reserve(&mut st, &dims, "c", &[1.0], 200_000.0).delay_us, 510_000.0);
}

#[test]
fn settle_twice_cancel_after_settle_and_after_expiry_are_not_open() {
  let dims = [dim(10.0, S, 5.0)];
  let mut st = State::default();
  let r = Request::Reserve { id: "a", amounts: &[3.0], ttl_us: S, max_wait_us: 0.0 };
  step(&mut st, &dims, &r, 0.0);
  assert_eq!(step(&mut st, &dims, &Request::Settle { id: "a", actual: &[1.0] }, 1.0).0.status, OK);
  let before = st.clone();
  assert_eq!(step(&mut st, &dims, &Request::Settle { id: "a", actual: &[1.0] }, 2.0).0.status, NOT_OPEN);
  assert_eq!(step(&mut st, &dims, &Request::Cancel { id: "a" }, 2.0).0.status, NOT_OPEN);
  assert_eq!(st, before);
  let r = Request::Reserve { id: "b", amounts: &[3.0], ttl_us: S, max_wait_us: 0.0 };
  step(&mut st, &dims, &r, 0.0);
  let tats = st.tats.clone();
  let (reply, _) = step(&mut st, &dims, &Request::Cancel { id: "b" }, S);
  assert_eq!((reply.status, reply.expired, reply.open), (NOT_OPEN, 1.0, 0.0));
  assert_eq!(st.tats, tats, "an expired reservation stays spent");
}

#[test]
fn burst_admits_at_once_up_to_max_burst() {
  let dims = [dim(10.0, S, 5.0)];
  let mut st = State::default();
  let delays: Vec<f64> = (0..8).map(|i| reserve(&mut st, &dims, &format!("r{i}"), &[1.0], 0.0).delay_us).collect();
  // level <= 5 takes a charge: 6 at once, then one per 100 ms
  assert_eq!(delays, vec![0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 100_000.0, 200_000.0]);
}

#[test]
fn prunes_expired_reservations_earliest_first_a_few_per_call() {
  let dims = [dim(1e9, S, 1e9)];
  let mut st = State::default();
  for i in 0..(PRUNE + 10) {
    let id = format!("r{i}");
    let r = Request::Reserve { id: &id, amounts: &[1.0], ttl_us: 1000.0, max_wait_us: 0.0 };
    step(&mut st, &dims, &r, 0.0);
  }
  let (reply, _) = step(&mut st, &dims, &Request::Stats, 2000.0);
  assert_eq!((reply.open, reply.expired), (10.0, PRUNE as f64));
  let (reply, _) = step(&mut st, &dims, &Request::Stats, 2000.0);
  assert_eq!((reply.open, reply.expired, reply.dimensions[0].1), (0.0, PRUNE as f64 + 10.0, 0.0));
}

#[test]
fn ttl_covers_the_queue_the_dimensions_and_the_deadlines() {
  let dims = [dim(1.0, S, 0.0)];
  let mut st = State::default();
  reserve(&mut st, &dims, "a", &[1.0], 0.0);
  assert_eq!(ttl_ms(&st, 0.0), 600_000.0 + TTL_MARGIN_MS);
}

fn arb_dims() -> impl Strategy<Value = Vec<Dimension>> {
  prop::collection::vec(
    (1u32..50, prop::sample::select(vec![1000.0, 250_000.0, 1e6, 3e6]), 0u32..20)
      .prop_map(|(l, i, b)| dim(l as f64, i, b as f64)),
    1..4,
  )
}

#[derive(Clone, Debug)]
enum Op {
  Reserve(Vec<u32>, u64),
  Settle(usize, Vec<u32>),
  Cancel(usize),
}

fn arb_ops() -> impl Strategy<Value = Vec<(Op, u64)>> {
  let op = prop_oneof![
    4 => (prop::collection::vec(0u32..6, 3), 0u64..3_000_000).prop_map(|(a, w)| Op::Reserve(a, w)),
    2 => (0usize..40, prop::collection::vec(0u32..10, 3)).prop_map(|(i, a)| Op::Settle(i, a)),
    1 => (0usize..40).prop_map(Op::Cancel),
  ];
  prop::collection::vec((op, 0u64..300_000), 1..120)
}

proptest! {
  /// Per dimension, between reservations i and j (by start): charges + debts - refunds
  /// <= max_burst + rate * (s_j - s_i) + amount_j (+ rounding: one tick per event).
  #[test]
  fn never_charges_past_the_bound(dims in arb_dims(), ops in arb_ops()) {
    let n = dims.len();
    let mut st = State::default();
    let mut now = 1e9;
    // events in record order: (start of a reservation or None, net amount per dimension)
    let mut events: Vec<(Option<f64>, Vec<f64>)> = vec![];
    let mut made: Vec<(String, Vec<f64>)> = vec![];
    for (k, (op, gap)) in ops.into_iter().enumerate() {
      now += gap as f64;
      match op {
        Op::Reserve(a, max_wait) => {
          let amounts: Vec<f64> = (0..n).map(|d| (a[d] as f64).min(dims[d].limit + dims[d].max_burst)).collect();
          let id = format!("r{k}");
          let r = Request::Reserve { id: &id, amounts: &amounts, ttl_us: 2e6, max_wait_us: max_wait as f64 };
          let (reply, _) = step(&mut st, &dims, &r, now);
          if reply.status == OK {
            events.push((Some(now + reply.delay_us), amounts.clone()));
            made.push((id, amounts));
          }
        }
        Op::Settle(i, a) if i < made.len() => {
          let actual: Vec<f64> = (0..n).map(|d| a[d] as f64).collect();
          let before = st.tats.clone();
          let (reply, _) = step(&mut st, &dims, &Request::Settle { id: &made[i].0, actual: &actual }, now);
          if reply.status == OK {
            // what the state gave back or charged, in amounts (the refund clamps at now)
            let net = (0..n).map(|d| (st.tats[d] - before[d]) * dims[d].limit / dims[d].interval_us).collect();
            events.push((None, net));
          }
        }
        Op::Cancel(i) if i < made.len() => {
          let before = st.tats.clone();
          let (reply, _) = step(&mut st, &dims, &Request::Cancel { id: &made[i].0 }, now);
          if reply.status == OK {
            let net = (0..n).map(|d| (st.tats[d] - before[d]) * dims[d].limit / dims[d].interval_us).collect();
            events.push((None, net));
          }
        }
        _ => {}
      }
    }
    let starts: Vec<usize> = (0..events.len()).filter(|e| events[*e].0.is_some()).collect();
    for pair in starts.windows(2) {
      prop_assert!(events[pair[1]].0 >= events[pair[0]].0, "FIFO: starts never go back");
    }
    for (d, dim) in dims.iter().enumerate() {
      // reservations that charge d (the bound is about them: a debt recorded before a queued
      // reservation starts is spent before it, not between)
      let charging: Vec<usize> = starts.iter().copied().filter(|e| events[*e].1[d] > 0.0).collect();
      for (x, &i) in charging.iter().enumerate() {
        for &j in &charging[x..] {
          let (si, sj) = (events[i].0.unwrap_or(0.0), events[j].0.unwrap_or(0.0));
          let charged: f64 = events[i..=j].iter().map(|e| e.1[d]).sum();
          // + one tick of rounding (the last charge's cost is rounded up to a whole µs)
          let bound = dim.max_burst + dim.limit * (sj - si + 1.0) / dim.interval_us + events[j].1[d] + 1e-6;
          prop_assert!(charged <= bound, "dim {} charged {} > {} between {} and {}", d, charged, bound, i, j);
        }
      }
    }
  }

  /// A refused reservation changes nothing; an admitted one's wait is exact: a reservation
  /// of the same amounts with a max wait 1 µs shorter is refused.
  #[test]
  fn a_wait_is_exact_and_a_refusal_changes_nothing(dims in arb_dims(), ops in arb_ops()) {
    let n = dims.len();
    let mut st = State::default();
    let mut now = 1e9;
    for (k, (op, gap)) in ops.into_iter().enumerate() {
      now += gap as f64;
      if let Op::Reserve(a, max_wait) = op {
        let amounts: Vec<f64> = (0..n).map(|d| (a[d] as f64).min(dims[d].limit)).collect();
        let id = format!("r{k}");
        let probe = Request::Reserve { id: &id, amounts: &amounts, ttl_us: 2e6, max_wait_us: 1e15 };
        let delay = step(&mut st.clone(), &dims, &probe, now).0.delay_us;
        if delay > 0.0 {
          let short = Request::Reserve { id: &id, amounts: &amounts, ttl_us: 2e6, max_wait_us: delay - 1.0 };
          step(&mut st, &dims, &Request::Stats, now); // expired reservations go first
          let before = st.clone();
          let (reply, _) = step(&mut st, &dims, &short, now);
          prop_assert_eq!(reply.status, REFUSED);
          prop_assert_eq!(&st, &before);
        }
        let r = Request::Reserve { id: &id, amounts: &amounts, ttl_us: 2e6, max_wait_us: max_wait as f64 };
        step(&mut st, &dims, &r, now);
      }
    }
  }

  /// Stats and an unknown id never change a dimension or the queue.
  #[test]
  fn reads_never_charge(dims in arb_dims(), ops in arb_ops()) {
    let n = dims.len();
    let mut st = State::default();
    let mut now = 1e9;
    for (k, (op, gap)) in ops.into_iter().enumerate() {
      now += gap as f64;
      let amounts: Vec<f64> = (0..n).map(|d| (d as f64).min(dims[d].limit)).collect();
      let id = format!("r{k}");
      let r = Request::Reserve { id: &id, amounts: &amounts, ttl_us: 2e6, max_wait_us: 1e15 };
      step(&mut st, &dims, &r, now);
      let (tats, tail) = (st.tats.clone(), st.tail_us);
      step(&mut st, &dims, &Request::Stats, now);
      step(&mut st, &dims, &Request::Cancel { id: "never" }, now);
      let _ = op;
      prop_assert_eq!(&st.tats, &tats);
      prop_assert_eq!(st.tail_us, tail);
    }
  }
}

mod tenants;

/// Regression: one settlement that reports an absurd amount (1e9 tokens on a budget of
/// 90,000 a minute) charged 7.7 days of debt, fleet-wide. What a settlement charges beyond its
/// reservation is capped at the dimension's `max_debt` (default `limit + max_burst`), the rest
/// counted in `excess`; swept over limits, bursts, caps and reported amounts.
#[test]
fn issue_36_budget_settle_debt_is_capped() {
  for (limit, interval_us, max_burst) in [(90_000.0, 60.0 * S, 0.0), (10.0, S, 5.0), (1.0, 3.0 * S, 0.0), (1e9, S, 1e9)]
  {
    for max_debt in [0.0, limit, limit + max_burst, 2.0 * (limit + max_burst)] {
      for actual in [0.0, 1.0, limit, limit + max_burst + 1.0, 1e9] {
        let d = Dimension { limit, interval_us, max_burst, max_debt };
        let dims = [d];
        let mut st = State::default();
        let now = 1e12;
        let reserved = 1.0_f64.min(limit);
        reserve(&mut st, &dims, "a", &[reserved], now);
        let before = st.tats[0].max(now);
        let (reply, _) = step(&mut st, &dims, &Request::Settle { id: "a", actual: &[actual] }, now);
        assert_eq!(reply.status, OK);
        let debt = (actual - reserved).max(0.0);
        let owed = debt.min(max_debt);
        assert_eq!(reply.excess, vec![debt - owed], "limit {limit} cap {max_debt} actual {actual}");
        if debt > 0.0 {
          // the debt charged is at most max_debt: the next caller waits at most that long more
          assert_eq!(st.tats[0] - before, d.cost_us(owed), "limit {limit} cap {max_debt} actual {actual}");
          assert!(st.tats[0] - now <= d.cost_us(reserved + max_debt) + 1.0);
        }
      }
    }
  }
  // the old stall: 1e9 reported on 90,000/min with the default cap waits one interval, not 7.7 days
  let dims = [dim(90_000.0, 60.0 * S, 0.0)];
  let mut st = State::default();
  reserve(&mut st, &dims, "a", &[1000.0], 0.0);
  let (reply, _) = step(&mut st, &dims, &Request::Settle { id: "a", actual: &[1e9] }, 0.0);
  assert_eq!(reply.excess, vec![1e9 - 1000.0 - 90_000.0]);
  let next = reserve(&mut st, &dims, "b", &[1.0], 0.0);
  assert!(next.delay_us <= 61.0 * S, "waits {} s", next.delay_us / S);
}
