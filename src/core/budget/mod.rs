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
//! Tenants (a view `budget.tenant(id, { share, maxShare })`): shares are held in parts per
//! million (`share`, `max`, integers, `0 <= share <= max <= 1e6`, `max >= 1`); the shares of a
//! budget's tenants sum to at most 1e6 (a call that would pass it answers [`INVALID_SHARES`]
//! and changes nothing). Each tenant has its own tail (FIFO within the tenant), per dimension a
//! *lane* (a GCRA at `share * limit`, tolerance `tolerance_d`: its guaranteed rate) and a
//! *ceiling* (a GCRA at `max * limit`), and the budget holds per dimension `borrowed_us`, the
//! tat of what tenants borrowed beyond their lanes. A tenant's reservation at `now` with
//! `s0 = max(now, tail)`:
//!
//! - *within its share* (the lane path): `sg = max(s0, lane_d - tol_d, lent_d)`. `lent_d` is
//!   `borrowed_d` when the tenant is idle: its share was lent, and it waits for what others
//!   borrowed (committed at most `ahead_us` ahead, see below). When it is active, `lent_d` is
//!   `min(hold_d, borrowed_d)`, `hold_d` being `borrowed_d` when it last became active, on
//!   every dimension whichever it charged then: what was borrowed before (at a rate that
//!   counted its share free) still holds that dimension's lane. Other tenants' lanes, however
//!   long their queues, never delay it;
//! - *borrowing*: `sb = max(s0, ceiling_d - tol_d, tat_d - tol_d, borrowed_d - tol_d)`, the
//!   shared budget's own check (which counts every charge, lanes included), the ceiling and
//!   the borrowing pool: a GCRA whose charges cost at the rate the *active* tenants leave,
//!   `1e6 - active_shares` ppm (none: no borrowing), so borrowers never take an active lane's
//!   rate. Allowed only when `sb <= now + ahead_us`: borrowed capacity is committed at most
//!   `ahead_us` ahead, which is what a tenant coming back waits for at most.
//!
//! A tenant is *active* from a lane charge until its lanes drain (`State::active`, ordered by
//! that time, at most [`PRUNE`] leave per call): the sum of their shares is `active_shares`.
//!
//! The earlier start wins (ties: the lane); a tenant of share 0 only borrows, and is refused
//! (with the wait it would need) when it cannot. Every path charges the shared `tat_d` and the
//! ceiling; the lane path its lane, the borrow path `borrowed_d`. A settle or cancel adjusts the
//! same tats by the same difference (at their own rates; the pool's at the full rate).
//! Reservations without a tenant borrow without ceiling or horizon (`tail_us` is their FIFO):
//! with no rate left to lend they are refused.
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
/// A tenant's share would make the budget's shares sum over 1 (1e6 ppm): nothing changed.
pub const INVALID_SHARES: f64 = 4.0;
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

/// A tenant of a budget (see the module docs).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Tenant {
  /// ppm.
  pub share: f64,
  /// ppm.
  pub max: f64,
  pub tail_us: f64,
  /// Per dimension, the lane's tat (at `share`), µs.
  pub lane: Vec<f64>,
  /// Per dimension, the ceiling's tat (at `max`), µs.
  pub ceiling: Vec<f64>,
  /// Per dimension, `borrowed` when the tenant last became active, µs: what was lent of its
  /// share before then (charged at a rate that counted it free) its lanes still wait for.
  pub hold: Vec<f64>,
  /// While active (in `State::active`): until when, µs; 0 otherwise.
  pub active_until: f64,
}

/// Who makes a call through a tenant view.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TenantArg<'a> {
  pub id: &'a str,
  /// ppm, integer in `[0, max]`.
  pub share: f64,
  /// ppm, integer in `[1, 1e6]`.
  pub max: f64,
  /// How far ahead of now borrowed capacity may be committed, µs.
  pub ahead_us: f64,
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
  /// Per dimension, the tat of what tenants borrowed (and reservations without a tenant), µs.
  pub borrowed: Vec<f64>,
  /// The sum of the tenants' shares, ppm.
  pub shares: f64,
  /// The latest time any tenant's tail, lane or ceiling was set to, µs (for the TTL).
  pub latest_tenant_us: f64,
  pub tenants: HashMap<String, Tenant>,
  /// The sum of the shares of the active tenants (a lane not drained), ppm.
  pub active_shares: f64,
  /// `(until, id)` of every active tenant: until its lanes drain, in that order.
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
  /// The budget's stats and the tenant's (registering it).
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
  /// A call through a tenant: its share and max as stored (ppm) and per dimension its lane's
  /// level, rounded up (what it charged within its share and is not yet replenished, queued
  /// reservations included; 0 for a share of 0).
  pub tenant: Option<(f64, f64, Vec<f64>)>,
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

