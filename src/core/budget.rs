//! The budget: several dimensions (requests, input tokens, output tokens...), each a rate of
//! `limit` per `interval_us` replenished continuously with a burst of `max_burst`, charged all
//! together or not at all, in one fleet-wide FIFO; a reservation is settled later with the
//! true amounts (refund or debt), cancelled, or expires as spent. Mirrored by
//! `lua/budget.lua`; the conformance test checks the two against each other.
//!
//! State of one budget:
//!
//! - per dimension `tat_us`, its theoretical arrival time (GCRA): the dimension's level at
//!   time `t` is `max(0, tat_us - t) * limit / interval_us`, the amount charged and not yet
//!   replenished (0 = empty, fresh);
//! - `tail_us`: the start of the latest reservation, the FIFO's tail;
//! - the open reservations: id -> amounts and deadline (µs), plus running totals per
//!   dimension (`reserved`), the number open and the number that expired.
//!
//! A reservation of `amounts` at `now` starts at `s = max(now, tail, tat_d - tolerance_d)` over
//! the dimensions it charges (`amount > 0`), where `tolerance_d = floor(max_burst * interval /
//! limit)` µs: a dimension takes a charge when its level is at most `max_burst`. If `s - now`
//! exceeds the call's `max_wait_us` it is refused and nothing changes; otherwise every charged
//! dimension gets `tat_d = max(tat_d, s) + ceil(amount * interval / limit)`, the tail moves to
//! `s`, and the reservation is recorded until `s + ttl_us`. The caller waits `s - now`.
//! Because the tail never moves back, reservations start in the order they were made (FIFO),
//! whichever dimensions they charge.
//!
//! Settling with `actual` amounts: per dimension the difference to the reserved amount is
//! given back (`tat_d = max(tat_d - floor(diff * interval / limit), now)`: the next caller sees
//! it at once; callers already queued keep their slots) or charged as debt (`tat_d =
//! max(tat_d, now) + ceil(excess * interval / limit)`: later callers wait for it; the settled
//! call never fails). Cancelling gives back every amount. A reservation past its deadline is
//! expired: removed and counted, its amounts stay spent; settling or cancelling it, or one
//! already settled or cancelled, answers [`NOT_OPEN`] and changes nothing. Expired
//! reservations are removed lazily, at most [`PRUNE`] per call, earliest deadline first
//! (ties by id, bytewise: the order of a Redis sorted set).
//!
//! Bound (tested by property): between two reservations `i` and `j` (by start), the amounts
//! they and the reservations between them charged, plus debts minus refunds recorded in
//! between, are at most `max_burst + limit * (s_j - s_i) / interval + amount_j` per dimension.
//!
//! Every time is a whole µs held exactly in a double (ticks are rounded: costs up, refunds
//! down, so rounding never admits more); `tat` and the tail stay within [`MAX_AHEAD_US`] of
//! now, so debt cannot push them past exact doubles.

use std::collections::{BTreeSet, HashMap};

/// Longest time a dimension's `tat` or the tail may lie ahead of now, µs (~127 years): keeps
/// every time an exact integer in a double.
pub const MAX_AHEAD_US: f64 = 4e15;
/// Expired reservations removed per call at most (the rest on later calls).
pub const PRUNE: usize = 64;
/// Margin added to every key's TTL beyond the time its state matters, ms.
pub const TTL_MARGIN_MS: f64 = 120_000.0;
/// Longest TTL, ms (10 years).
pub const MAX_TTL_MS: f64 = 315_360_000_000.0;

/// A call's status: done (a reservation admitted, a settle or cancel applied, stats read).
pub const OK: f64 = 1.0;
/// A reservation refused: it would wait longer than its `max_wait_us`; nothing changed.
pub const REFUSED: f64 = 0.0;
/// Settle or cancel of a reservation that is not open (settled, cancelled, expired, or never
/// made), or a reservation under an id already open: nothing changed.
pub const NOT_OPEN: f64 = 3.0;

/// One dimension's options.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Dimension {
  /// Amount replenished per interval, `>= 1`.
  pub limit: f64,
  /// µs, `>= 1`.
  pub interval_us: f64,
  /// Amount a dimension may hold beyond an empty level when it takes a charge, `>= 0`.
  pub max_burst: f64,
}

