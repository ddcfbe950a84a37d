//! Fair-tenant assignments, decoded from the flat encoding the JS layer sends and validated,
//! so nothing invalid reaches a store.
//!
//! Batch: `keys` in the encoding of `crate::codec` (one tenant record per call), `ids` in the same encoding (the job
//! id of each call), and per call `[mode (0 exact, 1 approximate), rule count, then per_ms,
//! granularity_ms per rule (granularity 0 in exact mode)]`. Results per call: the tenant's
//! count in each rule's window, this job included.

use super::validate_key;
use crate::error::{Error, Result};

/// Most rules per fair tenant.
pub const MAX_RULES: usize = 64;
/// Longest job id, bytes.
pub const MAX_ID_LEN: usize = 1024;
/// Longest window, ms (10 years).
pub const MAX_WINDOW_MS: f64 = 315_360_000_000.0;
/// Most granules a rule's window may span (per / granularity).
pub const MAX_GRANULES: f64 = 100_000.0;

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

fn whole(x: f64, lo: f64, hi: f64) -> bool {
  x.is_finite() && x.fract() == 0.0 && x >= lo && x <= hi
}

/// Decodes a batch of assignments.
pub fn decode_fair(keys: &str, ids: &str, nums: &[f64]) -> Result<Vec<FairCall>> {
  let malformed = || Error::argument("malformed fair batch");
  let (mut keys, mut ids) = (crate::codec::parts(keys), crate::codec::parts(ids));
  let mut calls = vec![];
  let mut at = 0;
  while at < nums.len() {
    let (Some(key), Some(id), [mode, count, ..]) = (keys.next(), ids.next(), &nums[at..]) else {
      return Err(malformed());
    };
    let (key, id) = (key?, id?);
    validate_key(key)?;
    if id.is_empty() || id.len() > MAX_ID_LEN {
      return Err(Error::argument(format!("job id must be 1..={MAX_ID_LEN} bytes")));
    }
    let mode = match *mode {
      0.0 => FairMode::Exact,
      1.0 => FairMode::Approximate,
      _ => return Err(malformed()),
    };
    if !whole(*count, 1.0, MAX_RULES as f64) || nums.len() < at + 2 + 2 * *count as usize {
      return Err(malformed());
    }
    let mut rules = vec![];
    for pair in nums[at + 2..at + 2 + 2 * *count as usize].chunks(2) {
      let (per, granularity) = (pair[0], pair[1]);
      if !whole(per, 1.0, MAX_WINDOW_MS) {
        return Err(Error::argument(format!("a rule's window must be whole ms in [1, 10 years], got {per}")));
      }
      let granularity_ok = match mode {
        FairMode::Exact => granularity == 0.0,
        FairMode::Approximate => whole(granularity, 1.0, per) && per / granularity <= MAX_GRANULES,
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
  if keys.next().is_some() || ids.next().is_some() || calls.is_empty() {
    return Err(malformed());
  }
  Ok(calls)
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
  }
}
