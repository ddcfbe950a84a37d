//! Fair multi-tenant routing (sidekiq-fair_tenant): each assignment registers one job of a
//! tenant and counts the tenant's jobs over each rule's sliding window, in one step; the
//! caller then picks the last rule whose threshold the count exceeds.
//!
//! Two records of a tenant's jobs:
//! - [`Log`] (`exact`): one entry per job id with the time it was last registered, as the
//!   gem's sorted set. Registering an id again moves it to now and never counts it twice. A
//!   window of `per` counts the ids registered in `(now - per, now]`. Memory: one entry per
//!   job of the longest window.
//! - [`Granules`] (`approximate`): a counter per granule of each rule's granularity (granule
//!   `h` of granularity `g` holds `[h * g, (h + 1) * g)`). A window of `per` counts the
//!   `floor(per / g)` newest granules, the current one included: it covers between
//!   `per - 2 g` and `per` of time (`per - g` when `g` divides `per`), so the count misses at
//!   most the jobs of two granules (one) at the window's old edge and never counts a job
//!   older than `per`. Ids are not kept: a re-registered id counts again. Memory: about
//!   `per / g + 1` counters per granularity, whatever the number of jobs.
//!
//! Times are whole ms. Mirrored by `lua/fair.lua` (a sorted set, member = job id, score =
//! ms; and a hash, field = `<granularity>:<granule index>`, value = count).

use std::collections::{BTreeMap, BTreeSet, HashMap};

/// One tenant's exact log.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Log {
  by_id: HashMap<String, u64>,
  by_time: BTreeSet<(u64, String)>,
}

impl Log {
  /// Registers `id` at `now_ms` (moving it if present), drops what is at least `horizon_ms`
  /// old, and counts the ids in `(now - per, now]` for each of `pers_ms`.
  pub fn register(&mut self, id: &str, now_ms: u64, horizon_ms: u64, pers_ms: &[u64]) -> Vec<f64> {
    // `(t, "")` sorts before every `(t, id)`: everything registered at or before the cut goes
    let cut = now_ms.saturating_sub(horizon_ms);
    while let Some((at, _)) = self.by_time.first() {
      if *at > cut || horizon_ms > now_ms {
        break;
      }
      let (_, old) = self.by_time.pop_first().expect("first exists");
      self.by_id.remove(&old);
    }
    if let Some(at) = self.by_id.insert(id.to_owned(), now_ms) {
      self.by_time.remove(&(at, id.to_owned()));
    }
    self.by_time.insert((now_ms, id.to_owned()));
    pers_ms
      .iter()
      .map(|per| {
        if *per > now_ms {
          return self.by_time.len() as f64;
        }
        self.by_time.range((now_ms - per + 1, String::new())..).count() as f64
      })
      .collect()
  }

  /// Ids held.
  pub fn len(&self) -> usize {
    self.by_id.len()
  }

  pub fn is_empty(&self) -> bool {
    self.by_id.is_empty()
  }

  /// The newest registration, ms.
  pub fn newest_ms(&self) -> Option<u64> {
    self.by_time.last().map(|(at, _)| *at)
  }
}

/// One tenant's granular counters, per granularity: `(granularity_ms, granule index)` ->
/// jobs counted in that granule.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Granules {
  counts: BTreeMap<(u64, u64), f64>,
}

impl Granules {
  /// Counts one job in the granule of `now_ms` of each granularity in `rules` (`(per_ms,
  /// granularity_ms)` pairs), drops the granules no window needs any more (those that end
  /// at least the longest window of their granularity ago, and those of a granularity no
  /// rule uses), and sums, for each rule, its `per / granularity` newest granules (the
  /// current one included).
  pub fn register(&mut self, now_ms: u64, rules: &[(u64, u64)]) -> Vec<f64> {
    let keep = |g: u64| rules.iter().filter(|(_, rg)| *rg == g).map(|(per, _)| *per).max();
    self.counts.retain(|(g, h), _| keep(*g).is_some_and(|per| (h + 1) * g + per > now_ms));
    let mut seen: Vec<u64> = vec![];
    for (_, g) in rules {
      if !seen.contains(g) {
        seen.push(*g);
        *self.counts.entry((*g, now_ms / g)).or_insert(0.0) += 1.0;
      }
    }
    rules
      .iter()
      .map(|(per, g)| {
        let current = now_ms / g;
        let from = (current + 1).saturating_sub(per / g);
        self.counts.range((*g, from)..=(*g, current)).map(|(_, c)| *c).sum()
      })
      .collect()
  }

