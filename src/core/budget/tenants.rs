//! Tenants of a budget: a reservation through a tenant view (its lane or borrowing), the
//! tenant's activity, and what a settlement, a cancellation or an expiry gives back on its lane
//! and ceiling. Mirrored by `lua/includes/budget/tenants.lua`.
//!
//! A view `budget.tenant(id, { share, maxShare })` sends its share and max with every call, in
//! parts per million (`share`, `max`, integers, `0 <= share <= max <= 1e6`, `max >= 1`). The
//! budget holds a record of a tenant only while it is *active*: from its first admitted
//! reservation while it has an open one (waiting or unsettled: `open > 0`), then until one
//! second after its latest reservation ([`ACTIVE_US`]) and until its lanes drained
//! (`State::active`, ordered by that time, [`NEVER`] while open; at most [`PRUNE`] leave per
//! call, and their records go with them). So a budget holds as many records as it has active
//! tenants, whatever the number of ids ever seen. `active_shares` is the sum of the active
//! tenants' shares; when it is over 1e6 every lane runs at its share scaled by `1e6 /
//! active_shares` (weighted fair shares): no share is ever refused.
//!
//! Each active tenant has its own tail (FIFO within the tenant), per dimension a *lane* (a GCRA
//! at its scaled share of `limit`, tolerance `tolerance_d`: its guaranteed rate) and a
//! *ceiling* (a GCRA at `max * limit`), and the budget holds per dimension `borrowed_us`, the
//! tat of what tenants borrowed beyond their lanes. A tenant's reservation at `now` with
//! `s0 = max(now, tail)`:
//!
//! - *within its share* (the lane path): `sg = max(s0, lane_d - tol_d, lent_d)`. `lent_d` is
//!   `borrowed_d` when the tenant is idle (no record): its share was lent, and it waits for what
//!   others borrowed (committed at most `ahead_us` ahead, see below); an idle tenant whose
//!   share makes the active shares sum over 1e6 takes rate from the active lanes, which were
//!   charged at a higher rate: it also waits for `committed_d - tol_d`, `committed_d` the tat at the full rate of
//!   every lane charge (when what the lanes committed has drained; a lane's reservations all
//!   start before it, so the overlap is at most one reservation per lane, and joiners queue
//!   behind each other only by their cost at the full rate). When it is active, `lent_d` is `min(hold_d, borrowed_d)`,
//!   `hold_d` being `borrowed_d` when it became active: what was borrowed before (at a rate that
//!   counted its share free) still holds its lane. Other tenants' lanes, however long their
//!   queues, never delay it;
//! - *borrowing*: `sb = max(s0, ceiling_d - tol_d, tat_d - tol_d, borrowed_d - tol_d)`, the
//!   shared budget's own check (which counts every charge, lanes included), the ceiling and
//!   the borrowing pool: a GCRA whose charges cost at the rate the active tenants leave,
//!   `1e6 - min(1e6, active_shares)` ppm (none: no borrowing), so borrowers never take an
//!   active lane's rate. Allowed only when `sb <= now + ahead_us`: borrowed capacity is
//!   committed at most `ahead_us` ahead, which is what a tenant coming back waits for at most.
//!
//! The earlier start wins (ties: the lane); a tenant of share 0 only borrows, and is refused
//! (with the wait it would need) when it cannot. A refused reservation changes nothing (an idle
//! tenant gets no record). Every path charges the shared `tat_d` and the ceiling; the lane path
//! its lane, the borrow path `borrowed_d`. A settle or cancel adjusts the same tats by the same
//! difference (the lane's at its scaled share now; the pool's at the full rate). Reservations
//! without a tenant borrow without ceiling or horizon (`tail_us` is their FIFO): with no rate
//! left to lend they are refused.

use super::*;

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
  /// Until when it is active (its key in `State::active`), µs: [`tenants::NEVER`] while it
  /// has an open reservation.
  pub active_until: f64,
  /// Its open reservations (waiting or unsettled).
  pub open: f64,
  /// When it last reserved (the call's time), µs.
  pub last_us: f64,
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

