//! The embedded store: runs the core steps under one lock, in process. Same semantics as
//! Redis (atomic decisions, TTL on every key), no network, no tokio: calls are synchronous.
//!
//! Keys are interned: a key string maps to a small integer id once, and the hot path
//! ([`MemoryStore::pacer_step_id`]) then indexes a vector instead of hashing a string. Ids
//! live until [`MemoryStore::sweep`] drops the keys whose TTL has passed; whoever caches ids
//! (the JS layer) must forget them whenever a sweep reports that it freed some.

use super::fair::{FairCall, FairMode};
use super::limits::{reset_decision, Action, LimitBatch};
use super::windows::{QuotaCall, QuotaMode, SlidingAction, SlidingBatch};
use super::{Entry, PacerBatch};
use crate::core::concurrent::{Reply, Request, Semaphore};
use crate::core::limit::{self, Kind};
use crate::core::pacer::{self, Decision, Params, State};
use crate::core::{fair, quota, sliding};
use crate::error::{Error, Result};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::time::{SystemTime, UNIX_EPOCH};

/// What a key holds: the state of one algorithm.
#[derive(Clone, Copy)]
enum Value {
  Pacer(State),
  Limit(limit::State),
}

struct Slot {
  key: String,
  /// The state and when it expires, µs; `None` until first saved.
  state: Option<(Value, f64)>,
}

#[derive(Default)]
struct Inner {
  ids: HashMap<String, usize>,
  slots: Vec<Slot>,
  free: Vec<usize>,
  /// Interned keys after the last sweep; a sweep frees ids only once this has doubled.
  swept_len: usize,
  /// Concurrent limiters by key.
  semaphores: Expiring<Semaphore>,
  /// Sliding-window logs by key.
  logs: Expiring<sliding::Log>,
  /// Quota counters by key.
  counters: Expiring<quota::Counter>,
  /// Fair-tenant records by key: exact logs and granular counters.
  fair_logs: Expiring<fair::Log>,
  fair_granules: Expiring<fair::Granules>,
}

/// Values by key, each with the time it expires (µs); expired ones are dropped once the map
/// has doubled since the last sweep (O(1) amortised), and read as fresh before that.
struct Expiring<T> {
  map: HashMap<String, (T, f64)>,
  swept: usize,
}

impl<T> Default for Expiring<T> {
  fn default() -> Self {
    Expiring { map: HashMap::new(), swept: 0 }
  }
}

impl<T: Default> Expiring<T> {
  /// The live value of `key` (a fresh one if absent or expired) and its expiry.
  fn live(&mut self, key: &str, now_us: f64) -> &mut (T, f64) {
    if self.map.len() >= 2 * self.swept.max(512) {
      self.map.retain(|_, (_, expires_us)| *expires_us > now_us);
      self.swept = self.map.len();
    }
    let entry = self.map.entry(key.to_owned()).or_insert_with(|| (T::default(), 0.0));
    if entry.1 <= now_us {
      *entry = (T::default(), 0.0);
    }
    entry
  }
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
  fn intern(&mut self, key: &str) -> usize {
    if let Some(id) = self.ids.get(key) {
      return *id;
    }
    let slot = Slot { key: key.to_owned(), state: None };
    let id = match self.free.pop() {
      Some(id) => {
        self.slots[id] = slot;
        id
      }
      None => {
        self.slots.push(slot);
        self.slots.len() - 1
      }
    };
    self.ids.insert(key.to_owned(), id);
    id
  }

  fn load(&self, id: usize, now_us: f64) -> Option<State> {
    match self.slots[id].state {
      Some((Value::Pacer(state), expires_us)) if expires_us > now_us => Some(state),
      _ => None,
    }
  }

  fn save(&mut self, id: usize, state: State, ttl_ms: f64, now_us: f64) {
    self.slots[id].state = Some((Value::Pacer(state), now_us + ttl_ms * 1000.0));
  }

