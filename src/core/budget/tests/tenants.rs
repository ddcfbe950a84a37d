//! Tests of the budget's tenants (`super::super::tenants`): lanes, borrowing, activity, scaled
//! shares, and the tenant bound by property.

use super::*;

fn tenant(id: &str, share: f64, max: f64, ahead_us: f64) -> TenantArg<'_> {
  TenantArg { id, share, max, ahead_us }
}

fn reserve_as(st: &mut State, dims: &[Dimension], t: TenantArg, id: &str, amounts: &[f64], now: f64) -> Reply {
  let r = Request::ReserveAs { tenant: t, id, amounts, ttl_us: 600.0 * S, max_wait_us: 1e15 };
  step(st, dims, &r, now).0
}

#[test]
fn a_tenant_within_its_share_is_not_queued_behind_a_greedy_one() {
  // 10 per second, no burst; a: share 0.5, may borrow everything; b: share 0.5
  let dims = [dim(10.0, S, 0.0)];
  let mut st = State::default();
  let a = tenant("a", 500_000.0, PPM, 0.0);
  let b = tenant("b", 500_000.0, PPM, 0.0);
  // a alone takes the whole rate: lane and borrowed reservations alternate, 0.1 s apart
  let starts: Vec<f64> =
    (0..6).map(|k| reserve_as(&mut st, &dims, a, &format!("a{k}"), &[1.0], 0.0).delay_us).collect();
  assert_eq!(
    starts,
    vec![0.0, 0.2 * S, 0.4 * S, 0.6 * S, 0.8 * S, S],
    "no horizon: a borrows only now, queues in its lane"
  );
  // b arrives with a's queue 1 s long: b starts at once (its lane is empty), a's queue is not its
  let r = reserve_as(&mut st, &dims, b, "b0", &[1.0], 0.0);
  assert_eq!(r.delay_us, 0.0);
  assert_eq!(r.tenant, Some((500_000.0, PPM, vec![1.0])));
  // b's next waits for its own lane only (0.2 s at 5 per second)
  assert_eq!(reserve_as(&mut st, &dims, b, "b1", &[1.0], 0.0).delay_us, 0.2 * S);
}

#[test]
fn an_idle_budget_lends_up_to_max_share_within_the_horizon() {
  let dims = [dim(10.0, S, 0.0)];
  let mut st = State::default();
  // share 0.2, max 0.8, borrowed capacity committed up to 2 s ahead
  let a = tenant("a", 200_000.0, 800_000.0, 2.0 * S);
  let starts: Vec<f64> =
    (0..9).map(|k| reserve_as(&mut st, &dims, a, &format!("a{k}"), &[1.0], 0.0).delay_us).collect();
  // the ceiling (8 per second) spaces them 125 ms apart; the lane takes a turn when it is earlier
  assert_eq!(starts, vec![0.0, 125_000.0, 250_000.0, 375_000.0, 500_000.0, 625_000.0, 750_000.0, 875_000.0, S]);
  assert!(st.borrowed[0] > 0.0);
  // a share of 0 only borrows, and is refused past its horizon
  let z = tenant("z", 0.0, PPM, 0.0);
  let r = reserve_as(&mut st, &dims, z, "z0", &[1.0], 0.0);
  assert_eq!(r.status, REFUSED);
  assert!(r.delay_us > 0.0);
}

