//! The rate limiters' batch: calls of any kind (bucket, window, leaky), decided in order in
//! one store call, the way [`PacerBatch`](super::PacerBatch) does for the pacer.
//!
//! Flat encoding from the JS layer: `keys` in the encoding of `crate::codec`, one per entry, and
//! [`LIMIT_FIELDS`] numbers per entry: `kind, weight, limit, interval_us, max_wait_us`, where
//! `max_wait_us` ≥ 0 asks for a take, [`PEEK`] for a take's answer without the charge,
//! [`ADJUST`] for an unconditional charge (weight may be negative), [`RESET`] to delete the
//! key, [`BLOCK`] to admit nobody for `weight` µs. Results: [`LIMIT_RESULT_FIELDS`] numbers per
//! entry: `allowed (0/1), remaining, retry_after_us, reset_after_us`.

use super::validate_key;
use crate::core::concurrent::Request;
use crate::core::limit::{Decision, Kind, Op, Params, MAX_DELAY_US};
use crate::error::{Error, Result};
use std::collections::HashMap;

pub const LIMIT_FIELDS: usize = 5;
pub const LIMIT_RESULT_FIELDS: usize = 4;
/// `max_wait_us` code of an unconditional charge.
pub const ADJUST: f64 = -1.0;
/// `max_wait_us` code of a reset.
pub const RESET: f64 = -2.0;
/// `max_wait_us` code of a peek.
pub const PEEK: f64 = -3.0;
/// `max_wait_us` code of a block (the weight field holds its duration, µs).
pub const BLOCK: f64 = -4.0;
/// Largest limit or |weight|: counters stay exact integers in a double.
pub const MAX_LIMIT: f64 = 1e9;
/// Longest interval, µs (10 years).
pub const MAX_INTERVAL_US: f64 = 315_360_000_000_000.0;

/// What one entry does.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Action {
  Step(Op),
  Reset,
  /// Nobody is admitted for the entry's weight in µs (see `limit::block`).
  Block,
}

#[derive(Clone, Debug, PartialEq)]
pub struct LimitEntry {
  /// Index into [`LimitBatch::keys`].
  pub key: usize,
  pub kind: Kind,
  pub params: Params,
  pub weight: f64,
  pub action: Action,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct LimitBatch {
  /// Distinct full store keys.
  pub keys: Vec<String>,
  pub entries: Vec<LimitEntry>,
}

fn integer_in(x: f64, lo: f64, hi: f64) -> bool {
  x.is_finite() && x.fract() == 0.0 && x >= lo && x <= hi
}

impl LimitBatch {
  /// Decodes and validates the flat encoding; nothing invalid reaches a store.
  pub fn decode(keys: &str, args: &[f64]) -> Result<LimitBatch> {
    if !args.len().is_multiple_of(LIMIT_FIELDS) {
      return Err(Error::argument("malformed limiter batch: truncated"));
    }
    let mut batch = LimitBatch::default();
    let mut index: HashMap<&str, usize> = HashMap::new();
    let mut key_iter = crate::codec::parts(keys);
    for f in args.chunks(LIMIT_FIELDS) {
      let key = key_iter.next().ok_or_else(|| Error::argument("malformed limiter batch: missing key"))??;
      validate_key(key)?;
      let (kind, params, weight, action) = decode_entry(f)?;
      let next = index.len();
      let slot = *index.entry(key).or_insert(next);
      if slot == batch.keys.len() {
        batch.keys.push(key.to_owned());
      }
      batch.entries.push(LimitEntry { key: slot, kind, params, weight, action });
    }
    if key_iter.next().is_some() {
      return Err(Error::argument("malformed limiter batch: more keys than entries"));
    }
    Ok(batch)
  }
}

/// Decodes and validates one entry's [`LIMIT_FIELDS`] numbers.
pub fn decode_entry(f: &[f64]) -> Result<(Kind, Params, f64, Action)> {
  let kind = Kind::from_code(f[0]).ok_or_else(|| Error::argument("malformed limiter call: bad kind"))?;
  let (weight, limit, interval_us, max_wait_us) = (f[1], f[2], f[3], f[4]);
  if !integer_in(limit, 1.0, MAX_LIMIT) {
    return Err(Error::argument(format!("limit must be an integer in [1, {MAX_LIMIT}], got {limit}")));
  }
  if !(interval_us.is_finite() && (1.0..=MAX_INTERVAL_US).contains(&interval_us)) {
    return Err(Error::argument(format!("interval must be in [1 µs, 10 years], got {interval_us} µs")));
  }
  let action = if max_wait_us == ADJUST {
    Action::Step(Op::Adjust)
  } else if max_wait_us == RESET {
    Action::Reset
  } else if max_wait_us == PEEK {
    Action::Step(Op::Peek)
  } else if max_wait_us == BLOCK {
    if !integer_in(weight, 1.0, MAX_INTERVAL_US) {
      return Err(Error::argument(format!("a block must last whole µs in [1, 10 years], got {weight}")));
    }
    return Ok((kind, Params { limit, interval_us }, weight, Action::Block));
  } else if max_wait_us.is_finite() && (0.0..=MAX_DELAY_US).contains(&max_wait_us) {
    Action::Step(Op::Take { max_wait_us })
  } else {
    return Err(Error::argument(format!("malformed limiter call: bad max wait {max_wait_us}")));
  };
  let lowest = if action == Action::Step(Op::Adjust) { -MAX_LIMIT } else { 0.0 };
  if !integer_in(weight, lowest, MAX_LIMIT) {
    return Err(Error::argument(format!("weight must be an integer in [{lowest}, {MAX_LIMIT}], got {weight}")));
  }
  Ok((kind, Params { limit, interval_us }, weight, action))
}

/// The decision reported for a reset: the limiter at full capacity.
pub fn reset_decision(params: &Params) -> Decision {
  Decision { allowed: true, remaining: params.limit, retry_after_us: 0.0, reset_after_us: 0.0 }
}

/// Flattens decisions for the JS layer.
pub fn encode_limit_decisions(decisions: &[Decision]) -> Vec<f64> {
  let mut out = Vec::with_capacity(decisions.len() * LIMIT_RESULT_FIELDS);
  for d in decisions {
    out.extend([if d.allowed { 1.0 } else { 0.0 }, d.remaining, d.retry_after_us, d.reset_after_us]);
  }
  out
}

/// Decodes and validates one concurrent-limiter operation: `op` (1 acquire, 2 release,
/// 3 extend, 4 poll, 5 cancel, 6 stats), the lease or waiter `id`, and
/// `[limit, lock_us, wait_us, ttl_ms]`.
pub fn decode_concurrent(op: f64, id: &str, nums: &[f64]) -> Result<(Request, f64)> {
  if id.is_empty() || id.len() > 192 || id.contains(|c: char| c.is_whitespace()) {
    return Err(Error::argument("lease id must be 1..=192 bytes without whitespace"));
  }
  // release and extend may name a lease (`id|token|acquired_us`); the others take a plain id
  if !matches!(op, 2.0 | 3.0) && id.contains('|') {
    return Err(Error::argument("a waiter id cannot contain '|'"));
  }
  let [limit, lock_us, wait_us, ttl_ms] = nums else {
    return Err(Error::argument("malformed concurrent call: expected 4 numbers"));
  };
  let (limit, lock_us, wait_us, ttl_ms) = (*limit, *lock_us, *wait_us, *ttl_ms);
  if !integer_in(limit, 1.0, MAX_LIMIT) {
    return Err(Error::argument(format!("limit must be an integer in [1, {MAX_LIMIT}], got {limit}")));
  }
  if !integer_in(lock_us, 1.0, MAX_INTERVAL_US) || !integer_in(wait_us, 0.0, MAX_INTERVAL_US) {
    return Err(Error::argument("lock and wait times must be whole µs within 10 years"));
  }
  if !integer_in(ttl_ms, 1.0, MAX_INTERVAL_US / 1000.0) {
    return Err(Error::argument("ttl must be whole ms within 10 years"));
  }
  let request = match op {
    1.0 => Request::Acquire { limit, lock_us, wait_us },
    2.0 => Request::Release { limit },
    3.0 => Request::Extend { lock_us },
    4.0 => Request::Poll { limit },
    5.0 => Request::Cancel { limit },
    6.0 => Request::Stats,
    _ => return Err(Error::argument(format!("unknown concurrent op {op}"))),
  };
  Ok((request, ttl_ms))
}

#[cfg(test)]
mod tests {
  use super::*;
  use crate::error::ErrorKind;

