//! The sliding-window log kind (`SlidingWindowLimiter`): several windows per limiter, all
//! checked and charged together. Script `lua/sliding.lua`; one sorted set per limiter key.
//!
//! A call, as JS sends it: `text` = one key per call (in the encoding of `crate::codec`),
//! `nums` = per call `[op, weight, window count, then per window limit, interval_us]`, `op`
//! one of [`TAKE`], [`PEEK`], [`RESET`], [`BLOCK`] (nobody admitted for `weight` µs).
//! Results per call: `[allowed (0/1), retry_after_us, then per window remaining,
//! retry_after_us]`; `retry_after_us` is [`WRONG_TYPE`](super::WRONG_TYPE) when the key holds
//! a value of another type (Redis: nothing applied, the call refused).

use super::{decode_calls, next_part, Kind, Reply};
use crate::core::sliding::{self, Decision, Log, Op, Window, WindowDecision};
use crate::error::{Error, Result};
use crate::store::memory::MemoryStore;
use crate::store::redis::calls::{int, malformed, now_arg, number, Slotted};
use crate::store::redis::script::{lua_script, Script};
use crate::store::redis::{Lane, RedisStore};
use crate::store::{integer_in, validate_key, MAX_INTERVAL_US, MAX_LIMIT};
use fred::prelude::*;
use std::collections::{BTreeMap, HashMap};
use std::sync::LazyLock;

static SLIDING: LazyLock<Script> = LazyLock::new(|| Script::new(lua_script!("sliding")));

/// The sliding-window log kind (see the module docs).
pub struct Sliding;

/// Most windows per sliding limiter.
pub const MAX_WINDOWS: usize = crate::core::bounds::MAX_WINDOWS;
pub const TAKE: f64 = 0.0;
pub const PEEK: f64 = 1.0;
pub const RESET: f64 = 2.0;
pub const BLOCK: f64 = 3.0;

#[derive(Clone, Debug, PartialEq)]
pub struct SlidingCall {
  /// Index into [`SlidingBatch::keys`].
  pub key: usize,
  /// What the call does (a block's duration is also its weight, as sent).
  pub op: Op,
  pub weight: f64,
  pub windows: Vec<Window>,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct SlidingBatch {
  pub keys: Vec<String>,
  pub calls: Vec<SlidingCall>,
}

/// Decodes one call's numbers from `nums`, returning it and how many numbers it took.
pub fn decode_sliding(nums: &[f64]) -> Result<(Op, f64, Vec<Window>, usize)> {
  let malformed = || Error::argument("malformed sliding call");
  let [code, weight, count, ..] = *nums else { return Err(malformed()) };
  let op = match code {
    TAKE => Op::Take,
    PEEK => Op::Peek,
    RESET => Op::Reset,
    BLOCK => Op::Block { us: weight },
    _ => return Err(malformed()),
  };
  let windows = decode_windows(count, &nums[3..]).ok_or_else(malformed)??;
  if code == BLOCK {
    if !integer_in(weight, 1.0, MAX_INTERVAL_US) {
      return Err(Error::argument(format!("a block must last whole µs in [1, 10 years], got {weight}")));
    }
  } else if !integer_in(weight, 0.0, MAX_LIMIT) {
    return Err(Error::argument(format!("weight must be an integer in [0, {MAX_LIMIT}], got {weight}")));
  }
  Ok((op, weight, windows, 3 + 2 * count as usize))
}

/// `count` windows, `[limit, interval_us]` each, from the start of `nums`, validated: `None`
/// when the count is not in 1..=[`MAX_WINDOWS`] or `nums` is too short (the call is
/// malformed); an argument error for a bad limit or interval. Shared by the kinds whose calls
/// carry windows (sliding, sliding counter).
pub fn decode_windows(count: f64, nums: &[f64]) -> Option<Result<Vec<Window>>> {
  if !integer_in(count, 1.0, MAX_WINDOWS as f64) || nums.len() < 2 * count as usize {
    return None;
  }
  let windows: Vec<Window> =
    nums[..2 * count as usize].chunks(2).map(|w| Window { limit: w[0], interval_us: w[1] }).collect();
  for w in &windows {
    if !integer_in(w.limit, 1.0, MAX_LIMIT) {
      return Some(Err(Error::argument(format!("limit must be an integer in [1, {MAX_LIMIT}], got {}", w.limit))));
    }
    if !integer_in(w.interval_us, 1.0, MAX_INTERVAL_US) {
      return Some(Err(Error::argument(format!("interval must be whole µs in [1, 10 years], got {}", w.interval_us))));
    }
  }
  Some(Ok(windows))
}

impl SlidingBatch {
  pub fn decode(text: &str, nums: &[f64]) -> Result<SlidingBatch> {
    let mut keys = vec![];
    let mut index: HashMap<&str, usize> = HashMap::new();
    let calls = decode_calls(text, nums, "sliding", |parts, nums| {
      let key = next_part(parts, "sliding")?;
      validate_key(key)?;
      let (op, weight, windows, used) = decode_sliding(nums)?;
      let slot = *index.entry(key).or_insert_with(|| {
        keys.push(key.to_owned());
        keys.len() - 1
      });
      Ok((SlidingCall { key: slot, op, weight, windows }, used))
    })?;
    Ok(SlidingBatch { keys, calls })
  }
}

/// Flattens sliding decisions: per call `[allowed, retry_after_us, then per window
/// remaining, retry_after_us]`.
pub fn encode_sliding(decisions: &[Decision]) -> Vec<f64> {
  let mut out = vec![];
  for d in decisions {
    out.extend([if d.allowed { 1.0 } else { 0.0 }, d.retry_after_us]);
    for w in &d.windows {
      out.extend([w.remaining, w.retry_after_us]);
    }
  }
  out
}

impl Kind for Sliding {
  type Call = SlidingBatch;
  type State = Box<Log>;
  const OPS: &'static [(&'static str, f64)] = &[("take", TAKE), ("peek", PEEK), ("reset", RESET), ("block", BLOCK)];
  const RESULTS: &'static [(&'static str, &'static [&'static str])] =
    &[("call", &["allowed", "retry_after_us"]), ("window", &["remaining", "retry_after_us"])];

  fn decode(text: &str, nums: &[f64]) -> Result<SlidingBatch> {
    SlidingBatch::decode(text, nums)
  }

  fn memory(store: &MemoryStore, batch: &SlidingBatch, now_us: f64) -> Result<Reply> {
    Ok(Reply::numbers(encode_sliding(&store.sliding_batch(batch, now_us))))
  }

  async fn redis(store: &RedisStore, batch: &SlidingBatch, now_us: Option<f64>, lane: &Lane) -> Result<Reply> {
    Ok(store.sliding_batch(batch, now_us, lane).await?.reply(|v| encode_sliding(&v)))
  }
}

