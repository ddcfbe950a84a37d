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
//! call never fails). The debt one settlement charges is at most the dimension's `max_debt`
//! (by default `limit + max_burst`, one interval's worth): what it reports past that is added
//! to the dimension's `excess` (counted, not owed), so one answer that reports an absurd
//! amount cannot stall the budget. Cancelling gives back every amount. A reservation past its deadline is
//! expired: removed and counted, its amounts stay spent; settling or cancelling it, or one
//! already settled or cancelled, answers [`NOT_OPEN`] and changes nothing. Expired
//! reservations are removed lazily, at most [`PRUNE`] per call, earliest deadline first
//! (ties by id, bytewise: the order of a Redis sorted set).
//!
//! Bound (tested by property): between two reservations `i` and `j` (by start), the amounts
//! they and the reservations between them charged, plus debts minus refunds recorded in
//! between, are at most `max_burst + limit * (s_j - s_i) / interval + amount_j` per dimension.
//!
//! Tenants (a view `budget.tenant(id, { share, maxShare })`): see [`tenants`].
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
pub const MAX_TTL_MS: f64 = crate::core::bounds::MAX_INTERVAL_MS;

/// A call's status: done (a reservation admitted, a settle or cancel applied, stats read).
pub const OK: f64 = 1.0;
/// A reservation refused: it would wait longer than its `max_wait_us`; nothing changed.
pub const REFUSED: f64 = 0.0;
/// Settle or cancel of a reservation that is not open (settled, cancelled, expired, or never
/// made), or a reservation under an id already open: nothing changed.
pub const NOT_OPEN: f64 = 3.0;
/// Shares are parts per million.
pub const PPM: f64 = 1e6;

/// One dimension's options.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Dimension {
  /// Amount replenished per interval, `>= 1`.
  pub limit: f64,
  /// µs, `>= 1`.
  pub interval_us: f64,
  /// Amount a dimension may hold beyond an empty level when it takes a charge, `>= 0`.
  pub max_burst: f64,
  /// Most a settlement charges beyond its reservation, `>= 0` (the default: `limit +
  /// max_burst`); what it settles past that is counted in `State::excess`, not owed.
  pub max_debt: f64,
}

impl Dimension {
  /// Time `amount` takes to replenish at `ppm` of the rate, µs, rounded up.
  pub fn cost_at(&self, amount: f64, ppm: f64) -> f64 {
    (amount * self.interval_us * PPM / (self.limit * ppm)).ceil()
  }
  /// Time a refund of `amount` gives back at `ppm` of the rate, µs, rounded down.
  pub fn refund_at(&self, amount: f64, ppm: f64) -> f64 {
    (amount * self.interval_us * PPM / (self.limit * ppm)).floor()
  }
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
  /// The tenant and whether it took its lane (true) or borrowed, if made through a tenant.
  pub tenant: Option<(String, bool)>,
}

/// The state of one budget.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct State {
  pub tail_us: f64,
  /// Per dimension (by index), µs.
  pub tats: Vec<f64>,
  /// Per dimension, the amounts of the open reservations.
  pub reserved: Vec<f64>,
  /// Per dimension, what settlements reported beyond their reservation and `max_debt`: counted,
  /// not charged.
  pub excess: Vec<f64>,
  pub open: f64,
  pub expired: f64,
  /// The latest deadline of a reservation ever recorded, µs.
  pub latest_deadline_us: f64,
  pub reservations: HashMap<String, Reservation>,
  /// `(deadline, id)` of every open reservation, in the order they expire.
  pub deadlines: BTreeSet<(u64, String)>,
  /// Per dimension, the tat of what tenants borrowed (and reservations without a tenant), µs.
  pub borrowed: Vec<f64>,
  /// The latest time any tenant's tail, lane or ceiling was set to, µs (for the TTL).
  pub latest_tenant_us: f64,
  /// Per dimension, the tat at the full rate of every lane charge, µs: when what the lanes
  /// committed (at whatever rate each was charged) has drained. A tenant whose arrival scales
  /// the active lanes down waits for it.
  pub committed: Vec<f64>,
  pub tenants: HashMap<String, Tenant>,
  /// The sum of the shares of the active tenants, ppm (over 1e6: lanes scaled down).
  pub active_shares: f64,
  /// `(until, id)` of every active tenant (every tenant with a record), in that order.
  pub active: BTreeSet<(u64, String)>,
}