impl Dimension {
  /// Time `amount` takes to replenish, µs, rounded up.
  pub fn cost_us(&self, amount: f64) -> f64 {
    (amount * self.interval_us / self.limit).ceil()
  }
  /// Time a refund of `amount` gives back, µs, rounded down.
  pub fn refund_us(&self, amount: f64) -> f64 {
    (amount * self.interval_us / self.limit).floor()
  }
  /// How far `tat` may lie ahead of the start of a charge, µs.
  pub fn tolerance_us(&self) -> f64 {
    (self.max_burst * self.interval_us / self.limit).floor()
  }
}

/// An open reservation.
#[derive(Clone, Debug, PartialEq)]
pub struct Reservation {
  pub amounts: Vec<f64>,
  pub deadline_us: f64,
}

/// The state of one budget.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct State {
  pub tail_us: f64,
  /// Per dimension (by index), µs.
  pub tats: Vec<f64>,
  /// Per dimension, the amounts of the open reservations.
  pub reserved: Vec<f64>,
  pub open: f64,
  pub expired: f64,
  /// The latest deadline of a reservation ever recorded, µs.
  pub latest_deadline_us: f64,
  pub reservations: HashMap<String, Reservation>,
  /// `(deadline, id)` of every open reservation, in the order they expire.
  pub deadlines: BTreeSet<(u64, String)>,
}

/// One call on a budget.
#[derive(Clone, Debug, PartialEq)]
pub enum Request<'a> {
  Reserve { id: &'a str, amounts: &'a [f64], ttl_us: f64, max_wait_us: f64 },
  Settle { id: &'a str, actual: &'a [f64] },
  Cancel { id: &'a str },
  Stats,
}

/// The answer to one call.
#[derive(Clone, Debug, PartialEq)]
pub struct Reply {
  /// [`OK`], [`REFUSED`] or [`NOT_OPEN`].
  pub status: f64,
  /// A reservation: its wait (admitted) or the wait it would have needed (refused), µs.
  pub delay_us: f64,
  pub open: f64,
  pub expired: f64,
  /// Per dimension of the call: `(used, reserved)`, `used` = the level rounded up (the
  /// amount charged and not yet replenished, queued reservations and debt included).
  pub dimensions: Vec<(f64, f64)>,
}

fn tat(state: &State, d: usize) -> f64 {
  state.tats.get(d).copied().unwrap_or(0.0)
}

fn grow(state: &mut State, n: usize) {
  if state.tats.len() < n {
    state.tats.resize(n, 0.0);
    state.reserved.resize(n, 0.0);
  }
}

fn cap(x: f64, now_us: f64) -> f64 {
  if x > now_us + MAX_AHEAD_US {
    now_us + MAX_AHEAD_US
  } else {
    x
  }
}

/// Removes up to [`PRUNE`] reservations whose deadline is at most `now_us`; true if any.
pub fn prune(state: &mut State, now_us: f64) -> bool {
  let mut changed = false;
  for _ in 0..PRUNE {
    let Some((deadline, id)) = state.deadlines.first().cloned() else { break };
    if deadline as f64 > now_us {
      break;
    }
    state.deadlines.pop_first();
    if let Some(r) = state.reservations.remove(&id) {
      grow(state, r.amounts.len());
      for (d, a) in r.amounts.iter().enumerate() {
        state.reserved[d] -= a;
      }
      state.open -= 1.0;
      state.expired += 1.0;
    }
    changed = true;
  }
  changed
}

/// Removes the open reservation `id` (not expired at `now_us`), giving back its totals.
fn take(state: &mut State, id: &str, now_us: f64) -> Option<Reservation> {
  let r = state.reservations.get(id)?;
  if r.deadline_us <= now_us {
    return None;
  }
  let r = state.reservations.remove(id)?;
  state.deadlines.remove(&(r.deadline_us as u64, id.to_owned()));
  grow(state, r.amounts.len());
  for (d, a) in r.amounts.iter().enumerate() {
    state.reserved[d] -= a;
  }
  state.open -= 1.0;
  Some(r)
}

/// Gives back `amount` of dimension `d` (negative: charges it as debt), at `now_us`.
fn adjust(state: &mut State, d: usize, dim: &Dimension, amount: f64, now_us: f64) {
  let t = state.tats[d];
  if amount > 0.0 {
    let back = t - dim.refund_us(amount);
    state.tats[d] = if back > now_us { back } else { now_us };
  } else if amount < 0.0 {
    let from = if t > now_us { t } else { now_us };
    state.tats[d] = cap(from + dim.cost_us(-amount), now_us);
  }
}