impl MemoryStore {
  /// Sliding-window calls, in order, under one lock acquisition.
  pub fn sliding_batch(&self, batch: &SlidingBatch, now_us: f64) -> Vec<Decision> {
    let calls = &batch.calls;
    self.step_keyed::<Sliding, _, _>(calls, now_us, |call| &batch.keys[call.key], |call, log, _| {
      let decision = log.step(&call.windows, call.weight, call.op, now_us);
      (decision, log.expires_us(&call.windows).unwrap_or(0.0))
    })
  }
}

impl RedisStore {
  /// Decides a batch of sliding-window calls, in order per key; one script call per slot. A
  /// call whose key holds a value of another type is not applied and is answered refused with
  /// `retry_after_us` = [`WRONG_TYPE`](super::WRONG_TYPE).
  pub async fn sliding_batch(&self, batch: &SlidingBatch, now_us: Option<f64>, lane: &Lane) -> Result<Slotted<Decision>> {
    let keys = batch.calls.iter().map(|c| batch.keys[c.key].as_str());
    let groups = self.groups(keys);
    self.per_slot(&groups, "sliding", |calls| self.sliding_call(batch, calls, now_us, lane)).await
  }

  async fn sliding_call(
    &self,
    batch: &SlidingBatch,
    calls: &[usize],
    now_us: Option<f64>,
    lane: &Lane,
  ) -> Result<Vec<Decision>> {
    let mut keys: Vec<Key> = vec![];
    let mut local: BTreeMap<usize, usize> = BTreeMap::new();
    let mut args: Vec<Value> = vec![now_arg(now_us)];
    for i in calls {
      let call = &batch.calls[*i];
      let k = *local.entry(call.key).or_insert_with(|| {
        keys.push(Key::from(batch.keys[call.key].as_str()));
        keys.len()
      });
      let op = match call.op {
        Op::Take => TAKE,
        Op::Peek => PEEK,
        Op::Reset => RESET,
        Op::Block { .. } => BLOCK,
      };
      args.extend([Value::Integer(k as i64), Value::Integer(op as i64), number(call.weight)]);
      args.push(Value::Integer(call.windows.len() as i64));
      for w in &call.windows {
        args.extend([number(w.limit), number(w.interval_us)]);
      }
    }
    let reply = self.run(lane, &SLIDING, keys, args).await?;
    let mut fields = reply.iter();
    let mut next = || int(fields.next(), "sliding");
    let decisions = calls
      .iter()
      .map(|i| {
        let allowed = next()? == 1.0;
        let retry_after_us = next()?;
        let windows = (0..batch.calls[*i].windows.len())
          .map(|_| Ok(WindowDecision { remaining: next()?, retry_after_us: next()? }))
          .collect::<Result<Vec<_>>>()?;
        Ok(sliding::Decision { allowed, retry_after_us, windows })
      })
      .collect::<Result<Vec<_>>>()?;
    if fields.next().is_some() {
      return Err(malformed("sliding"));
    }
    Ok(decisions)
  }
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
    assert_eq!(b.calls[1].op, Op::Peek);
    assert_eq!((b.calls[2].key, b.calls[2].op), (0, Op::Reset));
    let block = SlidingBatch::decode("1:a", &[3.0, 5e6, 1.0, 5.0, 1e6]).unwrap();
    assert_eq!((block.calls[0].op, block.calls[0].weight), (Op::Block { us: 5e6 }, 5e6));
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
}