/// One call on a budget.
#[derive(Clone, Debug, PartialEq)]
pub enum Request<'a> {
  Reserve {
    id: &'a str,
    amounts: &'a [f64],
    ttl_us: f64,
    max_wait_us: f64,
  },
  Settle {
    id: &'a str,
    actual: &'a [f64],
  },
  Cancel {
    id: &'a str,
  },
  Stats,
  /// A reservation through a tenant view.
  ReserveAs {
    tenant: TenantArg<'a>,
    id: &'a str,
    amounts: &'a [f64],
    ttl_us: f64,
    max_wait_us: f64,
  },
  /// The budget's stats and the tenant's (as held while active, else as sent and unused).
  StatsOf {
    tenant: TenantArg<'a>,
  },
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
  /// Per dimension of the call: the excess settled past `max_debt` so far (`State::excess`).
  pub excess: Vec<f64>,
  /// A call through a tenant: its share and max as stored (ppm) and per dimension its lane's
  /// level, rounded up (what it charged within its share and is not yet replenished, queued
  /// reservations included; 0 for a share of 0).
  pub tenant: Option<(f64, f64, Vec<f64>)>,
  /// [`Request::Stats`]: the number of active tenants, and the first [`tenants::TOP`] of them
  /// (see there) as `(id, share, max, lane levels)`.
  pub active: f64,
  pub tenants: Vec<(String, f64, f64, Vec<f64>)>,
}

fn tat(state: &State, d: usize) -> f64 {
  state.tats.get(d).copied().unwrap_or(0.0)
}

fn grow(state: &mut State, n: usize) {
  if state.tats.len() < n {
    state.tats.resize(n, 0.0);
    state.reserved.resize(n, 0.0);
  }
  if state.borrowed.len() < n {
    state.borrowed.resize(n, 0.0);
  }
  if state.excess.len() < n {
    state.excess.resize(n, 0.0);
  }
  if state.committed.len() < n {
    state.committed.resize(n, 0.0);
  }
}

fn at(v: &[f64], d: usize) -> f64 {
  v.get(d).copied().unwrap_or(0.0)
}