/// One call on a budget of `dims` at `now_us`: the whole algorithm, pure. Returns the reply
/// and whether the state changed (a store saves it then).
pub fn step(state: &mut State, dims: &[Dimension], request: &Request, now_us: f64) -> (Reply, bool) {
  let mut changed = prune(state, now_us);
  let (status, delay_us) = match *request {
    Request::Reserve { id, amounts, ttl_us, max_wait_us } => {
      if state.reservations.contains_key(id) {
        (NOT_OPEN, 0.0)
      } else {
        let mut s = if state.tail_us > now_us { state.tail_us } else { now_us };
        for (d, dim) in dims.iter().enumerate() {
          if amounts[d] > 0.0 {
            let at = tat(state, d) - dim.tolerance_us();
            if at > s {
              s = at;
            }
          }
        }
        let delay = s - now_us;
        if delay > max_wait_us {
          (REFUSED, delay)
        } else {
          grow(state, dims.len());
          for (d, dim) in dims.iter().enumerate() {
            if amounts[d] > 0.0 {
              let t = state.tats[d];
              let from = if t > s { t } else { s };
              state.tats[d] = cap(from + dim.cost_us(amounts[d]), now_us);
              state.reserved[d] += amounts[d];
            }
          }
          state.tail_us = s;
          let deadline_us = s + ttl_us;
          if deadline_us > state.latest_deadline_us {
            state.latest_deadline_us = deadline_us;
          }
          state.open += 1.0;
          state.reservations.insert(id.to_owned(), Reservation { amounts: amounts.to_vec(), deadline_us });
          state.deadlines.insert((deadline_us as u64, id.to_owned()));
          changed = true;
          (OK, delay)
        }
      }
    }
    Request::Settle { id, actual } => match take(state, id, now_us) {
      None => (NOT_OPEN, 0.0),
      Some(r) => {
        grow(state, dims.len());
        for (d, dim) in dims.iter().enumerate() {
          let reserved = r.amounts.get(d).copied().unwrap_or(0.0);
          adjust(state, d, dim, reserved - actual[d], now_us);
        }
        changed = true;
        (OK, 0.0)
      }
    },
    Request::Cancel { id } => match take(state, id, now_us) {
      None => (NOT_OPEN, 0.0),
      Some(r) => {
        grow(state, dims.len());
        for (d, dim) in dims.iter().enumerate() {
          adjust(state, d, dim, r.amounts.get(d).copied().unwrap_or(0.0), now_us);
        }
        changed = true;
        (OK, 0.0)
      }
    },
    Request::Stats => (OK, 0.0),
  };
  let dimensions = dims
    .iter()
    .enumerate()
    .map(|(d, dim)| {
      let ahead = tat(state, d) - now_us;
      let used = if ahead > 0.0 { (ahead * dim.limit / dim.interval_us).ceil() } else { 0.0 };
      (used, state.reserved.get(d).copied().unwrap_or(0.0))
    })
    .collect();
  let reply = Reply { status, delay_us, open: state.open, expired: state.expired, dimensions };
  (reply, changed)
}

/// How long a saved state matters, ms: until the queue and every dimension have drained and
/// the last reservation's deadline has passed, in whole seconds, plus a margin.
pub fn ttl_ms(state: &State, now_us: f64) -> f64 {
  let mut busy = state.tail_us - now_us;
  for t in &state.tats {
    if t - now_us > busy {
      busy = t - now_us;
    }
  }
  if state.latest_deadline_us - now_us > busy {
    busy = state.latest_deadline_us - now_us;
  }
  if busy < 0.0 {
    busy = 0.0;
  }
  let ttl = (busy / 1e6).ceil() * 1000.0 + TTL_MARGIN_MS;
  if ttl > MAX_TTL_MS {
    MAX_TTL_MS
  } else {
    ttl
  }
}

#[cfg(test)]
mod tests {
  use super::*;
  use proptest::prelude::*;

  const S: f64 = 1e6;

  fn dim(limit: f64, interval_us: f64, max_burst: f64) -> Dimension {
    Dimension { limit, interval_us, max_burst }
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
}
