//! The fair-tenant kind (`FairTenant`): each assignment registers a job with its tenant and
//! answers the tenant's count in each rule's window. Script `lua/fair.lua`; per tenant key a
//! sorted set (exact mode) or a hash of granule counters (approximate mode).
//!
//! A call, as JS sends it: `text` = per assignment its tenant key then its job id (in the
//! encoding of `crate::codec`), `nums` = per assignment `[mode ([`EXACT`] or
//! [`APPROXIMATE`]), rule count, then per_ms, granularity_ms per rule (granularity 0 in exact
//! mode)]`. Results per assignment: the tenant's count in each rule's window, this job
//! included; the first is [`WRONG_TYPE`](super::WRONG_TYPE), then zeros, when the key holds a
//! value of another type (Redis: nothing applied).

use super::{Kind, Reply};
use crate::core::fair::{Granules, Log};
use crate::error::{Error, Result};
use crate::store::memory::MemoryStore;
use crate::store::redis::calls::{int, malformed, now_arg, Slotted};
use crate::store::redis::script::{lua_script, Script};
use crate::store::redis::{Lane, RedisStore};
use crate::store::{integer_in, validate_key};
use fred::prelude::*;
use std::collections::BTreeMap;
use std::sync::LazyLock;

static FAIR: LazyLock<Script> = LazyLock::new(|| Script::new(lua_script!("fair")));

/// The fair-tenant kind (see the module docs).
pub struct Fair;

/// Most rules per fair tenant.
pub const MAX_RULES: usize = 64;
/// Longest job id, bytes.
pub const MAX_ID_LEN: usize = 1024;
/// Longest window, ms (10 years).
pub const MAX_WINDOW_MS: f64 = crate::core::bounds::MAX_INTERVAL_MS;
/// Most granules a rule's window may span (per / granularity).
pub const MAX_GRANULES: f64 = 100_000.0;
pub const EXACT: f64 = 0.0;
pub const APPROXIMATE: f64 = 1.0;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FairMode {
  Exact,
  /// Counters per granule of each rule's granularity.
  Approximate,
}

#[derive(Clone, Debug, PartialEq)]
pub struct FairCall {
  pub key: String,
  pub id: String,
  pub mode: FairMode,
  /// How long registrations are kept, ms: the longest rule window.
  pub horizon_ms: u64,
  /// `(per_ms, granularity_ms)` per rule; granularity 0 in exact mode.
  pub rules: Vec<(u64, u64)>,
}

impl FairCall {
  pub fn pers_ms(&self) -> Vec<u64> {
    self.rules.iter().map(|(per, _)| *per).collect()
  }
}

/// A tenant record in the memory store: its exact log and its granule counters (one of them
/// is ever used: each mode names its keys under its own segment).
#[derive(Default)]
pub struct FairState {
  log: Log,
  granules: Granules,
}

type Part<'a> = Option<Result<&'a str>>;

/// Decodes a batch of assignments from two lists in the encoding of `crate::codec`: `keys`
/// (a tenant key per assignment) and `ids` (its job id), and their numbers.
pub fn decode_fair(keys: &str, ids: &str, nums: &[f64]) -> Result<Vec<FairCall>> {
  let (mut keys, mut ids) = (crate::codec::parts(keys), crate::codec::parts(ids));
  decode_calls(|| (keys.next(), ids.next()), nums)
}