  /// One rate-limiter call on an interned key.
  fn limit(
    &mut self,
    id: usize,
    kind: Kind,
    params: &limit::Params,
    weight: f64,
    action: Action,
    now_us: f64,
  ) -> limit::Decision {
    let live = match self.slots[id].state {
      Some((Value::Limit(state), expires_us)) if expires_us > now_us => Some((state, expires_us)),
      _ => None,
    };
    let state = live.map(|(s, _)| s);
    let op = match action {
      Action::Reset => {
        self.slots[id].state = None;
        return reset_decision(params);
      }
      Action::Block => {
        let (blocked, until) = limit::block(state, weight, now_us);
        let expires_us = live.map_or(0.0, |(_, e)| e).max(until);
        self.slots[id].state = Some((Value::Limit(blocked), expires_us));
        let left = until - now_us;
        return limit::Decision { allowed: false, remaining: 0.0, retry_after_us: left, reset_after_us: left };
      }
      Action::Step(op) => op,
    };
    let outcome = limit::step(kind, state, params, weight, op, now_us);
    if let Some((state, ttl_ms)) = outcome.save {
      self.slots[id].state = Some((Value::Limit(state), now_us + ttl_ms * 1000.0));
    }
    outcome.decision
  }

  fn step(&mut self, id: usize, params: &Params, weight: f64, now_us: f64) -> Decision {
    let outcome = pacer::step(self.load(id, now_us), params, weight, now_us);
    if let Some((state, ttl_ms)) = outcome.save {
      self.save(id, state, ttl_ms, now_us);
    }
    outcome.decision
  }
}

impl MemoryStore {
  pub fn new() -> Self {
    Self::default()
  }

  /// The id of a key, valid until a [`sweep`](Self::sweep) that returns true.
  pub fn intern(&self, key: &str) -> usize {
    self.inner.lock().intern(key)
  }

  /// One pacer call on an interned key.
  pub fn pacer_step_id(&self, id: usize, params: &Params, weight: f64, now_us: f64) -> Result<Decision> {
    let mut inner = self.inner.lock();
    if id >= inner.slots.len() {
      return Err(Error::argument(format!("unknown key id {id}")));
    }
    Ok(inner.step(id, params, weight, now_us))
  }

  /// One pacer call.
  pub fn pacer_step(&self, key: &str, params: &Params, weight: f64, now_us: f64) -> Decision {
    let mut inner = self.inner.lock();
    let id = inner.intern(key);
    inner.step(id, params, weight, now_us)
  }

  /// Several entries, in order, under one lock acquisition.
  /// Blocks the pacer of `key` for `duration_us` (see `pacer::block`); µs until it ends.
  pub fn pacer_block(&self, key: &str, params: &Params, duration_us: f64, now_us: f64) -> f64 {
    let mut inner = self.inner.lock();
    let id = inner.intern(key);
    let (state, ttl_ms) = pacer::block(inner.load(id, now_us), params, duration_us, now_us);
    inner.save(id, state, ttl_ms, now_us);
    state.next_shot_us - now_us
  }