  #[test]
  fn decodes_mixed_kinds_and_actions() {
    let args =
      [0.0, 1.0, 5.0, 1e6, 0.0, 2.0, -3.0, 10.0, 1e6, ADJUST, 1.0, 0.0, 2.0, 1e6, RESET, 2.0, 1.0, 10.0, 1e6, 5e5];
    let b = LimitBatch::decode("1:a1:b1:c1:b", &args).unwrap();
    assert_eq!(b.keys, ["a", "b", "c"]);
    assert_eq!(b.entries[1].action, Action::Step(Op::Adjust));
    assert_eq!(b.entries[2].action, Action::Reset);
    assert_eq!(b.entries[3].key, 1);
    assert_eq!(b.entries[3].action, Action::Step(Op::Take { max_wait_us: 5e5 }));
  }

  #[test]
  fn rejects_bad_numbers_and_shapes() {
    for args in [
      [3.0, 1.0, 5.0, 1e6, 0.0],
      [0.0, 1.5, 5.0, 1e6, 0.0],
      [0.0, -1.0, 5.0, 1e6, 0.0],
      [0.0, 1.0, 0.0, 1e6, 0.0],
      [0.0, 1.0, 2.5, 1e6, 0.0],
      [0.0, 1.0, 5.0, 0.0, 0.0],
      [0.0, 1.0, 5.0, f64::NAN, 0.0],
      [0.0, 1.0, 5.0, 1e6, -5.0],
      [0.0, 0.0, 5.0, 1e6, BLOCK],
      [0.0, 1.5, 5.0, 1e6, BLOCK],
      [0.0, 1e16, 5.0, 1e6, BLOCK],
      [0.0, 1.0, 5.0, 1e6, f64::INFINITY],
      [0.0, 2e9, 5.0, 1e6, 0.0],
    ] {
      assert_eq!(LimitBatch::decode("1:a", &args).unwrap_err().kind, ErrorKind::InvalidArgument, "{args:?}");
    }
    assert!(LimitBatch::decode("1:a1:b", &[0.0, 1.0, 5.0, 1e6, 0.0]).is_err());
    assert!(LimitBatch::decode("1:a", &[0.0, 1.0, 5.0, 1e6]).is_err());
  }
}
