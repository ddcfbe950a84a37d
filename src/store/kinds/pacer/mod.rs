//! The pacer kind (`DistributedPacer`, `PacerComposite`, and their `block`): how its calls
//! are decoded and validated, its memory-store step, its result layout and operation codes.
//! Its Redis side (scripts `lua/pacer.lua`, `lua/pacer_undo.lua`, `lua/pacer_block.lua`) is
//! in [`redis`].
//!
//! A call, as JS sends it: `text` = one key per member (in the encoding of `crate::codec`),
//! `nums` = per entry `[members, mode]` followed by [`MEMBER_FIELDS`] numbers per member:
//! `weight, qps, max_burst, factor`. Mode [`PACE`] or [`RATE_LIMIT`]: an entry is one pacer
//! call, or the members of one `PacerComposite` call, which in rate-limit mode are charged
//! all together or not at all. Mode [`BLOCK`]: nobody is admitted for `weight` µs (one
//! member, and the call's only entry). Mode [`GIVE`]: `weight` a call took is given back,
//! its slot `start_in_us` from now (`[1, GIVE, weight, qps, max_burst, factor, start_in_us]`;
//! see `pacer::give`). Results: [`RESULT_FIELDS`] numbers per member:
//! `delay_us, watermark_before, admitted (0/1)`; a block's are `µs until it ends, 0, 0`; a
//! give-back's `1 (given back) or 0 (it stays spent), 0, 0`. A
//! member whose key holds a value of another type has `delay_us` =
//! [`WRONG_TYPE`](super::WRONG_TYPE) (Redis only), and so has every member of its entry.
//!
//! The io-buffer step (`memory_io`): in, `[weight, qps, maxBurst, factor, pace (1/0), nowUs
//! (-1 = the system clock)]`; out, `[delayUs, watermarkBefore, admitted (1/0)]`.

pub mod redis;

use super::{memory_now, Kind, Reply};
use crate::core::pacer::{self, Decision, Mode, Params, State};
use crate::error::{Error, Result};
use crate::store::memory::{Inner, MemoryStore, Write};
use crate::store::redis::{Lane, RedisStore};
use crate::store::{integer_in, validate_key, MAX_INTERVAL_US};
use std::collections::HashMap;
use std::ops::Range;

/// The pacer kind (see the module docs).
pub struct Pacer;

/// Numbers per member in the call encoding: weight, qps, max_burst, factor.
pub const MEMBER_FIELDS: usize = 4;
/// Numbers per member in the result encoding: delay_us, watermark_before, admitted (0/1).
pub const RESULT_FIELDS: usize = 3;
/// Entry mode of a call that reserves a slot and sleeps until it.
pub const PACE: f64 = 1.0;
/// Entry mode of a call admitted now or refused.
pub const RATE_LIMIT: f64 = 0.0;
/// Entry mode of a block (its member's weight is the duration, µs).
pub const BLOCK: f64 = 2.0;
/// Entry mode of a give-back: `weight` a call took and will not use (see `pacer::give`).
pub const GIVE: f64 = 3.0;
/// Largest accepted weight or burst: far beyond any real use, small enough that µs
/// arithmetic on it stays exact in a double.
pub const MAX_WEIGHT: f64 = crate::core::bounds::MAX_LIMIT;
/// Largest accepted qps.
pub const MAX_QPS: f64 = crate::core::bounds::MAX_LIMIT;

/// One pacer call as part of a batch.
#[derive(Clone, Debug, PartialEq)]
pub struct Member {
  /// Index into [`PacerBatch::keys`].
  pub key: usize,
  pub params: Params,
  pub weight: f64,
}

/// A decision unit: one pacer call, or the members of one `PacerComposite` call.
#[derive(Clone, Debug, PartialEq)]
pub struct Entry {
  pub members: Range<usize>,
  pub mode: Mode,
}

/// Several entries decided in order, in one store call.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PacerBatch {
  /// Distinct full store keys.
  pub keys: Vec<String>,
  pub members: Vec<Member>,
  pub entries: Vec<Entry>,
}

/// A decoded pacer call: entries, or a block.
#[derive(Clone, Debug, PartialEq)]
pub enum PacerCall {
  Batch(PacerBatch),
  /// Nobody admitted on `key` for `duration_us` (see `pacer::block`).
  Block {
    key: String,
    params: Params,
    duration_us: f64,
  },
  /// `weight` given back on `key`, its slot `start_in_us` from now (see `pacer::give`).
  Give {
    key: String,
    params: Params,
    weight: f64,
    start_in_us: f64,
  },
}

