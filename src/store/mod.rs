//! Stores: where state lives and how a step is run atomically.
//!
//! - [`memory::MemoryStore`]: the core step under a lock, in process, with the system clock or
//!   an injected one.
//! - [`redis::RedisStore`]: the Lua mirror of the step, by EVALSHA over one fred pool, with the
//!   Redis server clock (`TIME`) unless the caller passes `now`.
//!
//! Both take the same [`PacerBatch`]: several decisions, decided in order, in one call.

pub mod fair;
pub mod limits;
pub mod memory;
pub mod redis;
pub mod windows;

use crate::core::pacer::{Decision, Mode, Params};
use crate::error::{Error, Result};
use std::collections::HashMap;
use std::ops::Range;

/// Numbers per member in the flat batch encoding: weight, qps, max_burst, factor.
pub const MEMBER_FIELDS: usize = 4;
/// Numbers per member in the flat result encoding: delay_us, watermark_before, admitted (0/1).
pub const RESULT_FIELDS: usize = 3;
/// Longest accepted full store key, bytes: a 512-character JS key is at most 1,536 bytes
/// once escaped or UTF-8 encoded (3 per character), plus a prefix of up to 128.
pub const MAX_KEY_LEN: usize = 2048;

/// One pacer call as part of a batch.
#[derive(Clone, Debug, PartialEq)]
pub struct Member {
  /// Index into [`PacerBatch::keys`].
  pub key: usize,
  pub params: Params,
  pub weight: f64,
}

/// A decision unit: one pacer call, or the members of one `PacerComposite` call, which in
/// rate-limit mode are charged all together or not at all.
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

impl PacerBatch {
  /// Decodes the flat encoding the JS layer sends: `keys` in the encoding of `crate::codec` (one per member, in
  /// member order) and `args` = per entry `[members, mode (1 = pace, 0 = rateLimit)]` followed
  /// by [`MEMBER_FIELDS`] numbers per member. Every number is validated here, so nothing
  /// invalid reaches a store.
  pub fn decode(keys: &str, args: &[f64]) -> Result<PacerBatch> {
    let mut batch = PacerBatch::default();
    let mut index: HashMap<&str, usize> = HashMap::new();
    let mut key_iter = crate::codec::parts(keys);
    let mut i = 0;
    while i < args.len() {
      let count = args[i];
      let mode = match args.get(i + 1) {
        Some(m) if *m == 1.0 => Mode::Pace,
        Some(m) if *m == 0.0 => Mode::RateLimit,
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

/// A full store key: non-empty, bounded, no newline (the batch separator).
pub fn validate_key(key: &str) -> Result<()> {
  if key.is_empty() || key.len() > MAX_KEY_LEN || key.contains('\n') {
    return Err(Error::argument(format!("key must be 1..={MAX_KEY_LEN} bytes without newlines")));
  }
  Ok(())
}

/// Largest accepted weight or burst: far beyond any real use, small enough that µs
/// arithmetic on it stays exact in a double.
pub const MAX_WEIGHT: f64 = 1e9;
/// Largest accepted qps.
pub const MAX_QPS: f64 = 1e9;

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
}