/// Registers the tenant (or updates its share and max); false (nothing changed) when the
/// shares would sum over 1e6 ppm.
fn register(state: &mut State, t: &TenantArg, n: usize) -> bool {
  let old = state.tenants.get(t.id).map(|x| x.share).unwrap_or(0.0);
  let sum = state.shares - old + t.share;
  if sum > PPM {
    return false;
  }
  state.shares = sum;
  let e = state.tenants.entry(t.id.to_owned()).or_default();
  if e.active_until > 0.0 {
    state.active_shares += t.share - old;
  }
  e.share = t.share;
  e.max = t.max;
  if e.lane.len() < n {
    e.lane.resize(n, 0.0);
    e.ceiling.resize(n, 0.0);
  }
  if e.hold.len() < n {
    e.hold.resize(n, 0.0);
  }
  true
}

/// Tenants whose lanes drained by `now_us` stop being active, at most [`PRUNE`] per call,
/// earliest first (ties by id, bytewise); true if any.
pub fn expire_active(state: &mut State, now_us: f64) -> bool {
  let mut changed = false;
  for _ in 0..PRUNE {
    let Some((until, id)) = state.active.first().cloned() else { break };
    if until as f64 > now_us {
      break;
    }
    state.active.pop_first();
    if let Some(t) = state.tenants.get_mut(&id) {
      state.active_shares -= t.share;
      t.active_until = 0.0;
    }
    changed = true;
  }
  changed
}

/// The level of a tat at `ppm` of the rate, rounded up.
fn level(dim: &Dimension, tat: f64, ppm: f64, now_us: f64) -> f64 {
  let ahead = tat - now_us;
  if ahead > 0.0 {
    (ahead * dim.limit * ppm / (dim.interval_us * PPM)).ceil()
  } else {
    0.0
  }
}