/// A tenant stays active this long after its latest reservation, µs.
pub const ACTIVE_US: f64 = 1e6;
/// `active_until` of a tenant with an open reservation: later than any time.
pub const NEVER: f64 = 9e15;
/// Tenants `stats()` lists at most: of those active now (`active_until` past now; the others
/// are leaving, a few per call, and are neither listed nor counted), the ones with an open
/// reservation first, then the latest active (by `active_until`, then id, both descending: a
/// Redis ZREVRANGEBYSCORE).
pub const TOP: usize = 20;

/// The rate of a lane of `share` ppm while the active shares sum to `active` ppm: scaled down
/// in proportion when they sum over 1e6.
pub fn scaled(share: f64, active: f64) -> f64 {
  if active > PPM {
    share * PPM / active
  } else {
    share
  }
}

/// Moves tenant `id` to `until` in the active set.
fn rekey(state: &mut State, id: &str, until: f64) {
  if let Some(t) = state.tenants.get_mut(id) {
    if t.active_until != until {
      state.active.remove(&(t.active_until as u64, id.to_owned()));
      t.active_until = until;
      state.active.insert((until as u64, id.to_owned()));
    }
  }
}

/// Tenant `id` is no longer active: it leaves with its record and its share.
fn leave(state: &mut State, id: &str) {
  if let Some(t) = state.tenants.remove(id) {
    state.active.remove(&(t.active_until as u64, id.to_owned()));
    state.active_shares -= t.share;
  }
}

/// One of tenant `id`'s reservations closed (settled, cancelled, expired) at `now_us`: with
/// none left open it stays active until a second after its latest reservation and its lanes
/// drained, and leaves at once if that is past.
pub(super) fn closed(state: &mut State, id: &str, now_us: f64) {
  let Some(t) = state.tenants.get_mut(id) else { return };
  t.open -= 1.0;
  if t.open <= 0.0 {
    t.open = 0.0;
    let until = t.lane.iter().fold(t.last_us + ACTIVE_US, |a, b| later(a, *b));
    if until <= now_us {
      leave(state, id);
    } else {
      rekey(state, id, until);
    }
  }
}

/// Tenants no longer active by `now_us` leave with their records, at most [`PRUNE`] per call,
/// earliest first (ties by id, bytewise); true if any.
pub fn expire_active(state: &mut State, now_us: f64) -> bool {
  let mut changed = false;
  for _ in 0..PRUNE {
    let Some((until, id)) = state.active.first().cloned() else { break };
    if until as f64 > now_us {
      break;
    }
    leave(state, &id);
    changed = true;
  }
  changed
}