impl PacerBatch {
  /// Decodes the entries of a call (every mode but [`BLOCK`]); see the module docs. Every
  /// number is validated here, so nothing invalid reaches a store.
  pub fn decode(keys: &str, args: &[f64]) -> Result<PacerBatch> {
    let mut batch = PacerBatch::default();
    let mut index: HashMap<&str, usize> = HashMap::new();
    let mut key_iter = crate::codec::parts(keys);
    let mut i = 0;
    while i < args.len() {
      let count = args[i];
      let mode = match args.get(i + 1) {
        Some(m) if *m == PACE => Mode::Pace,
        Some(m) if *m == RATE_LIMIT => Mode::RateLimit,
        _ => return Err(Error::argument("malformed batch: bad mode")),
      };
      if !((1.0..=1024.0).contains(&count) && count.fract() == 0.0) {
        return Err(Error::argument("malformed batch: bad member count"));
      }
      let count = count as usize;
      i += 2;
      if args.len() < i + count * MEMBER_FIELDS {
        return Err(Error::argument("malformed batch: truncated"));
      }
      let start = batch.members.len();
      for _ in 0..count {
        let key = key_iter.next().ok_or_else(|| Error::argument("malformed batch: missing key"))??;
        validate_key(key)?;
        let next = index.len();
        let slot = *index.entry(key).or_insert(next);
        if slot == batch.keys.len() {
          batch.keys.push(key.to_owned());
        }
        let f = &args[i..i + MEMBER_FIELDS];
        let params = validate_params(f[1], f[2], f[3], mode)?;
        batch.members.push(Member { key: slot, params, weight: validate_weight(f[0])? });
        i += MEMBER_FIELDS;
      }
      batch.entries.push(Entry { members: start..batch.members.len(), mode });
    }
    if key_iter.next().is_some() {
      return Err(Error::argument("malformed batch: more keys than members"));
    }
    Ok(batch)
  }
}

/// A block's key and `[1, BLOCK, duration_us, qps, max_burst, factor]`, validated (a block
/// is a call of its own).
fn decode_block(text: &str, nums: &[f64]) -> Result<PacerCall> {
  let keys = crate::codec::decode(text)?;
  let ([key], &[1.0, _, duration_us, qps, max_burst, factor]) = (keys.as_slice(), nums) else {
    return Err(Error::argument("malformed pacer block"));
  };
  validate_key(key)?;
  let params = validate_params(qps, max_burst, factor, Mode::RateLimit)?;
  if !integer_in(duration_us, 1.0, MAX_INTERVAL_US) {
    return Err(Error::argument(format!("a block must last whole µs in [1, 10 years], got {duration_us}")));
  }
  Ok(PacerCall::Block { key: (*key).to_owned(), params, duration_us })
}

/// A give-back's key and `[1, GIVE, weight, qps, max_burst, factor, start_in_us]`, validated
/// (a call of its own, as a block).
fn decode_give(text: &str, nums: &[f64]) -> Result<PacerCall> {
  let keys = crate::codec::decode(text)?;
  let ([key], &[1.0, _, weight, qps, max_burst, factor, start_in_us]) = (keys.as_slice(), nums) else {
    return Err(Error::argument("malformed pacer give-back"));
  };
  validate_key(key)?;
  let params = validate_params(qps, max_burst, factor, Mode::Pace)?;
  if !integer_in(start_in_us, 0.0, MAX_INTERVAL_US) {
    return Err(Error::argument("malformed pacer give-back: start_in_us"));
  }
  Ok(PacerCall::Give { key: (*key).to_owned(), params, weight: validate_weight(weight)?, start_in_us })
}

pub fn validate_weight(weight: f64) -> Result<f64> {
  if weight.is_finite() && (0.0..=MAX_WEIGHT).contains(&weight) {
    Ok(weight)
  } else {
    Err(Error::argument(format!("weight must be a finite number in [0, {MAX_WEIGHT}], got {weight}")))
  }
}

pub fn validate_params(qps: f64, max_burst: f64, factor: f64, mode: Mode) -> Result<Params> {
  if !(qps.is_finite() && qps > 0.0 && qps <= MAX_QPS) {
    return Err(Error::argument(format!("qps must be in (0, {MAX_QPS}], got {qps}")));
  }
  if !(max_burst.is_finite() && (0.0..=MAX_WEIGHT).contains(&max_burst)) {
    return Err(Error::argument(format!("maxBurst must be in [0, {MAX_WEIGHT}], got {max_burst}")));
  }
  if !(factor.is_finite() && factor > 0.0 && factor <= 1.0) {
    return Err(Error::argument(format!("burstAllowanceFactor must be in (0, 1], got {factor}")));
  }
  Ok(Params { qps, max_burst, factor, mode })
}

