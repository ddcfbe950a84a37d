//! The embedded store: keeps every kind's per-key state in process, under one lock, with the
//! same semantics as Redis (atomic decisions, a TTL on every key), no network, no tokio: calls
//! are synchronous. What a key holds is a [`Held`], one variant per registered kind; each
//! kind's file runs its core step on it (see `store::kinds`).
//!
//! Two tables:
//! - interned keys: a key string maps to a small integer id once, and the hot path (a kind's
//!   `memory_io` step, on an id) then indexes a vector instead of hashing a string. Ids live
//!   until [`MemoryStore::sweep`] drops the keys whose TTL has passed; whoever caches ids (the
//!   JS layer) must forget them whenever a sweep reports that it freed some;
//! - keyed state, by string, for kinds without an id path: expired keys are dropped once the
//!   map has doubled since the last sweep (O(1) amortised), and read as fresh before that.
//!
//! A key read by a kind whose state it does not hold (never the case in practice: every kind
//! names its keys under a segment of its own) reads as fresh.
//!
//! Every kind's memory step goes through one of two generic paths (governor's
//! `measure_and_replace` is the model: a function over the kind that hands a step the state
//! and takes back the result and what becomes of the state), so locking, loading, expiry and
//! saving are written once:
//! - [`MemoryStore::step_keyed`] (and [`Inner::step_key`], one call): calls in order on the
//!   keyed table, each call's state changed in place by its step, which answers the call's
//!   result and the state's new expiry;
//! - [`Inner::step_id`] (and [`MemoryStore::step_id`], the io-buffer path): one call on an
//!   interned key, whose step sees the live state and answers the result and a [`Write`].

use super::kinds::{Held, Registered};
use crate::error::{Error, Result};
use parking_lot::{Mutex, MutexGuard};
use std::collections::HashMap;
use std::time::{SystemTime, UNIX_EPOCH};

struct Slot {
  key: String,
  held: Held,
  /// When `held` expires, µs; 0 until first saved.
  expires_us: f64,
}

/// What a step on an interned key does to its state ([`Inner::step_id`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Write<S> {
  /// Nothing: the state and its expiry stay.
  Keep,
  /// The state, until the given time (µs).
  Until(S, f64),
  /// The key's state deleted.
  Clear,
}

/// The store's tables, locked: what a kind's memory step works on.
#[derive(Default)]
pub struct Inner {
  ids: HashMap<String, usize>,
  slots: Vec<Slot>,
  free: Vec<usize>,
  /// Interned keys after the last sweep; a sweep frees ids only once this has doubled.
  swept_len: usize,
  /// State of the kinds that are called by key, each with the time it expires (µs).
  keyed: HashMap<String, (Held, f64)>,
  /// `keyed`'s size after its last sweep.
  keyed_swept: usize,
}

