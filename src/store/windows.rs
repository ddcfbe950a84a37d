//! The sliding-window limiter's batch and the quota limiter's call, decoded from the flat
//! encodings the JS layer sends and validated, so nothing invalid reaches a store.
//!
//! Sliding batch: `keys` in the encoding of `crate::codec`, one per call, and per call `[op (0 take, 1 peek,
//! 2 reset, 3 block for `weight` µs), weight, window count, then per window limit, interval_us]`. Results per call:
//! `[allowed (0/1), retry_after_us, then per window remaining, retry_after_us]`.
//!
//! Quota call: `keys` = the distinct counters in the encoding of `crate::codec`, and `[counter count, per
//! counter window_s, granularity_s, request count, per request requested, quota count, per
//! quota counter index (0-based), limit]`. Results: `[timestamp, per request granted, then
//! per quota reached (0/1)]`.

use super::limits::{MAX_INTERVAL_US, MAX_LIMIT};
use super::validate_key;
use crate::core::quota::{self, QuotaRef, Request};
use crate::core::sliding::{Op, Window};
use crate::error::{Error, Result};
use std::collections::HashMap;

/// Most windows per sliding limiter.
pub const MAX_WINDOWS: usize = 16;
/// Largest quota limit or requested amount (exact sums stay far below 2^53).
pub const MAX_QUOTA: f64 = 1e12;
/// Longest quota window, seconds (10 years).
pub const MAX_WINDOW_S: f64 = 315_360_000.0;
/// Largest timestamp, seconds.
pub const MAX_TIMESTAMP: f64 = 1e11;

fn integer_in(x: f64, lo: f64, hi: f64) -> bool {
  x.is_finite() && x.fract() == 0.0 && x >= lo && x <= hi
}

/// What a sliding call does.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum SlidingAction {
  Step(Op),
  Reset,
  /// Nobody admitted for the call's weight in µs.
  Block,
}