  pub fn pacer_batch(&self, batch: &PacerBatch, now_us: f64) -> Vec<Decision> {
    let mut inner = self.inner.lock();
    let ids: Vec<usize> = batch.keys.iter().map(|k| inner.intern(k)).collect();
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
      let mut states: Vec<Option<State>> = local.iter().map(|k| inner.load(ids[*k], now_us)).collect();
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
          inner.save(ids[*key], state, ttl, now_us);
        }
      }
      decisions.extend(outcomes.iter().map(|o| o.decision));
    }
    decisions
  }

  /// One rate-limiter call on an interned key (the synchronous hot path of the JS layer).
  pub fn limit_step_id(
    &self,
    id: usize,
    kind: Kind,
    params: &limit::Params,
    weight: f64,
    action: Action,
    now_us: f64,
  ) -> Result<limit::Decision> {
    let mut inner = self.inner.lock();
    if id >= inner.slots.len() {
      return Err(Error::argument(format!("unknown key id {id}")));
    }
    Ok(inner.limit(id, kind, params, weight, action, now_us))
  }

  /// Rate-limiter calls, in order, under one lock acquisition.
  pub fn limit_batch(&self, batch: &LimitBatch, now_us: f64) -> Vec<limit::Decision> {
    let mut inner = self.inner.lock();
    let ids: Vec<usize> = batch.keys.iter().map(|k| inner.intern(k)).collect();
    batch.entries.iter().map(|e| inner.limit(ids[e.key], e.kind, &e.params, e.weight, e.action, now_us)).collect()
  }

  /// One concurrent-limiter operation.
  pub fn concurrent(&self, key: &str, id: &str, request: Request, ttl_ms: f64, now_us: f64) -> Reply {
    let mut inner = self.inner.lock();
    let entry = inner.semaphores.live(key, now_us);
    let reply = entry.0.apply(id, request, now_us);
    if reply.changed {
      entry.1 = now_us + ttl_ms * 1000.0;
    }
    reply
  }

  /// Sliding-window calls, in order, under one lock acquisition.
  pub fn sliding_batch(&self, batch: &SlidingBatch, now_us: f64) -> Vec<sliding::Decision> {
    let mut inner = self.inner.lock();
    batch
      .calls
      .iter()
      .map(|call| {
        let entry = inner.logs.live(&batch.keys[call.key], now_us);
        match call.action {
          SlidingAction::Reset => {
            *entry = (sliding::Log::default(), 0.0);
            sliding::Decision {
              allowed: true,
              retry_after_us: 0.0,
              windows: call
                .windows
                .iter()
                .map(|w| sliding::WindowDecision { remaining: w.limit, retry_after_us: 0.0 })
                .collect(),
            }
          }
          SlidingAction::Block => {
            let until = entry.0.block(call.weight, now_us);
            entry.1 = entry.1.max(until);
            let left = until - now_us;
            sliding::Decision {
              allowed: false,
              retry_after_us: left,
              windows: call
                .windows
                .iter()
                .map(|_| sliding::WindowDecision { remaining: 0.0, retry_after_us: left })
                .collect(),
            }
          }
          SlidingAction::Step(op) => {
            let d = entry.0.step(&call.windows, call.weight, op, now_us);
            entry.1 = entry.0.expires_us(&call.windows).unwrap_or(0.0);
            d
          }
        }
      })
      .collect()
  }

  /// Fair-tenant assignments, in order, under one lock acquisition: per call, the tenant's
  /// count in each rule's window. A record expires its horizon after its last registration.
  pub fn fair_batch(&self, calls: &[FairCall], now_us: f64) -> Vec<Vec<f64>> {
    let mut inner = self.inner.lock();
    let now_ms = (now_us / 1000.0).floor().max(0.0) as u64;
    calls
      .iter()
      .map(|call| match call.mode {
        FairMode::Exact => {
          let entry = inner.fair_logs.live(&call.key, now_us);
          entry.1 = now_us + call.horizon_ms as f64 * 1000.0;
          entry.0.register(&call.id, now_ms, call.horizon_ms, &call.pers_ms())
        }
        FairMode::Approximate => {
          let entry = inner.fair_granules.live(&call.key, now_us);
          entry.1 = now_us + call.horizon_ms as f64 * 1000.0;
          entry.0.register(now_ms, &call.rules)
        }
      })
      .collect()
  }

  /// One quota call at `timestamp` (seconds), atomically; counters expire on the store's
  /// clock `now_us`, (window + granularity) after their last charge. Grants are empty for
  /// [`QuotaMode::Use`].
  pub fn quota(&self, call: &QuotaCall, mode: QuotaMode, timestamp: f64, now_us: f64) -> Vec<quota::Grant> {
    let mut inner = self.inner.lock();
    let (grants, amounts) = match mode {
      QuotaMode::Use => {
        let mut amounts = vec![0.0; call.keys.len()];
        for r in &call.requests {
          for c in quota::distinct_counters(r) {
            amounts[c] += r.requested;
          }
        }
        (vec![], amounts)
      }
      QuotaMode::Check | QuotaMode::CheckAndUse => {
        let used: Vec<f64> = call
          .keys
          .iter()
          .zip(call.shapes())
          .map(|(key, (window_s, granularity_s))| {
            let counter = &inner.counters.live(key, now_us).0;
            counter.used(quota::granule(timestamp, *granularity_s), quota::granules(*window_s, *granularity_s))
          })
          .collect();
        let (grants, charged) = quota::plan(&call.requests, &used);
        (grants, if mode == QuotaMode::Check { vec![] } else { charged })
      }
    };
    for ((key, (window_s, granularity_s)), amount) in call.keys.iter().zip(call.shapes()).zip(amounts) {
      if amount != 0.0 {
        let entry = inner.counters.live(key, now_us);
        entry.0.add(quota::granule(timestamp, *granularity_s), amount, quota::granules(*window_s, *granularity_s));
        entry.1 = if entry.0.is_empty() { 0.0 } else { now_us + (window_s + granularity_s) * 1e6 };
      }
    }
    grants
  }

  /// Drops keys whose TTL has passed, once the number of interned keys has doubled since the
  /// last sweep (so sweeping is O(1) amortised). Returns true when ids were freed: every id
  /// handed out before is then invalid.
  pub fn sweep(&self, now_us: f64) -> bool {
    let mut inner = self.inner.lock();
    if inner.ids.len() < 2 * inner.swept_len.max(512) {
      return false;
    }
    let Inner { ids, slots, free, .. } = &mut *inner;
    let before = free.len();
    for (id, slot) in slots.iter_mut().enumerate() {
      let live = matches!(slot.state, Some((_, expires_us)) if expires_us > now_us);
      if !live && ids.remove(&slot.key).is_some() {
        slot.state = None;
        slot.key = String::new();
        free.push(id);
      }
    }
    let freed = free.len() > before;
    inner.swept_len = inner.ids.len();
    freed
  }

  /// Number of live pacer keys (for tests and introspection).
  pub fn len(&self, now_us: f64) -> usize {
    let inner = self.inner.lock();
    inner.slots.iter().filter(|s| matches!(s.state, Some((_, e)) if e > now_us)).count()
  }

  pub fn is_empty(&self, now_us: f64) -> bool {
    self.len(now_us) == 0
  }
}

