//! Granular quotas, Sentry's sliding-window model (`sentry-redis-tools` 0.5.0), with the
//! same arithmetic so the same calls get the same grants.
//!
//! A quota is `limit` units per `window` seconds, counted in granules of `granularity`
//! seconds. A call at `t` (whole seconds) counts the `n = window / granularity` granules
//! `g0 - n + 1 ..= g0` with `g0 = floor(t / granularity) - 1` (one granule behind `t`:
//! Sentry's off-by-one, kept so results match), and charges only `g0`.
//!
//! A request asks for `requested` units under several quotas; it is granted the minimum of
//! `requested` and every quota's remaining (`max(0, limit - used)`), and a quota whose
//! remaining was below the running grant is "reached". The requests of one call are decided
//! in order, each seeing what the earlier ones were granted on every counter they share
//! (Sentry accounts for that only on `prefixOverride` quotas, by object identity).
//!
//! State per counter (one per prefix, window and granularity): the charged granules, each
//! `(before, count)` where `before` is the running total charged to older granules. The
//! units in granules `a ..= b` are `before + count` of the newest charged granule ≤ `b`
//! minus `before` of the oldest ≥ `a`: two lookups whatever `window / granularity` is,
//! where Sentry reads `n` keys (3,600 for an hour in seconds). Charging the newest granule
//! is an update at the end; charging an older one (an old timestamp) shifts the `before`
//! of the newer granules. Granules more than `2n` behind the newest are dropped: calls up
//! to one window behind the newest are counted exactly, older ones see fewer units (in
//! Sentry an old timestamp likewise reads old, mostly empty granules). Mirrored by
//! `lua/quota.lua` (a sorted set per counter, score = granule).

use std::collections::BTreeMap;

/// When the running total passes this, every `before` is rebased (far below 2^53).
pub const REBASE_AT: f64 = 1e15;

/// The granule charged by a call at `timestamp` (seconds).
pub fn granule(timestamp: f64, granularity_s: f64) -> i64 {
  (timestamp / granularity_s).floor() as i64 - 1
}

/// Granules per window.
pub fn granules(window_s: f64, granularity_s: f64) -> i64 {
  (window_s / granularity_s) as i64
}

/// The charged granules of one counter.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Counter {
  granules: BTreeMap<i64, (f64, f64)>,
}

impl Counter {
  pub fn is_empty(&self) -> bool {
    self.granules.is_empty()
  }

  /// `(granule, before, count)` of every charged granule, oldest first.
  pub fn granules(&self) -> impl Iterator<Item = (i64, f64, f64)> + '_ {
    self.granules.iter().map(|(g, (b, c))| (*g, *b, *c))
  }

  /// Units charged to the `n` granules ending at `g0`.
  pub fn used(&self, g0: i64, n: i64) -> f64 {
    let first = self.granules.range(g0 - n + 1..).next();
    let last = self.granules.range(..=g0).next_back();
    match (first, last) {
      (Some((a, (start, _))), Some((_, (before, count)))) if *a <= g0 => before + count - start,
      _ => 0.0,
    }
  }

  /// Adds `amount` to granule `g` (negative: a refund, only of what the granule holds);
  /// when that creates the granule, drops the granules more than `2n` behind the newest,
  /// except those a read at `g` counts.
  pub fn add(&mut self, g: i64, amount: f64, n: i64) {
    let mut inserted = false;
    let delta = match self.granules.get_mut(&g) {
      Some((_, count)) => {
        let after = (*count + amount).max(0.0);
        let delta = after - *count;
        *count = after;
        delta
      }
      None if amount > 0.0 => {
        inserted = true;
        let before = match self.granules.range(..g).next_back() {
          Some((_, (b, c))) => b + c,
          None => self.granules.range(g + 1..).next().map_or(0.0, |(_, (b, _))| *b),
        };
        self.granules.insert(g, (before, amount));
        amount
      }
      None => 0.0,
    };
    if self.granules.get(&g).is_some_and(|(_, c)| *c <= 0.0) {
      self.granules.remove(&g);
    }
    if delta != 0.0 {
      for (_, (before, _)) in self.granules.range_mut(g + 1..) {
        *before += delta;
      }
    }
    // a new granule drops the ones more than 2n behind the newest, never the window of the
    // granule just charged: a read at the same timestamp (a later request of the same call
    // or tick) must see the charge
    if let (true, Some(newest)) = (inserted, self.granules.keys().next_back().copied()) {
      self.granules = self.granules.split_off(&(newest - 2 * n + 1).min(g - n + 1));
    }
    if self.granules.values().next_back().is_some_and(|(b, c)| b + c > REBASE_AT) {
      let base = self.granules.values().next().map_or(0.0, |(b, _)| *b);
      for (before, _) in self.granules.values_mut() {
        *before -= base;
      }
    }
  }
}