impl Inner {
  /// The id of `key`, interning it.
  pub fn intern(&mut self, key: &str) -> usize {
    if let Some(id) = self.ids.get(key) {
      return *id;
    }
    let slot = Slot { key: key.to_owned(), held: Held::Empty, expires_us: 0.0 };
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

  /// An argument error unless `id` was handed out (and not freed by a sweep since).
  pub fn check(&self, id: usize) -> Result<()> {
    if id >= self.slots.len() {
      return Err(Error::argument(format!("unknown key id {id}")));
    }
    Ok(())
  }

  /// `K`'s state of the interned key `id` and when it expires (µs), if it has not expired.
  /// Reading never drops an expired state: only a save replaces it (a clock that steps back
  /// finds it again, as Redis, which expires keys on its own clock, does).
  pub fn load<K: Registered>(&mut self, id: usize, now_us: f64) -> Option<(&mut K::State, f64)> {
    let slot = &mut self.slots[id];
    let expires_us = slot.expires_us;
    K::state(&mut slot.held).filter(|_| expires_us > now_us).map(|state| (state, expires_us))
  }

  /// Saves `state` as what the interned key `id` holds, until `expires_us`.
  pub fn save<K: Registered>(&mut self, id: usize, state: K::State, expires_us: f64) {
    let slot = &mut self.slots[id];
    (slot.held, slot.expires_us) = (K::hold(state), expires_us);
  }

  /// Deletes what the interned key `id` holds.
  fn clear(&mut self, id: usize) {
    let slot = &mut self.slots[id];
    (slot.held, slot.expires_us) = (Held::Empty, 0.0);
  }

  /// One call of kind `K` on the interned key `id` (checked by the caller): `step` sees its
  /// live state (`None` when absent or expired) and when that expires (µs), and answers the
  /// call's result and what becomes of the state.
  pub fn step_id<K: Registered, T>(
    &mut self,
    id: usize,
    now_us: f64,
    step: impl FnOnce(Option<&K::State>, f64) -> (T, Write<K::State>),
  ) -> T {
    let live = self.load::<K>(id, now_us);
    let expires_us = live.as_ref().map_or(0.0, |(_, e)| *e);
    let (out, write) = step(live.map(|(s, _)| &*s), expires_us);
    match write {
      Write::Keep => {}
      Write::Until(state, until_us) => self.save::<K>(id, state, until_us),
      Write::Clear => self.clear(id),
    }
    out
  }

  /// `K`'s live state of `key` in the keyed table (fresh if absent or expired) and its
  /// expiry, µs.
  fn keyed<K: Registered>(&mut self, key: &str, now_us: f64) -> (&mut K::State, &mut f64)
  where
    K::State: Default,
  {
    if self.keyed.len() >= 2 * self.keyed_swept.max(512) {
      self.keyed.retain(|_, (_, expires_us)| *expires_us > now_us);
      self.keyed_swept = self.keyed.len();
    }
    let (held, expires_us) = self.keyed.entry(key.to_owned()).or_insert_with(|| (Held::Empty, 0.0));
    if *expires_us <= now_us || K::state(held).is_none() {
      (*held, *expires_us) = (K::hold(K::State::default()), 0.0);
    }
    match K::state(held) {
      Some(state) => (state, expires_us),
      None => unreachable!("the state was just made"),
    }
  }

  /// One call of kind `K` on `key` in the keyed table: `step` changes its live state (fresh
  /// when absent or expired) in place, given when that expires (µs; 0 when fresh), and answers
  /// the call's result and the state's new expiry (µs; at or before now, it reads as fresh
  /// from then on).
  pub fn step_key<K, T>(&mut self, key: &str, now_us: f64, step: impl FnOnce(&mut K::State, f64) -> (T, f64)) -> T
  where
    K: Registered,
    K::State: Default,
  {
    let (state, expires_us) = self.keyed::<K>(key, now_us);
    let (out, expires) = step(state, *expires_us);
    *expires_us = expires;
    out
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

impl MemoryStore {
  pub fn new() -> Self {
    Self::default()
  }

  /// The tables, locked: a kind's call runs under one acquisition.
  pub fn lock(&self) -> MutexGuard<'_, Inner> {
    self.inner.lock()
  }

  /// Calls of kind `K` on the keyed table, in order, under one lock acquisition: each goes
  /// through `step` on the key `key_of` names (see [`Inner::step_key`]). The results, in call
  /// order.
  pub fn step_keyed<K, C, T>(
    &self,
    calls: impl IntoIterator<Item = C>,
    now_us: f64,
    key_of: impl for<'c> Fn(&'c C) -> &'c str,
    mut step: impl FnMut(&C, &mut K::State, f64) -> (T, f64),
  ) -> Vec<T>
  where
    K: Registered,
    K::State: Default,
  {
    let mut inner = self.lock();
    let calls = calls.into_iter();
    let mut out = Vec::with_capacity(calls.size_hint().0);
    for call in calls {
      out.push(inner.step_key::<K, T>(key_of(&call), now_us, |state, expires_us| step(&call, state, expires_us)));
    }
    out
  }

  /// One call of kind `K` on the interned key `id` (see [`Inner::step_id`]); an argument error
  /// unless `id` was handed out and not freed since.
  pub fn step_id<K: Registered, T>(
    &self,
    id: usize,
    now_us: f64,
    step: impl FnOnce(Option<&K::State>, f64) -> (T, Write<K::State>),
  ) -> Result<T> {
    let mut inner = self.lock();
    inner.check(id)?;
    Ok(inner.step_id::<K, T>(id, now_us, step))
  }

  /// The id of a key, valid until a [`sweep`](Self::sweep) that returns true.
  pub fn intern(&self, key: &str) -> usize {
    self.inner.lock().intern(key)
  }

  /// Drops interned keys whose TTL has passed, once the number of interned keys has doubled
  /// since the last sweep (so sweeping is O(1) amortised). Returns true when ids were freed:
  /// every id handed out before is then invalid.
  pub fn sweep(&self, now_us: f64) -> bool {
    let mut inner = self.inner.lock();
    if inner.ids.len() < 2 * inner.swept_len.max(512) {
      return false;
    }
    let Inner { ids, slots, free, .. } = &mut *inner;
    let before = free.len();
    for (id, slot) in slots.iter_mut().enumerate() {
      if slot.expires_us <= now_us && ids.remove(&slot.key).is_some() {
        (slot.held, slot.expires_us) = (Held::Empty, 0.0);
        slot.key = String::new();
        free.push(id);
      }
    }
    let freed = free.len() > before;
    inner.swept_len = inner.ids.len();
    freed
  }

  /// Number of live interned keys (for tests and introspection).
  pub fn len(&self, now_us: f64) -> usize {
    let inner = self.inner.lock();
    inner.slots.iter().filter(|s| s.expires_us > now_us).count()
  }

  pub fn is_empty(&self, now_us: f64) -> bool {
    self.len(now_us) == 0
  }
}

#[cfg(test)]
mod tests {
  use super::*;
  use crate::core::pacer::{self, Mode, Params};

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
  fn a_key_costs_no_more_than_before_the_registry() {
    // every key holds a Held, as large as the largest kind's state: kinds box large states
    assert!(std::mem::size_of::<Held>() <= 32, "Held is {} bytes", std::mem::size_of::<Held>());
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