/// Decodes assignments whose key and id `next` gives in turn; after the last, `next` must
/// give nothing.
fn decode_calls<'a>(mut next: impl FnMut() -> (Part<'a>, Part<'a>), nums: &[f64]) -> Result<Vec<FairCall>> {
  let malformed = || Error::argument("malformed fair batch");
  let mut calls = vec![];
  let mut at = 0;
  while at < nums.len() {
    let ((Some(key), Some(id)), [mode, count, ..]) = (next(), &nums[at..]) else {
      return Err(malformed());
    };
    let (key, id) = (key?, id?);
    validate_key(key)?;
    if id.is_empty() || id.len() > MAX_ID_LEN {
      return Err(Error::argument(format!("job id must be 1..={MAX_ID_LEN} bytes")));
    }
    let mode = match *mode {
      EXACT => FairMode::Exact,
      APPROXIMATE => FairMode::Approximate,
      _ => return Err(malformed()),
    };
    if !integer_in(*count, 1.0, MAX_RULES as f64) || nums.len() < at + 2 + 2 * *count as usize {
      return Err(malformed());
    }
    let mut rules = vec![];
    for pair in nums[at + 2..at + 2 + 2 * *count as usize].chunks(2) {
      let (per, granularity) = (pair[0], pair[1]);
      if !integer_in(per, 1.0, MAX_WINDOW_MS) {
        return Err(Error::argument(format!("a rule's window must be whole ms in [1, 10 years], got {per}")));
      }
      let granularity_ok = match mode {
        FairMode::Exact => granularity == 0.0,
        FairMode::Approximate => integer_in(granularity, 1.0, per) && per / granularity <= MAX_GRANULES,
      };
      if !granularity_ok {
        return Err(Error::argument(format!(
          "granularity must be whole ms in [1, window], at most {MAX_GRANULES} granules per window (0 in exact mode), got {granularity}"
        )));
      }
      rules.push((per as u64, granularity as u64));
    }
    let horizon_ms = rules.iter().map(|(per, _)| *per).max().unwrap_or(1);
    calls.push(FairCall { key: key.to_owned(), id: id.to_owned(), mode, horizon_ms, rules });
    at += 2 + 2 * *count as usize;
  }
  if !matches!(next(), (None, None)) || calls.is_empty() {
    return Err(malformed());
  }
  Ok(calls)
}

impl Kind for Fair {
  type Call = Vec<FairCall>;
  type State = Box<FairState>;
  const OPS: &'static [(&'static str, f64)] = &[("exact", EXACT), ("approximate", APPROXIMATE)];
  const RESULTS: &'static [(&'static str, &'static [&'static str])] = &[("rule", &["count"])];

  /// `text` holds each assignment's key then its id.
  fn decode(text: &str, nums: &[f64]) -> Result<Vec<FairCall>> {
    let mut parts = crate::codec::parts(text);
    decode_calls(|| (parts.next(), parts.next()), nums)
  }

  fn memory(store: &MemoryStore, calls: &Vec<FairCall>, now_us: f64) -> Result<Reply> {
    Ok(Reply::numbers(store.fair_batch(calls, now_us).concat()))
  }

  async fn redis(store: &RedisStore, calls: &Vec<FairCall>, now_us: Option<f64>, lane: &Lane) -> Result<Reply> {
    Ok(store.fair_batch(calls, now_us, lane).await?.reply(|v| v.concat()))
  }
}

impl MemoryStore {
  /// Fair-tenant assignments, in order, under one lock acquisition: per call, the tenant's
  /// count in each rule's window. A record expires its horizon after its last registration.
  pub fn fair_batch(&self, calls: &[FairCall], now_us: f64) -> Vec<Vec<f64>> {
    let now_ms = (now_us / 1000.0).floor().max(0.0) as u64;
    self.step_keyed::<Fair, _, _>(calls, now_us, |call| &call.key, |call, record, _| {
      let counts = match call.mode {
        FairMode::Exact => record.log.register(&call.id, now_ms, call.horizon_ms, &call.pers_ms()),
        FairMode::Approximate => record.granules.register(now_ms, &call.rules),
      };
      (counts, now_us + call.horizon_ms as f64 * 1000.0)
    })
  }
}

impl RedisStore {
  /// Per call, the tenant's count in each rule's window, this job included; a call whose key
  /// holds a value of another type (nothing applied) has [`WRONG_TYPE`](super::WRONG_TYPE)
  /// as its first count, then zeros. One script call per slot (up to 64 calls).
  pub async fn fair_batch(&self, calls: &[FairCall], now_us: Option<f64>, lane: &Lane) -> Result<Slotted<Vec<f64>>> {
    let groups = self.groups(calls.iter().map(|c| c.key.as_str()));
    self.per_slot(&groups, "fair", |group| self.fair_call(calls, group, now_us, lane)).await
  }

