//! The embedded store: runs the core steps under one lock, in process. Same semantics as
//! Redis (atomic decisions, TTL on every key), no network, no tokio: calls are synchronous.

use super::{Entry, PacerBatch};
use crate::core::pacer::{self, Decision, Params, State};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::time::{SystemTime, UNIX_EPOCH};

struct Slot {
  state: State,
  expires_us: f64,
}

#[derive(Default)]
struct Inner {
  pacers: HashMap<String, Slot>,
  /// Size of the map after the last sweep of expired keys; the next sweep runs when the map
  /// has doubled, so sweeping costs O(1) amortised per write.
  swept_len: usize,
}

/// In-process store.
#[derive(Default)]
pub struct MemoryStore {
  inner: Mutex<Inner>,
}

/// The system clock in µs since the epoch.
pub fn system_now_us() -> f64 {
  let d = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
  d.as_micros() as f64
}

impl Inner {
  fn load(&self, key: &str, now_us: f64) -> Option<State> {
    self.pacers.get(key).filter(|s| s.expires_us > now_us).map(|s| s.state)
  }

  fn save(&mut self, key: &str, state: State, ttl_ms: f64, now_us: f64) {
    let expires_us = now_us + ttl_ms * 1000.0;
    match self.pacers.get_mut(key) {
      Some(slot) => *slot = Slot { state, expires_us },
      None => {
        self.pacers.insert(key.to_owned(), Slot { state, expires_us });
        if self.pacers.len() >= 2 * self.swept_len.max(512) {
          self.pacers.retain(|_, s| s.expires_us > now_us);
          self.swept_len = self.pacers.len();
        }
      }
    }
  }
}

impl MemoryStore {
  pub fn new() -> Self {
    Self::default()
  }

  /// One pacer call.
  pub fn pacer_step(&self, key: &str, params: &Params, weight: f64, now_us: f64) -> Decision {
    let mut inner = self.inner.lock();
    let outcome = pacer::step(inner.load(key, now_us), params, weight, now_us);
    if let Some((state, ttl_ms)) = outcome.save {
      inner.save(key, state, ttl_ms, now_us);
    }
    outcome.decision
  }

  /// Several entries, in order, under one lock acquisition.
  pub fn pacer_batch(&self, batch: &PacerBatch, now_us: f64) -> Vec<Decision> {
    let mut inner = self.inner.lock();
    let mut decisions = Vec::with_capacity(batch.members.len());
    for Entry { members, .. } in &batch.entries {
      let members = &batch.members[members.clone()];
      // Local key numbering for the group; members may repeat a key.
      let mut local: Vec<usize> = Vec::with_capacity(members.len());
      let group: Vec<(usize, Params, f64)> = members
        .iter()
        .map(|m| {
          let slot = local.iter().position(|k| *k == m.key).unwrap_or_else(|| {
            local.push(m.key);
            local.len() - 1
          });
          (slot, m.params, m.weight)
        })
        .collect();
      let mut states: Vec<Option<State>> =
        local.iter().map(|k| inner.load(&batch.keys[*k], now_us)).collect();
      let outcomes = pacer::step_group(&mut states, &group, now_us);
      // Save each key once, with the TTL of its last saving member.
      for (i, key) in local.iter().enumerate() {
        let ttl = group
          .iter()
          .zip(&outcomes)
          .rev()
          .find(|((slot, _, _), o)| *slot == i && o.save.is_some())
          .and_then(|(_, o)| o.save.map(|(_, ttl)| ttl));
        if let (Some(state), Some(ttl)) = (states[i], ttl) {
          inner.save(&batch.keys[*key], state, ttl, now_us);
        }
      }
      decisions.extend(outcomes.iter().map(|o| o.decision));
    }
    decisions
  }

  /// Number of live pacer keys (for tests and introspection).
  pub fn len(&self, now_us: f64) -> usize {
    self.inner.lock().pacers.values().filter(|s| s.expires_us > now_us).count()
  }

  pub fn is_empty(&self, now_us: f64) -> bool {
    self.len(now_us) == 0
  }
}

#[cfg(test)]
mod tests {
  use super::*;
  use crate::core::pacer::Mode;

  #[test]
  fn expired_keys_start_fresh() {
    let store = MemoryStore::new();
    let p = Params { qps: 1.0, max_burst: 0.0, factor: 1.0, mode: Mode::RateLimit };
    assert!(store.pacer_step("k", &p, 1.0, 0.0).admitted);
    assert!(!store.pacer_step("k", &p, 1.0, 1.0).admitted);
    assert_eq!(store.len(1.0), 1);
    let after_ttl = (1_000.0 + pacer::TTL_MARGIN_MS) * 1000.0 + 1.0;
    assert_eq!(store.len(after_ttl), 0);
  }
}