  /// Granules held.
  pub fn len(&self) -> usize {
    self.counts.len()
  }

  pub fn is_empty(&self) -> bool {
    self.counts.is_empty()
  }
}

#[cfg(test)]
mod tests {
  use super::*;

  #[test]
  fn exact_counts_sliding_windows_and_ids_once() {
    let mut log = Log::default();
    assert_eq!(log.register("a", 1_000, 10_000, &[1_000, 10_000]), vec![1.0, 1.0]);
    assert_eq!(log.register("b", 1_500, 10_000, &[1_000, 10_000]), vec![2.0, 2.0]);
    // a is 1 000 old at 2 000: it has left the 1 s window
    assert_eq!(log.register("c", 2_000, 10_000, &[1_000, 10_000]), vec![2.0, 3.0]);
    // re-registering a moves it to now, and it still counts once
    assert_eq!(log.register("a", 2_100, 10_000, &[1_000, 10_000]), vec![3.0, 3.0]);
    assert_eq!(log.len(), 3);
    // at 11 500 b (1 500) is exactly 10 s old: dropped; c and a stay
    assert_eq!(log.register("d", 11_500, 10_000, &[1_000, 10_000]), vec![1.0, 3.0]);
    assert_eq!(log.len(), 3);
    assert_eq!(log.newest_ms(), Some(11_500));
  }

  #[test]
  fn granules_count_the_newest_granules_and_drop_old_ones() {
    let mut g = Granules::default();
    // granularity 100, a rule of 300: the 3 newest granules
    let rules = [(300, 100), (1_000, 100)];
    assert_eq!(g.register(1_050, &rules), vec![1.0, 1.0]);
    assert_eq!(g.register(1_150, &rules), vec![2.0, 2.0]);
    assert_eq!(g.register(1_299, &rules), vec![3.0, 3.0]);
    // at 1 300 the granule [1 000, 1 100) is no longer among the 3 newest
    assert_eq!(g.register(1_300, &rules), vec![3.0, 4.0]);
    // ids are not kept: the same job counts again
    assert_eq!(g.register(1_301, &rules), vec![4.0, 5.0]);
    // at 2 100 the granule ending at 1 100 is 1 000 old: dropped; the granule [1 100, 1 200)
    // is kept but is not among the 10 newest (12..=21)
    assert_eq!(g.register(2_100, &rules), vec![1.0, 4.0]);
    assert_eq!(g.len(), 4);
    // each granularity keeps only what its own longest window needs
    let mut g = Granules::default();
    for t in 0..100u64 {
      g.register(10_000 + t * 50, &[(300, 10), (1_000, 100)]);
    }
    assert!(g.len() <= 31 + 11, "{}", g.len());
  }

  #[test]
  fn granule_counts_stay_within_one_granule_of_the_exact_count() {
    let mut exact = Log::default();
    let mut approx = Granules::default();
    let mut t = 10_000u64;
    for i in 0..5_000u64 {
      t += (i * 7919) % 23;
      let e = exact.register(&i.to_string(), t, 3_000, &[1_000, 3_000]);
      let a = approx.register(t, &[(1_000, 100), (3_000, 100)]);
      for (w, (e, a)) in e.iter().zip(&a).enumerate() {
        assert!(a <= e, "window {w}: {a} > {e}");
        // at most one granule (100 ms) of jobs is missed: at most 100 ms / 0 ms gaps = all
        // jobs within 100 ms of the old edge
        assert!(e - a <= 100.0, "window {w}: {a} vs {e}");
      }
    }
    assert!(approx.len() <= 31);
  }
}