  async fn fair_call(
    &self,
    calls: &[FairCall],
    group: &[usize],
    now_us: Option<f64>,
    lane: &Lane,
  ) -> Result<Vec<Vec<f64>>> {
    let mut keys: Vec<Key> = vec![];
    let mut local: BTreeMap<&str, usize> = BTreeMap::new();
    let mut args: Vec<Value> = vec![now_arg(now_us)];
    for i in group {
      let call = &calls[*i];
      let k = *local.entry(call.key.as_str()).or_insert_with(|| {
        keys.push(Key::from(call.key.as_str()));
        keys.len()
      });
      let mode = match call.mode {
        FairMode::Exact => EXACT,
        FairMode::Approximate => APPROXIMATE,
      };
      args.extend([Value::Integer(k as i64), Value::Integer(mode as i64), Value::Integer(call.horizon_ms as i64)]);
      args.extend([Value::String(call.id.as_str().into()), Value::Integer(call.rules.len() as i64)]);
      for (per, granularity) in &call.rules {
        args.extend([Value::Integer(*per as i64), Value::Integer(*granularity as i64)]);
      }
    }
    let reply = self.run(lane, &FAIR, keys, args).await?;
    let mut fields = reply.iter();
    let out = group
      .iter()
      .map(|i| calls[*i].rules.iter().map(|_| int(fields.next(), "fair")).collect::<Result<Vec<f64>>>())
      .collect::<Result<Vec<_>>>()?;
    if fields.next().is_some() {
      return Err(malformed("fair"));
    }
    Ok(out)
  }
}

#[cfg(test)]
mod tests {
  use super::*;
  use crate::error::ErrorKind;

  #[test]
  fn decodes_calls() {
    let calls = decode_fair("1:a1:b", "2:j12:j2", &[0.0, 2.0, 500.0, 0.0, 1000.0, 0.0, 1.0, 1.0, 60.0, 6.0]).unwrap();
    assert_eq!(calls.len(), 2);
    assert_eq!(calls[0].pers_ms(), vec![500, 1000]);
    assert_eq!(calls[0].horizon_ms, 1000);
    assert_eq!(calls[1].mode, FairMode::Approximate);
    assert_eq!(calls[1].rules, vec![(60, 6)]);
    assert_eq!(calls[1].id, "j2");
    let interleaved =
      Fair::decode("1:a2:j11:b2:j2", &[0.0, 2.0, 500.0, 0.0, 1000.0, 0.0, 1.0, 1.0, 60.0, 6.0]).unwrap();
    assert_eq!(interleaved, calls);
  }

  #[test]
  fn rejects_bad_calls() {
    for (keys, ids, nums) in [
      ("1:a", "1:j", vec![0.0, 1.0, 0.0, 0.0]),
      ("1:a", "1:j", vec![0.0, 1.0, 10.5, 0.0]),
      ("1:a", "1:j", vec![0.0, 1.0, 4e11, 0.0]),
      ("1:a", "1:j", vec![0.0, 1.0, 10.0, 1.0]),
      ("1:a", "1:j", vec![2.0, 1.0, 10.0, 0.0]),
      ("1:a", "1:j", vec![1.0, 1.0, 10.0, 0.0]),
      ("1:a", "1:j", vec![1.0, 1.0, 10.0, 20.0]),
      ("1:a", "1:j", vec![1.0, 1.0, 1e9, 1.0]),
      ("1:a", "1:j", vec![0.0, 2.0, 10.0, 0.0]),
      ("1:a", "1:j", vec![0.0, 0.0]),
      ("1:a", "0:", vec![0.0, 1.0, 10.0, 0.0]),
      ("", "1:j", vec![0.0, 1.0, 10.0, 0.0]),
      ("1:a1:b", "1:j", vec![0.0, 1.0, 10.0, 0.0]),
      ("1:a", "1:j", vec![]),
      ("a", "1:j", vec![0.0, 1.0, 10.0, 0.0]),
    ] {
      let e = decode_fair(keys, ids, &nums).unwrap_err();
      assert_eq!(e.kind, ErrorKind::InvalidArgument, "{keys:?} {ids:?} {nums:?}");
    }
    assert!(Fair::decode("1:a2:j11:b", &[0.0, 1.0, 10.0, 0.0]).is_err(), "a key without its id");
  }
}