/// Gives back `amount` on a tat at `ppm` of the rate (negative: charges it as debt).
fn adjust_at(tat: &mut f64, dim: &Dimension, ppm: f64, amount: f64, now_us: f64) {
  if amount > 0.0 {
    *tat = later(*tat - dim.refund_at(amount, ppm), now_us);
  } else if amount < 0.0 {
    *tat = cap(later(*tat, now_us) + dim.cost_at(-amount, ppm), now_us);
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

/// A reservation through tenant `t` (registered): `(status, delay)`, charged when admitted.
#[allow(clippy::too_many_arguments)]
fn reserve_as(
  state: &mut State,
  dims: &[Dimension],
  t: &TenantArg,
  id: &str,
  amounts: &[f64],
  ttl_us: f64,
  max_wait_us: f64,
  now_us: f64,
) -> (f64, f64) {
  let tenant = &state.tenants[t.id];
  let s0 = later(now_us, tenant.tail_us);
  let (mut sg, mut sb) = (s0, s0);
  // an idle tenant's share was lent: its lane waits for what was borrowed. An active one's
  // was not since it became active, but what was borrowed before then (at a rate that counted
  // its share free, on every dimension, whichever it charged then) still holds its lanes
  let idle = tenant.active_until == 0.0;
  for (d, dim) in dims.iter().enumerate() {
    if amounts[d] > 0.0 {
      let tol = dim.tolerance_us();
      let lent = at(&state.borrowed, d);
      let lent = if idle { lent } else { at(&tenant.hold, d).min(lent) };
      sg = later(sg, later(at(&tenant.lane, d) - tol, lent));
      sb = later(sb, later(later(at(&tenant.ceiling, d), tat(state, d)), at(&state.borrowed, d)) - tol);
    }
  }
  let lane_ok = tenant.share > 0.0;
  // what active lanes leave: the borrowing pool's rate
  let free = PPM - state.active_shares;
  let borrow_ok = free > 0.0 && sb <= now_us + t.ahead_us;
  let lane = lane_ok && (sg <= sb || !borrow_ok);
  let s = if lane {
    sg
  } else if borrow_ok {
    sb
  } else {
    return (REFUSED, sb - now_us);
  };
  let delay = s - now_us;
  if delay > max_wait_us {
    return (REFUSED, delay);
  }
  charge_shared(state, dims, amounts, s, 0.0, now_us);
  let tenant = state.tenants.get_mut(t.id).expect("registered");
  let mut latest = later(state.latest_tenant_us, s);
  let mut until = 0.0;
  for (d, dim) in dims.iter().enumerate() {
    if amounts[d] > 0.0 {
      tenant.ceiling[d] = cap(later(tenant.ceiling[d], s) + dim.cost_at(amounts[d], tenant.max), now_us);
      latest = later(latest, tenant.ceiling[d]);
      if lane {
        tenant.lane[d] = cap(later(tenant.lane[d], s) + dim.cost_at(amounts[d], tenant.share), now_us);
        latest = later(latest, tenant.lane[d]);
        until = later(until, tenant.lane[d]);
      } else {
        state.borrowed[d] = cap(later(state.borrowed[d], s) + dim.cost_at(amounts[d], free), now_us);
        latest = later(latest, state.borrowed[d]);
      }
    }
  }
  tenant.tail_us = s;
  // a lane charged: the tenant is active until its lanes drain
  if until > tenant.active_until {
    if tenant.active_until > 0.0 {
      state.active.remove(&(tenant.active_until as u64, t.id.to_owned()));
    } else {
      state.active_shares += tenant.share;
      // a lane call leaves `borrowed` as it was: what was lent until now
      for (d, h) in tenant.hold.iter_mut().enumerate() {
        *h = at(&state.borrowed, d);
      }
    }
    tenant.active_until = until;
    state.active.insert((until as u64, t.id.to_owned()));
  }
  state.latest_tenant_us = latest;
  record(state, id, amounts, s, ttl_us, Some((t.id.to_owned(), lane)));
  (OK, delay)
}

/// Gives back `back[d]` (negative: debt) of the reservation `r` on every tat it charged.
fn give_back(state: &mut State, dims: &[Dimension], r: &Reservation, back: &[f64], now_us: f64) {
  grow(state, dims.len());
  for (d, dim) in dims.iter().enumerate() {
    adjust(state, d, dim, back[d], now_us);
  }
  let borrowed = match &r.tenant {
    None => true,
    Some((id, lane)) => {
      let mut latest = state.latest_tenant_us;
      if let Some(tenant) = state.tenants.get_mut(id) {
        let (share, max) = (tenant.share, tenant.max);
        for (d, dim) in dims.iter().enumerate() {
          if d < tenant.ceiling.len() {
            adjust_at(&mut tenant.ceiling[d], dim, max, back[d], now_us);
            latest = later(latest, tenant.ceiling[d]);
            if *lane && share > 0.0 {
              adjust_at(&mut tenant.lane[d], dim, share, back[d], now_us);
              latest = later(latest, tenant.lane[d]);
            }
          }
        }
      }
      state.latest_tenant_us = latest;
      !*lane
    }
  };
  if borrowed {
    for (d, dim) in dims.iter().enumerate() {
      adjust_at(&mut state.borrowed[d], dim, PPM, back[d], now_us);
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
      } else if !register(state, &tenant, dims.len()) {
        of = None;
        (INVALID_SHARES, 0.0)
      } else {
        changed = true;
        reserve_as(state, dims, &tenant, id, amounts, ttl_us, max_wait_us, now_us)
      }
    }
    Request::StatsOf { tenant } => {
      if register(state, &tenant, dims.len()) {
        changed = true;
        of = Some(tenant.id);
        (OK, 0.0)
      } else {
        (INVALID_SHARES, 0.0)
      }
    }
    Request::Settle { id, actual } => match take(state, id, now_us) {
      None => (NOT_OPEN, 0.0),
      Some(r) => {
        let back: Vec<f64> = (0..dims.len()).map(|d| r.amounts.get(d).copied().unwrap_or(0.0) - actual[d]).collect();
        give_back(state, dims, &r, &back, now_us);
        changed = true;
        (OK, 0.0)
      }
    },
    Request::Cancel { id } => match take(state, id, now_us) {
      None => (NOT_OPEN, 0.0),
      Some(r) => {
        let back: Vec<f64> = (0..dims.len()).map(|d| r.amounts.get(d).copied().unwrap_or(0.0)).collect();
        give_back(state, dims, &r, &back, now_us);
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
  let tenant = of.and_then(|id| state.tenants.get(id)).map(|t| {
    let used = dims
      .iter()
      .enumerate()
      .map(|(d, dim)| if t.share > 0.0 { level(dim, at(&t.lane, d), t.share, now_us) } else { 0.0 })
      .collect();
    (t.share, t.max, used)
  });
  let reply = Reply { status, delay_us, open: state.open, expired: state.expired, dimensions, tenant };
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
  for t in &state.borrowed {
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

#[cfg(test)]
mod tests;
