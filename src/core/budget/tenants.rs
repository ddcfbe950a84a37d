//! Tenants of a budget: registering a tenant view, its activity, a reservation through it
//! (its lane or borrowing), and what a settlement or a cancellation gives back on its lane and
//! ceiling. Mirrored by `lua/budget/tenants.lua`.
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

use super::*;

/// Registers the tenant (or updates its share and max); false (nothing changed) when the
/// shares would sum over 1e6 ppm.
pub(super) fn register(state: &mut State, t: &TenantArg, n: usize) -> bool {
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

/// A reservation through tenant `t` (registered): `(status, delay)`, charged when admitted.
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
pub(super) fn give_back(state: &mut State, dims: &[Dimension], r: &Reservation, back: &[f64], now_us: f64) {
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