/// Flattens decisions for the JS layer: [`RESULT_FIELDS`] numbers per member.
pub fn encode_decisions(decisions: &[Decision]) -> Vec<f64> {
  let mut out = Vec::with_capacity(decisions.len() * RESULT_FIELDS);
  for d in decisions {
    out.push(d.delay_us);
    out.push(d.watermark_before);
    out.push(if d.admitted { 1.0 } else { 0.0 });
  }
  out
}

impl Kind for Pacer {
  type Call = PacerCall;
  type State = State;
  const OPS: &'static [(&'static str, f64)] = &[("pace", PACE), ("rateLimit", RATE_LIMIT), ("block", BLOCK), ("give", GIVE)];
  const RESULTS: &'static [(&'static str, &'static [&'static str])] =
    &[("member", &["delay_us", "watermark_before", "admitted"])];

  fn decode(text: &str, nums: &[f64]) -> Result<PacerCall> {
    if nums.get(1) == Some(&BLOCK) {
      return decode_block(text, nums);
    }
    if nums.get(1) == Some(&GIVE) {
      return decode_give(text, nums);
    }
    PacerBatch::decode(text, nums).map(PacerCall::Batch)
  }

  fn memory(store: &MemoryStore, call: &PacerCall, now_us: f64) -> Result<Reply> {
    Ok(Reply::numbers(match call {
      PacerCall::Batch(batch) => encode_decisions(&store.pacer_batch(batch, now_us)),
      PacerCall::Block { key, params, duration_us } => {
        vec![store.pacer_block(key, params, *duration_us, now_us), 0.0, 0.0]
      }
      PacerCall::Give { key, params, weight, start_in_us } => {
        vec![store.pacer_give(key, params, *weight, *start_in_us, now_us), 0.0, 0.0]
      }
    }))
  }

  async fn redis(store: &RedisStore, call: &PacerCall, now_us: Option<f64>, lane: &Lane) -> Result<Reply> {
    Ok(match call {
      PacerCall::Batch(batch) => store.pacer_batch(batch, now_us, lane).await?.reply(|v| encode_decisions(&v.concat())),
      PacerCall::Block { key, params, duration_us } => {
        Reply::numbers(vec![store.pacer_block(key, params, *duration_us, now_us, lane).await?, 0.0, 0.0])
      }
      PacerCall::Give { key, params, weight, start_in_us } => {
        Reply::numbers(vec![store.pacer_give(key, params, *weight, *start_in_us, now_us, lane).await?, 0.0, 0.0])
      }
    })
  }

  fn memory_io(store: &MemoryStore, id: usize, io: &mut [f64]) -> Result<()> {
    let (weight, pace) = (io[0], io[4]);
    let mode = if pace == 1.0 { Mode::Pace } else { Mode::RateLimit };
    validate_weight(weight)?;
    let params = validate_params(io[1], io[2], io[3], mode)?;
    let d = store.pacer_step_id(id, &params, weight, memory_now(io[5])?)?;
    io[..3].copy_from_slice(&[d.delay_us, d.watermark_before, if d.admitted { 1.0 } else { 0.0 }]);
    Ok(())
  }
}

/// A pacer's save as a [`Write`]: the state until `ttl_ms` from now, or nothing.
fn write(save: Option<(State, f64)>, now_us: f64) -> Write<State> {
  save.map_or(Write::Keep, |(next, ttl_ms)| Write::Until(next, now_us + ttl_ms * 1000.0))
}

/// One pacer call on a key's live state: the decision and what it saves.
fn pace(state: Option<&State>, params: &Params, weight: f64, now_us: f64) -> (Decision, Write<State>) {
  let outcome = pacer::step(state.copied(), params, weight, now_us);
  (outcome.decision, write(outcome.save, now_us))
}

/// The live state of the interned key `id`.
fn load(inner: &mut Inner, id: usize, now_us: f64) -> Option<State> {
  inner.load::<Pacer>(id, now_us).map(|(state, _)| *state)
}

impl MemoryStore {
  /// One pacer call on an interned key.
  pub fn pacer_step_id(&self, id: usize, params: &Params, weight: f64, now_us: f64) -> Result<Decision> {
    self.step_id::<Pacer, _>(id, now_us, |state, _| pace(state, params, weight, now_us))
  }

  /// One pacer call.
  pub fn pacer_step(&self, key: &str, params: &Params, weight: f64, now_us: f64) -> Decision {
    let mut inner = self.lock();
    let id = inner.intern(key);
    inner.step_id::<Pacer, _>(id, now_us, |state, _| pace(state, params, weight, now_us))
  }

  /// Blocks the pacer of `key` for `duration_us` (see `pacer::block`); µs until it ends.
  pub fn pacer_block(&self, key: &str, params: &Params, duration_us: f64, now_us: f64) -> f64 {
    let mut inner = self.lock();
    let id = inner.intern(key);
    inner.step_id::<Pacer, _>(id, now_us, |state, _| {
      let (next, ttl_ms) = pacer::block(state.copied(), params, duration_us, now_us);
      (next.next_shot_us - now_us, write(Some((next, ttl_ms)), now_us))
    })
  }