/// The level of a tat at `ppm` of the rate, rounded up.
pub(super) fn level(dim: &Dimension, tat: f64, ppm: f64, now_us: f64) -> f64 {
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

/// A reservation through tenant `t`: `(status, delay)`, charged (and the tenant active) when
/// admitted; nothing changes when refused.
#[allow(clippy::too_many_arguments)]
pub(super) fn reserve_as(
  state: &mut State,
  dims: &[Dimension],
  t: &TenantArg,
  id: &str,
  amounts: &[f64],
  ttl_us: f64,
  max_wait_us: f64,
  now_us: f64,
) -> (f64, f64) {
  let n = dims.len();
  let fresh = Tenant::default();
  let known = state.tenants.get(t.id);
  let idle = known.is_none();
  let tenant = known.unwrap_or(&fresh);
  // the active shares once this tenant is active with its share as sent
  let active = state.active_shares - tenant.share + t.share;
  let (s0, mut sg) = (later(now_us, tenant.tail_us), later(now_us, tenant.tail_us));
  let mut sb = s0;
  for (d, dim) in dims.iter().enumerate() {
    if amounts[d] > 0.0 {
      let tol = dim.tolerance_us();
      let borrowed = at(&state.borrowed, d);
      // an idle tenant's share was lent: its lane waits for what was borrowed; one whose share
      // scales the active lanes down also for what they committed at their former rates
      let lent = if !idle {
        at(&tenant.hold, d).min(borrowed)
      } else if active > PPM {
        later(borrowed, at(&state.committed, d) - tol)
      } else {
        borrowed
      };
      sg = later(sg, later(at(&tenant.lane, d) - tol, lent));
      sb = later(sb, later(later(at(&tenant.ceiling, d), tat(state, d)), borrowed) - tol);
    }
  }
  let lane_ok = t.share > 0.0;
  // what active lanes leave: the borrowing pool's rate
  let free = PPM - active.min(PPM);
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
  if idle {
    let hold = state.borrowed.clone();
    let e = state.tenants.entry(t.id.to_owned()).or_default();
    e.hold = hold;
    state.active_shares += t.share;
    state.active.insert((0, t.id.to_owned()));
  } else {
    state.active_shares = active;
  }
  let rate = scaled(t.share, state.active_shares);
  let (borrowed, committed) = (&mut state.borrowed, &mut state.committed);
  let Some(tenant) = state.tenants.get_mut(t.id) else { return (REFUSED, delay) };
  tenant.share = t.share;
  tenant.max = t.max;
  for v in [&mut tenant.lane, &mut tenant.ceiling, &mut tenant.hold] {
    if v.len() < n {
      v.resize(n, 0.0);
    }
  }
  let mut latest = later(state.latest_tenant_us, s);
  for (d, dim) in dims.iter().enumerate() {
    if amounts[d] > 0.0 {
      tenant.ceiling[d] = cap(later(tenant.ceiling[d], s) + dim.cost_at(amounts[d], tenant.max), now_us);
      latest = later(latest, tenant.ceiling[d]);
      if lane {
        tenant.lane[d] = cap(later(tenant.lane[d], s) + dim.cost_at(amounts[d], rate), now_us);
        committed[d] = cap(later(committed[d], s) + dim.cost_us(amounts[d]), now_us);
        latest = later(latest, tenant.lane[d]);
      } else {
        borrowed[d] = cap(later(borrowed[d], s) + dim.cost_at(amounts[d], free), now_us);
        latest = later(latest, borrowed[d]);
      }
    }
  }
  tenant.tail_us = s;
  tenant.open += 1.0;
  tenant.last_us = now_us;
  state.latest_tenant_us = latest;
  rekey(state, t.id, NEVER);
  record(state, id, amounts, s, ttl_us, Some((t.id.to_owned(), lane)));
  (OK, delay)
}

/// Gives back `back[d]` (negative: debt) of the reservation `r` on every tat it charged.
pub(super) fn give_back(state: &mut State, dims: &[Dimension], r: &Reservation, back: &[f64], now_us: f64) {
  grow(state, dims.len());
  for (d, dim) in dims.iter().enumerate() {
    adjust(state, d, dim, back[d], now_us);
  }
  let borrowed = match &r.tenant {
    None => true,
    Some((id, lane)) => {
      let mut latest = state.latest_tenant_us;
      let active = state.active_shares;
      if let Some(tenant) = state.tenants.get_mut(id) {
        let (rate, max) = (scaled(tenant.share, active), tenant.max);
        for (d, dim) in dims.iter().enumerate() {
          if d < tenant.ceiling.len() {
            adjust_at(&mut tenant.ceiling[d], dim, max, back[d], now_us);
            latest = later(latest, tenant.ceiling[d]);
            if *lane && rate > 0.0 {
              adjust_at(&mut tenant.lane[d], dim, rate, back[d], now_us);
              latest = later(latest, tenant.lane[d]);
            }
          }
        }
      }
      state.latest_tenant_us = latest;
      if *lane {
        for (d, dim) in dims.iter().enumerate() {
          adjust_at(&mut state.committed[d], dim, PPM, back[d], now_us);
        }
      }
      !*lane
    }
  };
  if borrowed {
    for (d, dim) in dims.iter().enumerate() {
      adjust_at(&mut state.borrowed[d], dim, PPM, back[d], now_us);
    }
  }
}