/// A quota of a request, with its counter.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct QuotaRef {
  /// Index of the counter (its key) in the call.
  pub counter: usize,
  pub limit: f64,
  pub window_s: f64,
  pub granularity_s: f64,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Request {
  pub requested: f64,
  pub quotas: Vec<QuotaRef>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Grant {
  pub granted: f64,
  /// Per quota, in the request's order: whether it limited the grant.
  pub reached: Vec<bool>,
  /// Per quota: its remaining as the request saw it (clamped at 0).
  pub remaining: Vec<f64>,
}

/// Sentry's loop: the grant starts at `requested` and each quota, in order, whose remaining
/// is below it lowers it and is reached.
pub fn grant(requested: f64, remaining: &[f64]) -> Grant {
  let mut granted = requested;
  let remaining: Vec<f64> = remaining.iter().map(|r| r.max(0.0)).collect();
  let reached = remaining
    .iter()
    .map(|r| {
      let lower = *r < granted;
      if lower {
        granted = *r;
      }
      lower
    })
    .collect();
  Grant { granted, reached, remaining }
}

/// The distinct counters of a request, in first-use order (a request charges each once).
pub fn distinct_counters(request: &Request) -> Vec<usize> {
  let mut out: Vec<usize> = Vec::with_capacity(request.quotas.len());
  for q in &request.quotas {
    if !out.contains(&q.counter) {
      out.push(q.counter);
    }
  }
  out
}

/// Decides the requests of one call in order, given what each counter had `used` before the
/// call; each request sees the grants of the earlier ones. Returns the grants and, per
/// counter, the units the call grants on it.
pub fn plan(requests: &[Request], used: &[f64]) -> (Vec<Grant>, Vec<f64>) {
  let mut charged = vec![0.0; used.len()];
  let grants = requests
    .iter()
    .map(|r| {
      let remaining: Vec<f64> = r.quotas.iter().map(|q| q.limit - used[q.counter] - charged[q.counter]).collect();
      let g = grant(r.requested, &remaining);
      for c in distinct_counters(r) {
        charged[c] += g.granted;
      }
      g
    })
    .collect();
  (grants, charged)
}

/// Units used on each counter at `timestamp` (every counter is given with the window and
/// granularity of the quotas that name it).
pub fn used_at(counters: &[&Counter], shapes: &[(f64, f64)], timestamp: f64) -> Vec<f64> {
  counters
    .iter()
    .zip(shapes)
    .map(|(c, (window_s, granularity_s))| {
      c.used(granule(timestamp, *granularity_s), granules(*window_s, *granularity_s))
    })
    .collect()
}

#[cfg(test)]
mod tests {
  use super::*;
  use proptest::prelude::*;

  fn q(counter: usize, limit: f64) -> QuotaRef {
    QuotaRef { counter, limit, window_s: 10.0, granularity_s: 1.0 }
  }

  #[test]
  fn granules_are_one_step_behind_the_timestamp_as_in_sentry() {
    assert_eq!(granule(100.0, 10.0), 9);
    assert_eq!(granule(109.99, 10.0), 9);
    assert_eq!(granule(5.0, 10.0), -1);
    assert_eq!(granules(3600.0, 60.0), 60);
  }

  #[test]
  fn counts_the_window_of_granules_ending_at_g0() {
    let mut c = Counter::default();
    for g in 0..20 {
      c.add(g, 1.0, 10);
    }
    assert_eq!(c.used(19, 10), 10.0);
    assert_eq!(c.used(25, 10), 4.0, "granules 16..=19");
    assert_eq!(c.used(40, 10), 0.0);
    assert_eq!(c.used(12, 10), 10.0, "an old timestamp within one window of the newest is exact");
    assert_eq!(c.granules().count(), 20, "2n granules kept");
    c.add(20, 1.0, 10);
    assert_eq!(c.granules().next().unwrap().0, 1, "older ones dropped");
  }

  #[test]
  fn charging_an_older_granule_shifts_the_newer_ones_and_refunds_stop_at_zero() {
    let mut c = Counter::default();
    c.add(10, 5.0, 10);
    c.add(5, 2.0, 10);
    assert_eq!(c.used(10, 10), 7.0);
    assert_eq!(c.used(9, 5), 2.0);
    assert_eq!(c.used(10, 1), 5.0);
    c.add(5, -10.0, 10);
    assert_eq!(c.used(10, 10), 5.0);
    assert_eq!(c.granules().count(), 1, "an emptied granule is dropped");
    c.add(3, -1.0, 10);
    assert_eq!(c.used(10, 10), 5.0, "a refund of an uncharged granule does nothing");
  }

  #[test]
  fn grants_the_minimum_and_lists_reached_quotas_in_order() {
    let g = grant(10.0, &[20.0, 5.0, 7.0, 3.0, -4.0]);
    assert_eq!(g.granted, 0.0);
    assert_eq!(g.reached, [false, true, false, true, true]);
    let g = grant(0.0, &[0.0]);
    assert_eq!((g.granted, g.reached), (0.0, vec![false]));
  }

  #[test]
  fn later_requests_of_a_call_see_earlier_grants_on_shared_counters() {
    let requests = [
      Request { requested: 6.0, quotas: vec![q(0, 100.0), q(2, 10.0)] },
      Request { requested: 6.0, quotas: vec![q(1, 100.0), q(2, 10.0)] },
      Request { requested: 6.0, quotas: vec![q(1, 100.0), q(1, 100.0)] },
    ];
    let (grants, charged) = plan(&requests, &[0.0, 0.0, 1.0]);
    assert_eq!(grants.iter().map(|g| g.granted).collect::<Vec<_>>(), [6.0, 3.0, 6.0]);
    assert_eq!(grants[1].reached, [false, true]);
    assert_eq!(charged, [6.0, 9.0, 9.0], "a request charges a counter once even if two quotas name it");
  }

  proptest! {
    /// The counter's sums equal a plain per-granule count over any window, whatever order
    /// the granules are charged and refunded in.
    #[test]
    fn sums_match_a_plain_count(ops in proptest::collection::vec((0i64..40, -3i32..6), 1..80), n in 1i64..8) {
      let mut c = Counter::default();
      let mut plain: BTreeMap<i64, f64> = BTreeMap::new();
      for (g, amount) in ops {
        c.add(g, amount as f64, n);
        let inserted = amount > 0 && plain.get(&g).is_none_or(|x| *x == 0.0);
        let slot = plain.entry(g).or_insert(0.0);
        if amount > 0 || *slot > 0.0 {
          *slot = (*slot + amount as f64).max(0.0);
        }
        let newest = c.granules().last().map(|x| x.0);
        if let Some(newest) = newest {
          if inserted {
            plain.retain(|k, _| *k >= (newest - 2 * n + 1).min(g - n + 1));
          }
          for g0 in newest - n..=newest + n {
            let want: f64 = plain.range(g0 - n + 1..=g0).map(|(_, x)| x).sum();
            prop_assert_eq!(c.used(g0, n), want);
          }
        }
      }
    }
  }
}