fn later(a: f64, b: f64) -> f64 {
  if b > a {
    b
  } else {
    a
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
      if let Some((tenant, _)) = &r.tenant {
        closed(state, tenant, now_us);
      }
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

/// Records an admitted reservation.
fn record(state: &mut State, id: &str, amounts: &[f64], s: f64, ttl_us: f64, tenant: Option<(String, bool)>) {
  state.tail_us = if tenant.is_none() { s } else { state.tail_us };
  let deadline_us = s + ttl_us;
  if deadline_us > state.latest_deadline_us {
    state.latest_deadline_us = deadline_us;
  }
  state.open += 1.0;
  state.reservations.insert(id.to_owned(), Reservation { amounts: amounts.to_vec(), deadline_us, tenant });
  state.deadlines.insert((deadline_us as u64, id.to_owned()));
}

/// Charges the shared tats (and `borrowed`, at `free` ppm, when `free > 0`) from `s`.
fn charge_shared(state: &mut State, dims: &[Dimension], amounts: &[f64], s: f64, free: f64, now_us: f64) {
  grow(state, dims.len());
  for (d, dim) in dims.iter().enumerate() {
    if amounts[d] > 0.0 {
      state.tats[d] = cap(later(state.tats[d], s) + dim.cost_us(amounts[d]), now_us);
      state.reserved[d] += amounts[d];
      if free > 0.0 {
        state.borrowed[d] = cap(later(state.borrowed[d], s) + dim.cost_at(amounts[d], free), now_us);
      }
    }
  }
}

/// One call on a budget of `dims` at `now_us`: the whole algorithm, pure. Returns the reply
/// and whether the state changed (a store saves it then).
pub fn step(state: &mut State, dims: &[Dimension], request: &Request, now_us: f64) -> (Reply, bool) {
  let mut changed = prune(state, now_us);
  changed = expire_active(state, now_us) || changed;
  let mut of: Option<&str> = None;
  let (status, delay_us) = match *request {
    Request::Reserve { id, amounts, ttl_us, max_wait_us } => {
      if state.reservations.contains_key(id) {
        (NOT_OPEN, 0.0)
      } else {
        // a borrower without ceiling or horizon: the shared check and the borrowing pool
        let mut s = if state.tail_us > now_us { state.tail_us } else { now_us };
        for (d, dim) in dims.iter().enumerate() {
          if amounts[d] > 0.0 {
            let at = later(tat(state, d), at(&state.borrowed, d)) - dim.tolerance_us();
            if at > s {
              s = at;
            }
          }
        }
        let free = PPM - state.active_shares;
        let delay = s - now_us;
        if delay > max_wait_us || free <= 0.0 {
          (REFUSED, delay)
        } else {
          charge_shared(state, dims, amounts, s, free, now_us);
          record(state, id, amounts, s, ttl_us, None);
          changed = true;
          (OK, delay)
        }
      }
    }
    Request::ReserveAs { tenant, id, amounts, ttl_us, max_wait_us } => {
      of = Some(tenant.id);
      if state.reservations.contains_key(id) {
        (NOT_OPEN, 0.0)
      } else {
        let (status, delay) = reserve_as(state, dims, &tenant, id, amounts, ttl_us, max_wait_us, now_us);
        changed = changed || status == OK;
        (status, delay)
      }
    }
    Request::StatsOf { tenant } => {
      of = Some(tenant.id);
      (OK, 0.0)
    }
    Request::Settle { id, actual } => match take(state, id, now_us) {
      None => (NOT_OPEN, 0.0),
      Some(r) => {
        grow(state, dims.len());
        let mut back: Vec<f64> =
          (0..dims.len()).map(|d| r.amounts.get(d).copied().unwrap_or(0.0) - actual[d]).collect();
        // debt past max_debt is counted, not owed: one answer cannot stall the budget
        for (d, dim) in dims.iter().enumerate() {
          if -back[d] > dim.max_debt {
            state.excess[d] += -back[d] - dim.max_debt;
            back[d] = -dim.max_debt;
          }
        }
        give_back(state, dims, &r, &back, now_us);
        if let Some((tenant, _)) = &r.tenant {
          closed(state, tenant, now_us);
        }
        changed = true;
        (OK, 0.0)
      }
    },
    Request::Cancel { id } => match take(state, id, now_us) {
      None => (NOT_OPEN, 0.0),
      Some(r) => {
        let back: Vec<f64> = (0..dims.len()).map(|d| r.amounts.get(d).copied().unwrap_or(0.0)).collect();
        give_back(state, dims, &r, &back, now_us);
        if let Some((tenant, _)) = &r.tenant {
          closed(state, tenant, now_us);
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
  // a tenant's lane use, at its scaled share now
  let uses = |t: &Tenant| -> Vec<f64> {
    let rate = scaled(t.share, state.active_shares);
    (0..dims.len()).map(|d| if rate > 0.0 { level(&dims[d], at(&t.lane, d), rate, now_us) } else { 0.0 }).collect()
  };
  let tenant = match (request, of) {
    (Request::ReserveAs { tenant: a, .. } | Request::StatsOf { tenant: a }, Some(id)) => {
      Some(match state.tenants.get(id) {
        Some(t) => (t.share, t.max, uses(t)),
        None => (a.share, a.max, vec![0.0; dims.len()]),
      })
    }
    _ => None,
  };
  let (mut active, mut tenants) = (0.0, vec![]);
  if let Request::Stats = request {
    // those still active now (the others leave lazily, a few per call)
    let now = state.active.iter().rev().take_while(|(until, _)| *until as f64 > now_us);
    active = now.clone().count() as f64;
    for (_, id) in now.take(TOP) {
      if let Some(t) = state.tenants.get(id) {
        tenants.push((id.clone(), t.share, t.max, uses(t)));
      }
    }
  }
  let excess = (0..dims.len()).map(|d| at(&state.excess, d)).collect();
  let (open, expired) = (state.open, state.expired);
  let reply = Reply { status, delay_us, open, expired, dimensions, excess, tenant, active, tenants };
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
  for t in state.borrowed.iter().chain(&state.committed) {
    if t - now_us > busy {
      busy = t - now_us;
    }
  }
  if state.latest_deadline_us - now_us > busy {
    busy = state.latest_deadline_us - now_us;
  }
  if state.latest_tenant_us - now_us > busy {
    busy = state.latest_tenant_us - now_us;
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

pub mod tenants;
use tenants::{closed, give_back, level, reserve_as, scaled, TOP};
pub use tenants::{expire_active, Tenant, TenantArg};

#[cfg(test)]
mod tests;