/// Regression: with the README's pattern (a view per customer, share 0.05), customer 21
/// was refused (the shares summed over 1) although customers 1-20 were idle, and every tenant
/// ever seen kept a record. Now a share is in force while its tenant is active; active shares
/// over 1 are scaled down in proportion, never refused; a tenant's record leaves with its
/// activity. Swept over the number of tenants at once (1..=200) and 20,000 distinct ids.
#[test]
fn issue_36_budget_tenant_shares_scale_and_are_released() {
  // a burst of 10 ms: lanes are not held back by the 10 ms steps of the loop
  let dims = [dim(6000.0, S, 60.0)];
  for k in [1usize, 20, 21, 40, 200] {
    let mut st = State::default();
    let ids: Vec<String> = (0..k).map(|i| format!("customer-{i}")).collect();
    let mut admitted = vec![0.0; k];
    // when each tenant's reservation starts: it asks again (10 tokens) from then, one at a time
    let mut turn = vec![0.0; k];
    let (mut now, mut total) = (0.0, 0.0);
    for round in 0..300 {
      for (i, id) in ids.iter().enumerate() {
        if turn[i] > now {
          continue;
        }
        let t = tenant(id, 50_000.0, 50_000.0, S);
        let rid = format!("{id}.{round}");
        let r = Request::ReserveAs { tenant: t, id: &rid, amounts: &[10.0], ttl_us: 60.0 * S, max_wait_us: 60.0 * S };
        let (reply, _) = step(&mut st, &dims, &r, now);
        assert_eq!(reply.status, OK, "never refused: {reply:?}");
        turn[i] = now + reply.delay_us;
        if turn[i] < 3.0 * S {
          total += 10.0;
          // from 1 s on: each tenant's steady share
          if turn[i] >= S {
            admitted[i] += 10.0;
          }
        }
        step(&mut st, &dims, &Request::Settle { id: &rid, actual: &[10.0] }, now);
      }
      now += 10_000.0;
    }
    // the budget's bound (6000/s over 3 s, the burst, one reservation of slack per lane)
    assert!(total <= 6000.0 * 3.0 + 2.0 * 60.0 + 10.0 * k as f64, "{k} tenants: {total}");
    // from the first second on each gets its share (0.05, maxShare 0.05) or, past 20 tenants,
    // 1/k of the budget: >= 0.9 of it
    let fair = 6000.0 * 2.0 * (0.05f64).min(1.0 / k as f64);
    for (i, a) in admitted.iter().enumerate() {
      assert!(*a >= 0.9 * fair - 10.0, "{k} tenants: tenant {i} got {a} of {fair}");
    }
  }
  // 20,000 distinct ids, 100 at a time: the records held stay those of the active tenants
  let mut st = State::default();
  let mut most = 0;
  for i in 0..20_000 {
    let now = i as f64 * 20_000.0; // 50 new tenants a second, each active ~1 s
    let id = format!("t{i}");
    let rid = format!("r{i}");
    let r = Request::ReserveAs {
      tenant: tenant(&id, 50_000.0, PPM, S),
      id: &rid,
      amounts: &[1.0],
      ttl_us: 60.0 * S,
      max_wait_us: 1e15,
    };
    assert_eq!(step(&mut st, &dims, &r, now).0.status, OK);
    step(&mut st, &dims, &Request::Cancel { id: &rid }, now);
    most = most.max(st.tenants.len());
  }
  assert!(most <= 60, "records held at once: {most}");
  assert_eq!(st.tenants.len(), st.active.len());
}

#[test]
fn settling_a_tenants_reservation_refunds_its_lane_and_ceiling() {
  let dims = [dim(100.0, S, 0.0)];
  let mut st = State::default();
  let a = tenant("a", 500_000.0, PPM, 0.0);
  reserve_as(&mut st, &dims, a, "a0", &[50.0], 0.0);
  assert_eq!(st.tenants["a"].lane[0], S);
  step(&mut st, &dims, &Request::Settle { id: "a0", actual: &[10.0] }, 0.0);
  assert_eq!((st.tenants["a"].lane[0], st.tenants["a"].ceiling[0], st.tats[0]), (200_000.0, 100_000.0, 100_000.0));
  // cancel gives everything back, debt pushes the lane
  reserve_as(&mut st, &dims, a, "a1", &[10.0], 0.0);
  step(&mut st, &dims, &Request::Settle { id: "a1", actual: &[60.0] }, 0.0);
  assert_eq!(st.tenants["a"].lane[0], 1.4 * S);
}

