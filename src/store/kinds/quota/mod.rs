//! The quota kind (`QuotaLimiter`, Sentry-style quotas): requests checked against several
//! quotas over shared counters (each a window of granules), granted atomically. Its memory
//! step and call encoding are here; its Redis side ([`redis`], `lua/quota.lua`) runs a call
//! whose counters share a hash slot as one script call, and one that spans slots in phases:
//!
//! 1. read what every counter used (the first slot alone when Redis' clock gives the
//!    timestamp, so every slot is read at that same second) and plan the grants exactly as
//!    one atomic call would;
//! 2. (`checkAndUse`) charge each slot's counters in order, each request at most its planned
//!    grant and at most what is left now;
//! 3. if a slot charged a request less than another slot (a concurrent call took units in
//!    between), give the difference back on the other slots.
//!
//! No counter is ever charged past its limit; under contention across slots a request can be
//! granted less than an atomic call would have granted it, never more. A counter of another
//! type (another writer uses our key prefix) fails only the calls that name it, and charges
//! none of them: such a call is answered with the timestamp [`WRONG_TYPE`](super::WRONG_TYPE)
//! and no grants.
//!
//! A store call, as JS sends it: `text` = every call's counter keys in turn (in the encoding
//! of `crate::codec`), `nums` = per call `[length, mode ([`CHECK`], [`CHECK_AND_USE`] or
//! [`USE`]), timestamp (whole seconds, or [`STORE_CLOCK`]), then its `length` numbers]`:
//! `[counter count, per counter window_s, granularity_s, request count, per request
//! requested, quota count, per quota counter index (0-based), limit]` (its first number says
//! how many keys it takes). Results, per call: its length, then `[timestamp, per request
//! granted, then per quota reached (0/1)]` (just the timestamp for use).

pub mod redis;

use super::{Kind, Reply};
use crate::core::quota::{self, Counter, QuotaRef, Request};
use crate::error::{Error, Result};
use crate::store::integer_in;
use crate::store::memory::MemoryStore;
use crate::store::redis::{Lane, RedisStore};
use crate::store::validate_key;

/// The quota kind (see the module docs).
pub struct Quota;

/// Largest quota limit or requested amount (exact sums stay far below 2^53).
pub const MAX_QUOTA: f64 = 1e12;
/// Longest quota window, seconds (10 years).
pub const MAX_WINDOW_S: f64 = crate::core::bounds::MAX_INTERVAL_S;
/// Largest timestamp, seconds.
pub const MAX_TIMESTAMP: f64 = 1e11;
/// TTL margin of counters when the timestamp is not Redis' own clock, ms.
pub const QUOTA_MARGIN_MS: f64 = 60_000.0;
pub const CHECK: f64 = 1.0;
pub const CHECK_AND_USE: f64 = 2.0;
pub const USE: f64 = 3.0;
/// The timestamp of a call decided at the store's clock.
pub const STORE_CLOCK: f64 = -1.0;

/// What a quota call does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QuotaMode {
  /// Grants, reading only (`checkWithinQuotas`).
  Check,
  /// Grants, charged atomically (`checkAndUseQuotas`).
  CheckAndUse,
  /// Charges each request's `requested` (the granted amount) unconditionally (`useQuotas`).
  Use,
}

impl QuotaMode {
  pub fn from_code(code: f64) -> Result<QuotaMode> {
    match code {
      CHECK => Ok(QuotaMode::Check),
      CHECK_AND_USE => Ok(QuotaMode::CheckAndUse),
      USE => Ok(QuotaMode::Use),
      _ => Err(Error::argument(format!("unknown quota mode {code}"))),
    }
  }
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct QuotaCall {
  /// The distinct counters' store keys.
  pub keys: Vec<String>,
  /// Per counter: window_s, granularity_s.
  pub shapes: Vec<(f64, f64)>,
  pub requests: Vec<Request>,
}

/// Several quota calls of one tick, each `(call, mode, timestamp)`, answered in order.
pub type QuotaCalls = Vec<(QuotaCall, QuotaMode, Option<f64>)>;

impl QuotaCall {
  /// One call: its counters' keys (in the encoding of `crate::codec`) and its numbers.
  pub fn decode(keys: &str, nums: &[f64]) -> Result<QuotaCall> {
    let keys = crate::codec::parts(keys).map(|k| k.map(str::to_owned)).collect::<Result<_>>()?;
    QuotaCall::decode_with(keys, nums)
  }

