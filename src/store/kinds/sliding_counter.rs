//! The approximate sliding window kind (`SlidingCounterLimiter`): two counters per window
//! (`crate::core::sliding_counter`), several windows per limiter, all checked and charged
//! together. Script `lua/sliding_counter.lua`; one string of doubles per limiter key.
//!
//! A call, as JS sends it: `text` = one key per call (in the encoding of `crate::codec`),
//! `nums` = per call `[op, weight, window count, then per window limit, interval_us]`, `op`
//! one of [`TAKE`], [`PEEK`], [`RESET`], [`BLOCK`] (nobody admitted for `weight` µs) or
//! [`ADJUST`] (charge `weight` unconditionally, negative refunds). Results per call:
//! `[allowed (0/1), retry_after_us, then per window remaining, retry_after_us,
//! reset_after_us]`; `retry_after_us` is [`WRONG_TYPE`](super::WRONG_TYPE) when the key holds a
//! value of another type (Redis: nothing applied, the call refused).

use super::sliding::decode_windows;
use super::{decode_calls, next_part, Kind, Reply};
use crate::core::sliding::Window;
use crate::core::sliding_counter::{Decision, Op, State, WindowDecision};
use crate::error::{Error, Result};
use crate::store::memory::MemoryStore;
use crate::store::redis::calls::{int, malformed, now_arg, number};
use crate::store::redis::script::{lua_script, Script};
use crate::store::redis::{Lane, RedisStore};
use crate::store::{integer_in, validate_key, MAX_INTERVAL_US, MAX_LIMIT};
use fred::prelude::*;
use std::collections::{BTreeMap, HashMap};
use std::sync::LazyLock;

/// `lua/sliding_counter.lua`'s packing of a key index and a parameter set into one number.
pub(crate) const KEY_SHIFT: usize = 1 << 20;

static SCRIPT: LazyLock<Script> = LazyLock::new(|| Script::new(lua_script!("sliding_counter")));

/// The approximate sliding window kind (see the module docs).
pub struct SlidingCounter;

pub const TAKE: f64 = 0.0;
pub const PEEK: f64 = 1.0;
pub const RESET: f64 = 2.0;
pub const BLOCK: f64 = 3.0;
pub const ADJUST: f64 = 4.0;

/// One call, decoded and validated.
#[derive(Clone, Debug, PartialEq)]
pub struct Call {
  pub key: String,
  pub op: f64,
  pub weight: f64,
  pub windows: Vec<Window>,
}

impl Call {
  /// The core's operation of the call.
  pub fn core_op(&self) -> Op {
    match self.op {
      TAKE => Op::Take,
      PEEK => Op::Peek,
      RESET => Op::Reset,
      BLOCK => Op::Block { us: self.weight },
      _ => Op::Adjust,
    }
  }
}

/// Decodes one call's numbers from `nums`; returns it and how many numbers it took.
fn decode_call(key: &str, nums: &[f64]) -> Result<(Call, usize)> {
  let bad = || Error::argument("malformed sliding-counter call");
  let [op, weight, count, ..] = *nums else { return Err(bad()) };
  if ![TAKE, PEEK, RESET, BLOCK, ADJUST].contains(&op) {
    return Err(bad());
  }
  let windows = decode_windows(count, &nums[3..]).ok_or_else(bad)??;
  let (lo, hi) = match op {
    BLOCK => (1.0, MAX_INTERVAL_US),
    ADJUST => (-MAX_LIMIT, MAX_LIMIT),
    _ => (0.0, MAX_LIMIT),
  };
  if !integer_in(weight, lo, hi) {
    return Err(Error::argument(format!("weight must be an integer in [{lo}, {hi}], got {weight}")));
  }
  validate_key(key)?;
  Ok((Call { key: key.to_owned(), op, weight, windows }, 3 + 2 * count as usize))
}

fn flatten(decisions: &[Decision]) -> Vec<f64> {
  let mut out = vec![];
  for d in decisions {
    out.extend([if d.allowed { 1.0 } else { 0.0 }, d.retry_after_us]);
    for w in &d.windows {
      out.extend([w.remaining, w.retry_after_us, w.reset_after_us]);
    }
  }
  out
}

impl Kind for SlidingCounter {
  type Call = Vec<Call>;
  type State = Box<State>;
  const OPS: &'static [(&'static str, f64)] =
    &[("take", TAKE), ("peek", PEEK), ("reset", RESET), ("block", BLOCK), ("adjust", ADJUST)];
  const RESULTS: &'static [(&'static str, &'static [&'static str])] =
    &[("call", &["allowed", "retry_after_us"]), ("window", &["remaining", "retry_after_us", "reset_after_us"])];

  fn decode(text: &str, nums: &[f64]) -> Result<Vec<Call>> {
    decode_calls(text, nums, "sliding-counter", |keys, nums| decode_call(next_part(keys, "sliding-counter")?, nums))
  }

  fn memory(store: &MemoryStore, calls: &Vec<Call>, now_us: f64) -> Result<Reply> {
    let decisions = store.step_keyed::<SlidingCounter, _, _>(calls, now_us, |call| &call.key, |call, state, _| {
      let decision = state.step(&call.windows, call.weight, call.core_op(), now_us);
      (decision, state.ttl_ms(&call.windows, now_us).map_or(0.0, |ms| now_us + ms * 1000.0))
    });
    Ok(Reply::numbers(flatten(&decisions)))
  }

  async fn redis(store: &RedisStore, calls: &Vec<Call>, now_us: Option<f64>, lane: &Lane) -> Result<Reply> {
    let groups = store.groups(calls.iter().map(|c| c.key.as_str()));
    let decisions =
      store.per_slot(&groups, "sliding-counter", |part| script_call(store, calls, part, now_us, lane)).await?;
    Ok(decisions.reply(|v| flatten(&v)))
  }
}