#[test]
fn a_greedy_tenant_stops_borrowing_while_another_uses_its_share() {
  // 10 per second; greedy (share 0.5, borrows up to everything, 1 s ahead) queues 30 at once
  let dims = [dim(10.0, S, 0.0)];
  let mut st = State::default();
  let g = tenant("greedy", 500_000.0, PPM, S);
  let greedy: Vec<f64> =
    (0..30).map(|k| reserve_as(&mut st, &dims, g, &format!("g{k}"), &[1.0], 0.0).delay_us).collect();
  // alone it takes the whole rate while its queue is within its horizon, then its share
  assert_eq!(&greedy[..10], &[0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9].map(|x| x * S));
  // small (share 0.5) asks for 10 at 0.5 s: it waits once for what greedy borrowed, then
  // gets its lane's rate, 200 ms apart, while greedy borrows nothing more
  let m = tenant("small", 500_000.0, 500_000.0, S);
  let small: Vec<f64> =
    (0..10).map(|k| reserve_as(&mut st, &dims, m, &format!("s{k}"), &[1.0], 0.5 * S).delay_us).collect();
  let first = small[0];
  assert!(first <= 1.1 * S, "waits at most the horizon for borrowed capacity: {first}");
  for (k, d) in small.iter().enumerate() {
    assert_eq!(*d, first + k as f64 * 200_000.0);
  }
  let g2 = reserve_as(&mut st, &dims, g, "g-late", &[1.0], 0.5 * S);
  assert_eq!(st.reservations["g-late"].tenant, Some(("greedy".to_owned(), true)), "{g2:?}: a lane turn, not borrowed");
}

#[derive(Clone, Debug)]
struct TenantOp {
  who: usize,
  amounts: Vec<u32>,
  burst: u32,
}

/// Per dimension, the amounts of reservations `(start, group, amounts)` starting within any span
/// T are at most 2 x max_burst + rate x T + the largest reservation of each group (a tenant's
/// lane, or the borrowers) + `joins` more largest reservations (a rescale overlap each) +
/// rounding.
fn within_the_bound(
  dims: &[Dimension],
  mut started: Vec<(f64, usize, Vec<f64>)>,
  joins: f64,
) -> Result<(), TestCaseError> {
  started.sort_by(|a, b| a.0.partial_cmp(&b.0).unwrap());
  let groups = started.iter().map(|e| e.1).max().unwrap_or(0) + 1;
  for (d, dim) in dims.iter().enumerate() {
    for i in 0..started.len() {
      for j in i..started.len() {
        let (si, sj) = (started[i].0, started[j].0);
        let inside = &started[i..=j];
        let charged: f64 = inside.iter().map(|e| e.2[d]).sum();
        let mut one = 0.0;
        for who in 0..groups {
          one += inside.iter().filter(|e| e.1 == who).map(|e| e.2[d]).fold(0.0, f64::max);
        }
        let most = inside.iter().map(|e| e.2[d]).fold(0.0, f64::max);
        let ticks = (j - i + 1) as f64 * dim.limit / dim.interval_us;
        let bound = 2.0 * dim.max_burst + dim.limit * (sj - si) / dim.interval_us + one + joins * most + ticks + 1e-6;
        prop_assert!(charged <= bound, "dim {} charged {} > {} in [{}, {}]", d, charged, bound, si, sj);
      }
    }
  }
  Ok(())
}

fn arb_tenant_ops() -> impl Strategy<Value = Vec<(TenantOp, u64)>> {
  let op = (0usize..4, prop::collection::vec(0u32..6, 3), 1u32..6).prop_map(|(who, amounts, burst)| TenantOp {
    who,
    amounts,
    burst,
  });
  prop::collection::vec((op, 0u64..300_000), 1..80)
}

