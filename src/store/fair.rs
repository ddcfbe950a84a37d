//! Fair-tenant assignments, decoded from the flat encoding the JS layer sends and validated,
//! so nothing invalid reaches a store.
//!
//! Batch: `keys` joined by `\n` (one tenant record per call), `ids` joined by `\n` (the job
//! id of each call), and per call `[mode (0 exact, 1 approximate), horizon_ms,
//! granularity_ms (0 for exact), rule count, then per_ms per rule]`. Results per call: the
//! tenant's count in each rule's window, this job included.

use super::validate_key;
use crate::error::{Error, Result};

/// Most rules per fair tenant.
pub const MAX_RULES: usize = 64;
/// Longest job id, bytes.
pub const MAX_ID_LEN: usize = 1024;
/// Longest window, ms (10 years).
pub const MAX_WINDOW_MS: f64 = 315_360_000_000.0;
/// Most granules a record may hold (horizon / granularity).
pub const MAX_GRANULES: f64 = 100_000.0;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FairMode {
  Exact,
  /// Counters per granule of this many ms.
  Approximate(u64),
}

#[derive(Clone, Debug, PartialEq)]
pub struct FairCall {
  pub key: String,
  pub id: String,
  pub mode: FairMode,
  /// How long registrations are kept, ms: the longest rule window.
  pub horizon_ms: u64,
  pub pers_ms: Vec<u64>,
}

fn whole(x: f64, lo: f64, hi: f64) -> bool {
  x.is_finite() && x.fract() == 0.0 && x >= lo && x <= hi
}

/// Decodes a batch of assignments.
pub fn decode_fair(keys: &str, ids: &str, nums: &[f64]) -> Result<Vec<FairCall>> {
  let malformed = || Error::argument("malformed fair batch");
  let (mut keys, mut ids) = (keys.split('\n'), ids.split('\n'));
  let mut calls = vec![];
  let mut at = 0;
  while at < nums.len() {
    let (Some(key), Some(id), [mode, horizon, granularity, count, ..]) = (keys.next(), ids.next(), &nums[at..]) else {
      return Err(malformed());
    };
    validate_key(key)?;
    if id.is_empty() || id.len() > MAX_ID_LEN || id.contains('\n') {
      return Err(Error::argument(format!("job id must be 1..={MAX_ID_LEN} bytes without newlines")));
    }
    if !whole(*horizon, 1.0, MAX_WINDOW_MS) {
      return Err(Error::argument(format!("window must be whole ms in [1, 10 years], got {horizon}")));
    }
    let mode = match *mode {
      0.0 => FairMode::Exact,
      1.0 if whole(*granularity, 1.0, *horizon) && *horizon / *granularity <= MAX_GRANULES => {
        FairMode::Approximate(*granularity as u64)
      }
      1.0 => {
        return Err(Error::argument(format!(
          "granularity must be whole ms in [1, window], at most {MAX_GRANULES} granules per window, got {granularity}"
        )))
      }
      _ => return Err(malformed()),
    };
    if !whole(*count, 1.0, MAX_RULES as f64) || nums.len() < at + 4 + *count as usize {
      return Err(malformed());
    }
    let pers = &nums[at + 4..at + 4 + *count as usize];
    if let Some(bad) = pers.iter().find(|p| !whole(**p, 1.0, *horizon)) {
      return Err(Error::argument(format!("a rule's window must be whole ms in [1, {horizon}], got {bad}")));
    }
    calls.push(FairCall {
      key: key.to_owned(),
      id: id.to_owned(),
      mode,
      horizon_ms: *horizon as u64,
      pers_ms: pers.iter().map(|p| *p as u64).collect(),
    });
    at += 4 + *count as usize;
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
    let calls =
      decode_fair("a\nb", "j1\nj2", &[0.0, 1000.0, 0.0, 2.0, 500.0, 1000.0, 1.0, 60.0, 6.0, 1.0, 60.0]).unwrap();
    assert_eq!(calls.len(), 2);
    assert_eq!(calls[0].pers_ms, vec![500, 1000]);
    assert_eq!(calls[1].mode, FairMode::Approximate(6));
    assert_eq!(calls[1].id, "j2");
  }

  #[test]
  fn rejects_bad_calls() {
    for (keys, ids, nums) in [
      ("a", "j", vec![0.0, 1000.0, 0.0, 1.0, 2000.0]),
      ("a", "j", vec![0.0, 1000.0, 0.0, 1.0, 0.0]),
      ("a", "j", vec![0.0, 1000.5, 0.0, 1.0, 10.0]),
      ("a", "j", vec![2.0, 1000.0, 0.0, 1.0, 10.0]),
      ("a", "j", vec![1.0, 1000.0, 0.0, 1.0, 10.0]),
      ("a", "j", vec![1.0, 1000.0, 2000.0, 1.0, 10.0]),
      ("a", "j", vec![1.0, 1e9, 1.0, 1.0, 10.0]),
      ("a", "j", vec![0.0, 1000.0, 0.0, 2.0, 10.0]),
      ("a", "j", vec![0.0, 1000.0, 0.0, 0.0]),
      ("a", "", vec![0.0, 1000.0, 0.0, 1.0, 10.0]),
      ("", "j", vec![0.0, 1000.0, 0.0, 1.0, 10.0]),
      ("a\nb", "j", vec![0.0, 1000.0, 0.0, 1.0, 10.0]),
      ("a", "j", vec![]),
    ] {
      let e = decode_fair(keys, ids, &nums).unwrap_err();
      assert_eq!(e.kind, ErrorKind::InvalidArgument, "{keys:?} {ids:?} {nums:?}");
    }
  }
}