  /// One call from its counters' keys and its numbers.
  pub fn decode_with(keys: Vec<String>, nums: &[f64]) -> Result<QuotaCall> {
    let malformed = || Error::argument("malformed quota call");
    let mut it = nums.iter().copied();
    let mut next = || it.next().ok_or_else(malformed);
    let mut call = QuotaCall { keys, ..Default::default() };
    let counters = next()?;
    if counters != call.keys.len() as f64 {
      return Err(malformed());
    }
    for key in &call.keys {
      validate_key(key)?;
      let (window_s, granularity_s) = (next()?, next()?);
      if !integer_in(window_s, 1.0, MAX_WINDOW_S)
        || !integer_in(granularity_s, 1.0, window_s)
        || window_s % granularity_s != 0.0
      {
        return Err(Error::config(format!(
          "a quota's windowSeconds and granularitySeconds must be positive integers, the granularity dividing \
           the window, got {window_s} and {granularity_s}"
        )));
      }
      call.shapes.push((window_s, granularity_s));
    }
    let requests = next()?;
    if !integer_in(requests, 1.0, 1e6) {
      return Err(malformed());
    }
    for _ in 0..requests as usize {
      let (requested, count) = (next()?, next()?);
      if !integer_in(requested, 0.0, MAX_QUOTA) {
        return Err(Error::argument(format!("requested must be an integer in [0, {MAX_QUOTA}], got {requested}")));
      }
      if !integer_in(count, 1.0, 1e6) {
        return Err(malformed());
      }
      let mut quotas = vec![];
      for _ in 0..count as usize {
        let (counter, limit) = (next()?, next()?);
        if !integer_in(counter, 0.0, call.keys.len() as f64 - 1.0) {
          return Err(malformed());
        }
        if !integer_in(limit, 0.0, MAX_QUOTA) {
          return Err(Error::config(format!("a quota's limit must be an integer in [0, {MAX_QUOTA}], got {limit}")));
        }
        let (window_s, granularity_s) = call.shapes[counter as usize];
        quotas.push(QuotaRef { counter: counter as usize, limit, window_s, granularity_s });
      }
      call.requests.push(Request { requested, quotas });
    }
    if next().is_ok() {
      return Err(malformed());
    }
    Ok(call)
  }