  /// Gives back `weight` on the pacer of `key`, its slot `start_in_us` from now (see
  /// `pacer::give`): 1 when given back, 0 when it stays spent.
  pub fn pacer_give(&self, key: &str, params: &Params, weight: f64, start_in_us: f64, now_us: f64) -> f64 {
    let mut inner = self.lock();
    let id = inner.intern(key);
    inner.step_id::<Pacer, _>(id, now_us, |state, _| {
      let save = pacer::give(state.copied(), params, weight, start_in_us, now_us);
      (if save.is_some() { 1.0 } else { 0.0 }, write(save, now_us))
    })
  }

  /// Several entries, in order, under one lock acquisition.
  pub fn pacer_batch(&self, batch: &PacerBatch, now_us: f64) -> Vec<Decision> {
    let mut inner = self.lock();
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
      let mut states: Vec<Option<State>> = local.iter().map(|k| load(&mut inner, ids[*k], now_us)).collect();
      let outcomes = pacer::step_group(&mut states, &group, now_us);
      // Save each key once, with the TTL of its last saving member.
      for (i, key) in local.iter().enumerate() {
        let ttl = group
          .iter()
          .zip(&outcomes)
          .rev()
          .find(|((slot, _, _), o)| *slot == i && o.save.is_some())
          .and_then(|(_, o)| o.save.map(|(_, ttl)| ttl));
        if let (Some(next), Some(ttl)) = (states[i], ttl) {
          inner.save::<Pacer>(ids[*key], next, now_us + ttl * 1000.0);
        }
      }
      decisions.extend(outcomes.iter().map(|o| o.decision));
    }
    decisions
  }
}

#[cfg(test)]
mod tests {
  use super::*;

  #[test]
  fn decodes_entries_and_dedups_keys() {
    let args = [1.0, 1.0, 2.0, 10.0, 0.0, 0.5, 2.0, 0.0, 1.0, 10.0, 5.0, 1.0, 1.0, 1.0, 0.0, 1.0];
    let b = PacerBatch::decode("1:a1:b1:a", &args).unwrap();
    assert_eq!(b.keys, vec!["a", "b"]);
    assert_eq!(b.entries.len(), 2);
    assert_eq!(b.entries[1].members, 1..3);
    assert_eq!(b.members[2].key, 0);
    assert_eq!(b.members[1].params.mode, Mode::RateLimit);
  }

  #[test]
  fn rejects_bad_numbers_and_shapes() {
    for args in [
      vec![1.0, 1.0, f64::NAN, 10.0, 0.0, 0.5],
      vec![1.0, 1.0, 1.0, 0.0, 0.0, 0.5],
      vec![1.0, 1.0, 1.0, 10.0, -1.0, 0.5],
      vec![1.0, 1.0, 1.0, 10.0, 0.0, 1.5],
      vec![1.0, 1.0, -1.0, 10.0, 0.0, 0.5],
      vec![1.0, 1.0, 1.0, f64::INFINITY, 0.0, 0.5],
      vec![2.0, 1.0, 1.0, 10.0, 0.0, 0.5],
      vec![1.0, 7.0, 1.0, 10.0, 0.0, 0.5],
    ] {
      let e = PacerBatch::decode("1:a", &args).unwrap_err();
      assert_eq!(e.kind, crate::error::ErrorKind::InvalidArgument, "{args:?}");
    }
    assert!(PacerBatch::decode("", &[1.0, 1.0, 1.0, 10.0, 0.0, 0.5]).is_err());
    assert!(PacerBatch::decode("1:a1:b", &[1.0, 1.0, 1.0, 10.0, 0.0, 0.5]).is_err());
  }

  #[test]
  fn a_block_is_a_call_of_its_own() {
    let block = [1.0, BLOCK, 5e6, 10.0, 0.0, 1.0];
    assert!(matches!(Pacer::decode("1:a", &block), Ok(PacerCall::Block { duration_us: 5e6, .. })));
    let mut two = block.to_vec();
    two.extend([1.0, 1.0, 1.0, 10.0, 0.0, 1.0]);
    for (text, nums) in [("1:a1:b", two.as_slice()), ("1:a1:b", &block), ("1:a", &[1.0, BLOCK, 0.5, 10.0, 0.0, 1.0])] {
      assert!(Pacer::decode(text, nums).is_err(), "{text} {nums:?}");
    }
    let store = MemoryStore::new();
    let reply = Pacer::memory(&store, &Pacer::decode("1:a", &block).unwrap(), 0.0).unwrap();
    assert_eq!(reply.numbers, [5e6, 0.0, 0.0]);
  }
}