#[derive(Clone, Debug, PartialEq)]
pub struct SlidingCall {
  /// Index into [`SlidingBatch::keys`].
  pub key: usize,
  pub action: SlidingAction,
  pub weight: f64,
  pub windows: Vec<Window>,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct SlidingBatch {
  pub keys: Vec<String>,
  pub calls: Vec<SlidingCall>,
}

/// Decodes one call's numbers from `nums`, returning it and how many numbers it took.
pub fn decode_sliding(nums: &[f64]) -> Result<(SlidingAction, f64, Vec<Window>, usize)> {
  let malformed = || Error::argument("malformed sliding call");
  let [op, weight, count, ..] = *nums else { return Err(malformed()) };
  let action = match op {
    0.0 => SlidingAction::Step(Op::Take),
    1.0 => SlidingAction::Step(Op::Peek),
    2.0 => SlidingAction::Reset,
    3.0 => SlidingAction::Block,
    _ => return Err(malformed()),
  };
  if !integer_in(count, 1.0, MAX_WINDOWS as f64) || nums.len() < 3 + 2 * count as usize {
    return Err(malformed());
  }
  let windows: Vec<Window> =
    nums[3..3 + 2 * count as usize].chunks(2).map(|w| Window { limit: w[0], interval_us: w[1] }).collect();
  for w in &windows {
    if !integer_in(w.limit, 1.0, MAX_LIMIT) {
      return Err(Error::argument(format!("limit must be an integer in [1, {MAX_LIMIT}], got {}", w.limit)));
    }
    if !integer_in(w.interval_us, 1.0, MAX_INTERVAL_US) {
      return Err(Error::argument(format!("interval must be whole µs in [1, 10 years], got {}", w.interval_us)));
    }
  }
  if action == SlidingAction::Block {
    if !integer_in(weight, 1.0, MAX_INTERVAL_US) {
      return Err(Error::argument(format!("a block must last whole µs in [1, 10 years], got {weight}")));
    }
  } else if !integer_in(weight, 0.0, MAX_LIMIT) {
    return Err(Error::argument(format!("weight must be an integer in [0, {MAX_LIMIT}], got {weight}")));
  }
  Ok((action, weight, windows, 3 + 2 * count as usize))
}

impl SlidingBatch {
  pub fn decode(keys: &str, nums: &[f64]) -> Result<SlidingBatch> {
    let mut batch = SlidingBatch::default();
    let mut index: HashMap<&str, usize> = HashMap::new();
    let mut key_iter = crate::codec::parts(keys);
    let mut at = 0;
    while at < nums.len() {
      let key = key_iter.next().ok_or_else(|| Error::argument("malformed sliding batch: missing key"))??;
      validate_key(key)?;
      let (action, weight, windows, used) = decode_sliding(&nums[at..])?;
      at += used;
      let next = index.len();
      let slot = *index.entry(key).or_insert(next);
      if slot == batch.keys.len() {
        batch.keys.push(key.to_owned());
      }
      batch.calls.push(SlidingCall { key: slot, action, weight, windows });
    }
    if key_iter.next().is_some() || batch.calls.is_empty() {
      return Err(Error::argument("malformed sliding batch: keys and calls do not match"));
    }
    Ok(batch)
  }
}

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
      1.0 => Ok(QuotaMode::Check),
      2.0 => Ok(QuotaMode::CheckAndUse),
      3.0 => Ok(QuotaMode::Use),
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

impl QuotaCall {
  pub fn decode(keys: &str, nums: &[f64]) -> Result<QuotaCall> {
    let malformed = || Error::argument("malformed quota call");
    let mut it = nums.iter().copied();
    let mut next = || it.next().ok_or_else(malformed);
    let mut call = QuotaCall {
      keys: crate::codec::parts(keys).map(|k| k.map(str::to_owned)).collect::<Result<_>>()?,
      ..Default::default()
    };
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
        if !integer_in(counter, 0.0, (call.keys.len() - 1) as f64) {
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
  if t == -1.0 {
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

/// Flattens sliding decisions: per call `[allowed, retry_after_us, then per window
/// remaining, retry_after_us]`.
pub fn encode_sliding(decisions: &[crate::core::sliding::Decision]) -> Vec<f64> {
  let mut out = vec![];
  for d in decisions {
    out.extend([if d.allowed { 1.0 } else { 0.0 }, d.retry_after_us]);
    for w in &d.windows {
      out.extend([w.remaining, w.retry_after_us]);
    }
  }
  out
}

#[cfg(test)]
mod tests {
  use super::*;
  use crate::error::ErrorKind;

  #[test]
  fn decodes_sliding_calls_of_several_shapes() {
    let nums = [0.0, 1.0, 2.0, 5.0, 1e6, 10.0, 6e7, 1.0, 0.0, 1.0, 3.0, 1e6, 2.0, 0.0, 1.0, 5.0, 1e6];
    let b = SlidingBatch::decode("1:a1:b1:a", &nums).unwrap();
    assert_eq!(b.keys, ["a", "b"]);
    assert_eq!(b.calls[0].windows.len(), 2);
    assert_eq!(b.calls[1].action, SlidingAction::Step(Op::Peek));
    assert_eq!((b.calls[2].key, b.calls[2].action), (0, SlidingAction::Reset));
    let block = SlidingBatch::decode("1:a", &[3.0, 5e6, 1.0, 5.0, 1e6]).unwrap();
    assert_eq!((block.calls[0].action, block.calls[0].weight), (SlidingAction::Block, 5e6));
    for bad in [
      vec![4.0, 1.0, 1.0, 5.0, 1e6],
      vec![3.0, 0.0, 1.0, 5.0, 1e6],
      vec![3.0, 1.5, 1.0, 5.0, 1e6],
      vec![0.0, 1.5, 1.0, 5.0, 1e6],
      vec![0.0, 1.0, 0.0],
      vec![0.0, 1.0, 2.0, 5.0, 1e6],
      vec![0.0, 1.0, 1.0, 0.0, 1e6],
      vec![0.0, 1.0, 1.0, 5.0, 0.5],
    ] {
      assert_eq!(SlidingBatch::decode("1:a", &bad).unwrap_err().kind, ErrorKind::InvalidArgument, "{bad:?}");
    }
  }

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
    assert_eq!(quota_timestamp(-1.0), Ok(None));
    assert!(quota_timestamp(1.5).is_err());
  }
}