  /// The counters' `(window_s, granularity_s)` as [`quota::used_at`] wants them.
  pub fn shapes(&self) -> &[(f64, f64)] {
    &self.shapes
  }
}

/// A timestamp from JS: whole seconds (the JS layer truncates), or `None` for the store's
/// clock.
pub fn quota_timestamp(t: f64) -> Result<Option<f64>> {
  if t == STORE_CLOCK {
    return Ok(None);
  }
  if integer_in(t, 0.0, MAX_TIMESTAMP) {
    Ok(Some(t))
  } else {
    Err(Error::argument(format!("timestamp must be seconds in [0, {MAX_TIMESTAMP}], got {t}")))
  }
}

/// Flattens grants: `[timestamp, per request granted, then per quota reached (0/1)]`.
pub fn encode_grants(timestamp: f64, grants: &[quota::Grant]) -> Vec<f64> {
  let mut out = vec![timestamp];
  for g in grants {
    out.push(g.granted);
    out.extend(g.reached.iter().map(|r| if *r { 1.0 } else { 0.0 }));
  }
  out
}

/// What `useQuotas` adds to each counter: each request's amount once per distinct counter.
fn use_amounts(call: &QuotaCall) -> Vec<f64> {
  let mut amounts = vec![0.0; call.keys.len()];
  for r in &call.requests {
    for c in quota::distinct_counters(r) {
      amounts[c] += r.requested;
    }
  }
  amounts
}

/// Appends one call's result, its length first.
fn push_result(out: &mut Vec<f64>, timestamp: f64, grants: &[quota::Grant]) {
  let encoded = encode_grants(timestamp, grants);
  out.push(encoded.len() as f64);
  out.extend(encoded);
}

impl Kind for Quota {
  type Call = QuotaCalls;
  type State = Counter;
  const OPS: &'static [(&'static str, f64)] =
    &[("check", CHECK), ("checkAndUse", CHECK_AND_USE), ("use", USE), ("storeClock", STORE_CLOCK)];
  const RESULTS: &'static [(&'static str, &'static [&'static str])] =
    &[("call", &["length"]), ("grants", &["timestamp"]), ("request", &["granted"]), ("quota", &["reached"])];

  fn decode(text: &str, nums: &[f64]) -> Result<QuotaCalls> {
    let malformed = || Error::argument("malformed quota batch");
    let mut parts = crate::codec::parts(text);
    let mut calls = vec![];
    let mut at = 0;
    while at < nums.len() {
      let [len, mode, timestamp, ..] = nums[at..] else { return Err(malformed()) };
      at += 3;
      if !integer_in(len, 1.0, (nums.len() - at) as f64) {
        return Err(malformed());
      }
      let body = &nums[at..at + len as usize];
      at += len as usize;
      let counters = body[0];
      if !integer_in(counters, 0.0, body.len() as f64) {
        return Err(malformed());
      }
      let keys = (0..counters as usize)
        .map(|_| parts.next().ok_or_else(malformed)?.map(str::to_owned))
        .collect::<Result<Vec<String>>>()?;
      calls.push((QuotaCall::decode_with(keys, body)?, QuotaMode::from_code(mode)?, quota_timestamp(timestamp)?));
    }
    if parts.next().is_some() {
      return Err(malformed());
    }
    Ok(calls)
  }

  fn memory(store: &MemoryStore, calls: &QuotaCalls, now_us: f64) -> Result<Reply> {
    let mut out = vec![];
    for (call, mode, timestamp) in calls {
      let t = timestamp.unwrap_or((now_us / 1e6).floor());
      push_result(&mut out, t, &store.quota(call, *mode, t, now_us));
    }
    Ok(Reply::numbers(out))
  }

  async fn redis(store: &RedisStore, calls: &QuotaCalls, _now_us: Option<f64>, lane: &Lane) -> Result<Reply> {
    Ok(store.quota_batch(calls, lane).await?.reply(|decided| {
      let mut out = vec![];
      for (t, grants) in decided {
        push_result(&mut out, t, &grants);
      }
      out
    }))
  }
}

impl MemoryStore {
  /// One quota call at `timestamp` (seconds), atomically; counters expire on the store's
  /// clock `now_us`, (window + granularity) after their last charge. Grants are empty for
  /// [`QuotaMode::Use`]. A call spans several keys (its counters) and plans its grants over
  /// all of them, so it reads each counter, then charges each, through the one-key step
  /// (`Inner::step_key`) under one lock, rather than one step per call.
  pub fn quota(&self, call: &QuotaCall, mode: QuotaMode, timestamp: f64, now_us: f64) -> Vec<quota::Grant> {
    let mut inner = self.lock();
    let (grants, amounts) = match mode {
      QuotaMode::Use => (vec![], use_amounts(call)),
      QuotaMode::Check | QuotaMode::CheckAndUse => {
        let used: Vec<f64> = call
          .keys
          .iter()
          .zip(call.shapes())
          .map(|(key, (window_s, granularity_s))| {
            inner.step_key::<Quota, _>(key, now_us, |counter, expires_us| {
              let g = quota::granule(timestamp, *granularity_s);
              (counter.used(g, quota::granules(*window_s, *granularity_s)), expires_us)
            })
          })
          .collect();
        let (grants, charged) = quota::plan(&call.requests, &used);
        (grants, if mode == QuotaMode::Check { vec![] } else { charged })
      }
    };
    for ((key, (window_s, granularity_s)), amount) in call.keys.iter().zip(call.shapes()).zip(amounts) {
      if amount != 0.0 {
        inner.step_key::<Quota, _>(key, now_us, |counter, _| {
          counter.add(quota::granule(timestamp, *granularity_s), amount, quota::granules(*window_s, *granularity_s));
          ((), if counter.is_empty() { 0.0 } else { now_us + (window_s + granularity_s) * 1e6 })
        });
      }
    }
    grants
  }
}