proptest! {
  /// Tenants 0..2 (shares summing to at most 1, random max and horizons) and calls without a
  /// tenant (3), greedy bursts of several reservations at once:
  /// - a reservation through a tenant starts no later than its own constraint (now, its tail,
  ///   its lane) or what was borrowed before it (borrowing starts at most its horizon ahead):
  ///   other tenants' queues within their shares never delay it;
  /// - per dimension, the amounts of reservations starting within any span T are at most
  ///   2 x max_burst + rate x T + one reservation per tenant's lane and one borrowed (the
  ///   tenant bound).
  #[test]
  fn tenants_keep_their_share_and_the_bound(
    dims in arb_dims(),
    shares in prop::collection::vec(0u32..=1000, 3),
    maxes in prop::collection::vec(1u32..=1000, 3),
    aheads in prop::collection::vec(prop_oneof![Just(0u64), 0u64..3_000_000], 3),
    ops in arb_tenant_ops(),
  ) {
    let n = dims.len();
    // shares in ppm, scaled to sum <= 1e6; max >= share
    let total: u32 = shares.iter().sum::<u32>().max(1000);
    let share: Vec<f64> = shares.iter().map(|s| ((*s as f64) * 1e6 / total as f64).floor()).collect();
    let max: Vec<f64> = (0..3).map(|t| (maxes[t] as f64 * 1000.0).max(share[t]).max(1.0)).collect();
    let ids = ["t0", "t1", "t2"];
    let mut st = State::default();
    let mut now = 1e9;
    // (start, who, amounts)
    let mut started: Vec<(f64, usize, Vec<f64>)> = vec![];
    for (k, (op, gap)) in ops.into_iter().enumerate() {
      now += gap as f64;
      for b in 0..op.burst {
        let amounts: Vec<f64> = (0..n).map(|d| (op.amounts[d] as f64).min(dims[d].limit + dims[d].max_burst)).collect();
        let id = format!("r{k}.{b}");
        if op.who == 3 {
          let r = Request::Reserve { id: &id, amounts: &amounts, ttl_us: 6e8, max_wait_us: 1e15 };
          let (reply, _) = step(&mut st, &dims, &r, now);
          prop_assert!(reply.status == OK || (reply.status == REFUSED && st.active_shares >= PPM));
          if reply.status == OK {
            started.push((now + reply.delay_us, 3, amounts));
          }
          continue;
        }
        let t = TenantArg { id: ids[op.who], share: share[op.who], max: max[op.who], ahead_us: aheads[op.who] as f64 };
        // its own constraint, from the state before the call
        let own = {
          let mut o = now;
          if let Some(x) = st.tenants.get(t.id) {
            o = later(o, x.tail_us);
            for (d, dim) in dims.iter().enumerate() {
              if amounts[d] > 0.0 {
                o = later(o, at(&x.lane, d) - dim.tolerance_us());
              }
            }
          }
          o
        };
        // and what others borrowed (committed at most their horizon ahead)
        let borrowed = (0..n).filter(|d| amounts[*d] > 0.0).map(|d| at(&st.borrowed, d)).fold(0.0, f64::max);
        let r = Request::ReserveAs { tenant: t, id: &id, amounts: &amounts, ttl_us: 6e8, max_wait_us: 1e15 };
        let (reply, _) = step(&mut st, &dims, &r, now);
        if share[op.who] == 0.0 {
          prop_assert!(reply.status == OK || reply.status == REFUSED);
        } else {
          prop_assert_eq!(reply.status, OK);
        }
        if reply.status == OK {
          let s = now + reply.delay_us;
          if share[op.who] > 0.0 {
            prop_assert!(s <= later(own, borrowed), "tenant {} started {} > own {}, borrowed {}", op.who, s, own, borrowed);
          }
          let lane = st.reservations[&id].tenant.as_ref().is_some_and(|x| x.1);
          if !lane {
            prop_assert!(s <= now + t.ahead_us, "borrowed past the horizon");
          }
          // lanes by tenant, borrowers (and calls without a tenant) in one group: the pool
          started.push((s, if lane { op.who } else { 3 }, amounts));
        }
      }
    }
    within_the_bound(&dims, started, 0.0)?;
  }
}