#[cfg(test)]
mod tests {
  use super::*;
  use crate::core::pacer::Mode;

  const P: Params = Params { qps: 1.0, max_burst: 0.0, factor: 1.0, mode: Mode::RateLimit };

  #[test]
  fn expired_keys_start_fresh() {
    let store = MemoryStore::new();
    assert!(store.pacer_step("k", &P, 1.0, 0.0).admitted);
    assert!(!store.pacer_step("k", &P, 1.0, 1.0).admitted);
    assert_eq!(store.len(1.0), 1);
    let after_ttl = (1_000.0 + pacer::TTL_MARGIN_MS) * 1000.0 + 1.0;
    assert_eq!(store.len(after_ttl), 0);
    assert!(store.pacer_step("k", &P, 1.0, after_ttl).admitted);
  }

  #[test]
  fn interned_ids_share_state_with_string_keys() {
    let store = MemoryStore::new();
    let id = store.intern("k");
    assert!(store.pacer_step_id(id, &P, 1.0, 0.0).unwrap().admitted);
    assert!(!store.pacer_step("k", &P, 1.0, 1.0).admitted);
    assert!(store.pacer_step_id(id + 1, &P, 1.0, 0.0).is_err());
  }

  #[test]
  fn sweep_frees_only_expired_keys_and_is_amortised() {
    let store = MemoryStore::new();
    for i in 0..1500 {
      store.pacer_step(&format!("k{i}"), &P, 1.0, 0.0);
    }
    let keep = store.intern("k7");
    assert!(!store.pacer_step_id(keep, &P, 1.0, 10.0).unwrap().admitted);
    let later = (1_000.0 + pacer::TTL_MARGIN_MS) * 1000.0 + 1.0;
    // k7's state (saved at 0) expired too; refresh one key so it stays live
    store.pacer_step("live", &P, 1.0, later);
    assert!(store.sweep(later));
    assert_eq!(store.inner.lock().ids.len(), 1);
    assert!(!store.sweep(later), "the next sweep waits until the keys have doubled");
    let id = store.intern("live");
    assert!(!store.pacer_step_id(id, &P, 1.0, later + 1.0).unwrap().admitted);
  }
}