/// The calls `part` of `calls` (one hash slot) in one script call.
async fn script_call(
  store: &RedisStore,
  calls: &[Call],
  part: &[usize],
  now_us: Option<f64>,
  lane: &Lane,
) -> Result<Vec<Decision>> {
  // keys and parameter sets (weight and windows) deduplicated; one number per call
  let mut keys: Vec<Key> = vec![];
  let mut local: BTreeMap<&str, usize> = BTreeMap::new();
  let mut sets: Vec<&Call> = vec![];
  let mut index: HashMap<Vec<u64>, usize> = HashMap::new();
  let mut params: Vec<Value> = vec![];
  let mut entries: Vec<Value> = Vec::with_capacity(part.len());
  for i in part {
    let call = &calls[*i];
    let k = *local.entry(call.key.as_str()).or_insert_with(|| {
      keys.push(Key::from(call.key.as_str()));
      keys.len()
    });
    let same = |s: &Call| s.weight.to_bits() == call.weight.to_bits() && s.windows == call.windows;
    let p = match sets.last() {
      Some(last) if same(last) => sets.len(),
      _ => {
        let mut bits = vec![call.weight.to_bits()];
        bits.extend(call.windows.iter().flat_map(|w| [w.limit.to_bits(), w.interval_us.to_bits()]));
        *index.entry(bits).or_insert_with(|| {
          sets.push(call);
          params.extend([number(call.weight), Value::Integer(call.windows.len() as i64)]);
          for w in &call.windows {
            params.extend([number(w.limit), number(w.interval_us)]);
          }
          sets.len()
        })
      }
    };
    entries.push(Value::Integer(((k * KEY_SHIFT + p) * 8 + call.op as usize) as i64));
  }
  let mut args: Vec<Value> = Vec::with_capacity(2 + params.len() + entries.len());
  args.extend([now_arg(now_us), Value::Integer(sets.len() as i64)]);
  args.extend(params);
  args.extend(entries);
  let reply = store.run(lane, &SCRIPT, keys, args).await?;
  let mut fields = reply.iter();
  let mut next = || int(fields.next(), "sliding-counter");
  let decisions = part
    .iter()
    .map(|i| {
      let allowed = next()? == 1.0;
      let retry_after_us = next()?;
      let windows = (0..calls[*i].windows.len())
        .map(|_| Ok(WindowDecision { remaining: next()?, retry_after_us: next()?, reset_after_us: next()? }))
        .collect::<Result<Vec<_>>>()?;
      Ok(Decision { allowed, retry_after_us, windows })
    })
    .collect::<Result<Vec<_>>>()?;
  if fields.next().is_some() {
    return Err(malformed("sliding-counter"));
  }
  Ok(decisions)
}

#[cfg(test)]
mod tests {
  use super::*;
  use crate::error::ErrorKind;

  #[test]
  fn decodes_calls_and_refuses_bad_numbers() {
    let nums = [0.0, 1.0, 2.0, 5.0, 1e6, 10.0, 6e7, 4.0, -3.0, 1.0, 5.0, 1e6];
    let calls = SlidingCounter::decode("1:a1:b", &nums).unwrap();
    assert_eq!(calls.len(), 2);
    assert_eq!(calls[0].windows.len(), 2);
    assert_eq!((calls[1].op, calls[1].weight), (ADJUST, -3.0));
    for bad in [
      vec![5.0, 1.0, 1.0, 5.0, 1e6],
      vec![3.0, 0.0, 1.0, 5.0, 1e6],
      vec![0.0, -1.0, 1.0, 5.0, 1e6],
      vec![0.0, 1.5, 1.0, 5.0, 1e6],
      vec![0.0, 1.0, 0.0],
      vec![0.0, 1.0, 2.0, 5.0, 1e6],
      vec![0.0, 1.0, 1.0, 0.0, 1e6],
      vec![0.0, 1.0, 1.0, 5.0, 0.5],
    ] {
      assert_eq!(SlidingCounter::decode("1:a", &bad).unwrap_err().kind, ErrorKind::InvalidArgument, "{bad:?}");
    }
    assert!(SlidingCounter::decode("1:a1:b", &[0.0, 1.0, 1.0, 5.0, 1e6]).is_err());
  }
}