proptest! {
  /// Regression: six tenants whose shares (each 0 to 1, random max and horizons) add up
  /// to more than 1, each reservation settled at once so tenants go idle after a second and
  /// come back (gaps up to 2.5 s), greedy bursts:
  /// - a tenant of share > 0 is never refused, and starts no later than its own constraint,
  ///   what was borrowed and, joining, what the active lanes committed;
  /// - the count bound holds as with shares summing to at most 1.
  #[test]
  fn issue_36_budget_shares_over_one_keep_the_bound(
    dims in arb_dims(),
    shares in prop::collection::vec(0u32..=1000, 6),
    maxes in prop::collection::vec(1u32..=1000, 6),
    aheads in prop::collection::vec(prop_oneof![Just(0u64), 0u64..3_000_000], 6),
    ops in prop::collection::vec(
      ((0usize..6, prop::collection::vec(0u32..6, 3), 1u32..4), prop_oneof![0u64..300_000, 0u64..2_500_000]),
      1..80,
    ),
  ) {
    let n = dims.len();
    let share: Vec<f64> = shares.iter().map(|s| *s as f64 * 1000.0).collect();
    let max: Vec<f64> = (0..6).map(|t| (maxes[t] as f64 * 1000.0).max(share[t]).max(1.0)).collect();
    let ids = ["t0", "t1", "t2", "t3", "t4", "t5"];
    let mut st = State::default();
    let mut now = 1e9;
    let mut started: Vec<(f64, usize, Vec<f64>)> = vec![];
    for (k, ((who, amounts, burst), gap)) in ops.into_iter().enumerate() {
      now += gap as f64;
      for b in 0..burst {
        let amounts: Vec<f64> = (0..n).map(|d| (amounts[d] as f64).min(dims[d].limit + dims[d].max_burst)).collect();
        let id = format!("r{k}.{b}");
        let t = TenantArg { id: ids[who], share: share[who], max: max[who], ahead_us: aheads[who] as f64 };
        // what step does first: tenants no longer active leave
        prune(&mut st, now);
        expire_active(&mut st, now);
        let mut own = now;
        let idle = !st.tenants.contains_key(t.id);
        if let Some(x) = st.tenants.get(t.id) {
          own = later(own, x.tail_us);
          for (d, dim) in dims.iter().enumerate() {
            if amounts[d] > 0.0 {
              own = later(own, at(&x.lane, d) - dim.tolerance_us());
            }
          }
        }
        let mut lent = 0.0;
        for d in (0..n).filter(|d| amounts[*d] > 0.0) {
          lent = later(lent, at(&st.borrowed, d));
          if idle {
            lent = later(lent, at(&st.committed, d) - dims[d].tolerance_us());
          }
        }
        let r = Request::ReserveAs { tenant: t, id: &id, amounts: &amounts, ttl_us: 6e8, max_wait_us: 1e15 };
        let (reply, _) = step(&mut st, &dims, &r, now);
        if share[who] == 0.0 {
          prop_assert!(reply.status == OK || reply.status == REFUSED);
        } else {
          prop_assert_eq!(reply.status, OK, "never refused");
        }
        if reply.status == OK {
          let s = now + reply.delay_us;
          if share[who] > 0.0 {
            prop_assert!(s <= later(own, lent), "tenant {} started {} > own {}, lent {}", who, s, own, lent);
          }
          let lane = st.reservations[&id].tenant.as_ref().is_some_and(|x| x.1);
          started.push((s, if lane { who } else { 6 }, amounts.clone()));
          let (settled, _) = step(&mut st, &dims, &Request::Settle { id: &id, actual: &amounts }, now);
          prop_assert_eq!(settled.status, OK);
        }
      }
      // records are held only for active tenants
      prop_assert_eq!(st.tenants.len(), st.active.len());
    }
    within_the_bound(&dims, started, 0.0)?;
  }
}