#[cfg(test)]
mod tests {
  use super::*;
  use crate::error::ErrorKind;

  #[test]
  fn decodes_quota_calls_and_rejects_bad_quotas_as_config_errors() {
    let nums = [2.0, 60.0, 10.0, 3600.0, 60.0, 2.0, 5.0, 2.0, 0.0, 10.0, 1.0, 100.0, 0.0, 1.0, 1.0, 3.0];
    let call = QuotaCall::decode("1:a1:b", &nums).unwrap();
    assert_eq!(call.requests.len(), 2);
    assert_eq!(
      call.requests[0].quotas[1],
      QuotaRef { counter: 1, limit: 100.0, window_s: 3600.0, granularity_s: 60.0 }
    );
    let config = |nums: &[f64]| QuotaCall::decode("1:a", nums).unwrap_err().kind;
    assert_eq!(config(&[1.0, 10.0, 3.0, 1.0, 1.0, 1.0, 0.0, 5.0]), ErrorKind::InvalidConfig);
    assert_eq!(config(&[1.0, 10.0, 0.0, 1.0, 1.0, 1.0, 0.0, 5.0]), ErrorKind::InvalidConfig);
    assert_eq!(config(&[1.0, 10.0, 5.0, 1.0, 1.0, 1.0, 0.0, -1.0]), ErrorKind::InvalidConfig);
    assert_eq!(config(&[1.0, 10.0, 5.0, 1.0, 1.0, 1.0, 0.0, 0.5]), ErrorKind::InvalidConfig);
    // limit 0 is Sentry's empty quota: valid, it grants nothing
    assert!(QuotaCall::decode("1:a", &[1.0, 10.0, 5.0, 1.0, 1.0, 1.0, 0.0, 0.0]).is_ok());
    assert_eq!(config(&[1.0, 10.0, 5.0, 1.0, -1.0, 1.0, 0.0, 5.0]), ErrorKind::InvalidArgument);
    assert_eq!(config(&[1.0, 10.0, 5.0, 1.0, 1.0, 1.0, 1.0, 5.0]), ErrorKind::InvalidArgument);
    assert_eq!(config(&[1.0, 10.0, 5.0, 1.0, 1.0, 1.0, 0.0, 5.0, 9.0]), ErrorKind::InvalidArgument);
    // no counters: refused, not an index underflow
    assert_eq!(QuotaCall::decode("", &[0.0, 1.0, 1.0, 1.0, 0.0, 5.0]).unwrap_err().kind, ErrorKind::InvalidArgument);
    assert_eq!(quota_timestamp(-1.0), Ok(None));
    assert!(quota_timestamp(1.5).is_err());
  }

  #[test]
  fn a_store_call_holds_several_calls_each_with_its_keys() {
    let one = [1.0, 10.0, 5.0, 1.0, 2.0, 1.0, 0.0, 5.0];
    let mut nums = vec![one.len() as f64, CHECK_AND_USE, 100.0];
    nums.extend(one);
    nums.extend([one.len() as f64, CHECK, STORE_CLOCK]);
    nums.extend(one);
    let calls = Quota::decode("1:a1:b", &nums).unwrap();
    assert_eq!(calls.len(), 2);
    assert_eq!(
      (calls[0].0.keys.as_slice(), calls[0].1, calls[0].2),
      (&["a".to_owned()][..], QuotaMode::CheckAndUse, Some(100.0))
    );
    assert_eq!((calls[1].0.keys.as_slice(), calls[1].2), (&["b".to_owned()][..], None));
    let reply = Quota::memory(&MemoryStore::new(), &calls, 7e6).unwrap();
    assert_eq!(reply.numbers, [3.0, 100.0, 2.0, 0.0, 3.0, 7.0, 2.0, 0.0]);
    for (text, nums) in [("1:a", &nums[..]), ("1:a1:b1:c", &nums[..]), ("1:a", &nums[..5])] {
      assert!(Quota::decode(text, nums).is_err(), "{text}");
    }
  }
}
