//! The adaptive rate kind (sluice/fetch): one record per key owns the key's rate, its pacing
//! queue and its block (`crate::core::adaptive`). Script `lua/adaptive.lua`; one string of
//! `RECORD` doubles per key (`<prefix>:adaptive:v2:{<key>}`).
//!
//! A call, as JS sends it: `text` = one key per call (in the encoding of `crate::codec`),
//! `nums` = per call 16 numbers `[op, weight, ok, max_wait_us, throttled, block_us,
//! learned_qps, learned_ttl_us, max_qps, min_qps, start_qps, inc_abs, inc_rel, decrease, burst,
//! sent_ago_us]` (`sent_ago_us`: how long ago the latest of the calls whose successes `ok`
//! tells was sent, µs; 0 with none),
//! `op` one of [`PACE`], [`REPORT`] (`ok`, the successes a process saw since it last told,
//! goes with both; a throttled report's `max_wait_us` is how long ago its call was sent, µs,
//! -1: unknown) or [`GIVE`] (a slot of `weight` given back, its start from now in
//! `max_wait_us`: see `crate::core::adaptive::State::give`; answers `[0, rate, given, block_us
//! left]`). Results per call, 4 numbers: pace `[delay_us (whole,
//! rounded up), rate in milli-qps (floor), admitted, block_us left]`, report `[block_us left,
//! rate in milli-qps, decreased, block_us left]` (a pace tells every process of a block that
//! another's response recorded); the first is [`WRONG_TYPE`](super::WRONG_TYPE) when the key holds a
//! value of another type (Redis: nothing applied).

use super::{decode_calls, next_part, Kind, Reply};
use crate::core::adaptive::{Answer, Params, State};
use crate::error::{Error, Result};
use crate::store::memory::MemoryStore;
use crate::store::redis::calls::{int, malformed, now_arg, number};
use crate::store::redis::script::{lua_script, Script};
use crate::store::redis::{Lane, RedisStore};
use crate::store::{integer_in, validate_key, MAX_INTERVAL_US, MAX_LIMIT};
use fred::prelude::*;
use std::collections::BTreeMap;
use std::sync::LazyLock;

static SCRIPT: LazyLock<Script> = LazyLock::new(|| Script::new(lua_script!("adaptive")));

/// The adaptive rate kind (see the module docs).
pub struct Adaptive;

pub const PACE: f64 = 0.0;
pub const REPORT: f64 = 1.0;
/// Gives back a slot of `weight`, its start `max_wait_us` from now, µs (see
/// `crate::core::adaptive::State::give`).
pub const GIVE: f64 = 2.0;
/// Numbers per call.
pub const WIDTH: usize = 16;
/// Numbers per call in a reply.
pub const RESULT: usize = 4;
/// Highest rate, qps.
pub const MAX_QPS: f64 = crate::core::bounds::MAX_LIMIT;

/// One call, decoded and validated.
#[derive(Clone, Debug, PartialEq)]
pub struct Call {
  pub key: String,
  pub op: f64,
  pub weight: f64,
  pub ok: f64,
  pub max_wait_us: f64,
  pub throttled: bool,
  pub block_us: f64,
  pub learned_qps: f64,
  pub learned_ttl_us: f64,
  pub params: Params,
  pub sent_ago_us: f64,
}

fn decode_call(key: &str, n: &[f64]) -> Result<Call> {
  let bad = |what: &str| Error::argument(format!("malformed adaptive call: {what}"));
  if n.len() < WIDTH {
    return Err(bad("too few numbers"));
  }
  let in_range = |x: f64, lo: f64, hi: f64| x.is_finite() && x >= lo && x <= hi;
  if n[0] != PACE && n[0] != REPORT && n[0] != GIVE {
    return Err(bad("op"));
  }
  if !integer_in(n[1], 0.0, MAX_LIMIT) || !integer_in(n[2], 0.0, MAX_LIMIT) {
    return Err(bad("weight or ok"));
  }
  if !(n[3] == -1.0 || integer_in(n[3], 0.0, MAX_INTERVAL_US)) || !(n[4] == 0.0 || n[4] == 1.0) {
    return Err(bad("max_wait_us or throttled"));
  }
  if !integer_in(n[5], 0.0, MAX_INTERVAL_US) || !integer_in(n[7], 0.0, MAX_INTERVAL_US) {
    return Err(bad("block_us or learned_ttl_us"));
  }
  let (max_qps, min_qps, start_qps) = (n[8], n[9], n[10]);
  if !in_range(n[6], 0.0, MAX_QPS) || !in_range(max_qps, 1e-9, MAX_QPS) || !in_range(min_qps, 1e-9, max_qps) {
    return Err(bad("rates"));
  }
  if !in_range(start_qps, min_qps, max_qps) || !in_range(n[11], 0.0, MAX_QPS) || !in_range(n[12], 0.0, 10.0) {
    return Err(bad("start or increase"));
  }
  if !in_range(n[13], 0.0, 0.99) || !in_range(n[14], 0.0, MAX_LIMIT) {
    return Err(bad("decrease or burst"));
  }
  if !integer_in(n[15], 0.0, MAX_INTERVAL_US) {
    return Err(bad("sent_ago_us"));
  }
  validate_key(key)?;
  Ok(Call {
    key: key.to_owned(),
    op: n[0],
    weight: n[1],
    ok: n[2],
    max_wait_us: n[3],
    throttled: n[4] == 1.0,
    block_us: n[5],
    learned_qps: n[6],
    learned_ttl_us: n[7],
    params: Params { max_qps, min_qps, start_qps, inc_abs: n[11], inc_rel: n[12], decrease: n[13], burst: n[14] },
    sent_ago_us: n[15],
  })
}

impl Kind for Adaptive {
  type Call = Vec<Call>;
  type State = Box<State>;
  const OPS: &'static [(&'static str, f64)] = &[("pace", PACE), ("report", REPORT), ("give", GIVE)];
  const RESULTS: &'static [(&'static str, &'static [&'static str])] = &[
    ("pace", &["delay_us", "rate_mqps", "admitted", "block_us"]),
    ("report", &["recorded_block_us", "rate_mqps", "decreased", "block_us"]),
    ("give", &["none", "rate_mqps", "given", "block_us"]),
  ];

  fn decode(text: &str, nums: &[f64]) -> Result<Vec<Call>> {
    decode_calls(text, nums, "adaptive", |keys, nums| Ok((decode_call(next_part(keys, "adaptive")?, nums)?, WIDTH)))
  }

  fn memory(store: &MemoryStore, calls: &Vec<Call>, now_us: f64) -> Result<Reply> {
    let out = store.step_keyed::<Adaptive, _, _>(calls, now_us, |c| &c.key, |c, state, _| {
      let result = step(state, c, now_us);
      (result, state.expires_us(now_us))
    });
    Ok(Reply::numbers(out.concat()))
  }

  async fn redis(store: &RedisStore, calls: &Vec<Call>, now_us: Option<f64>, lane: &Lane) -> Result<Reply> {
    let groups = store.groups(calls.iter().map(|c| c.key.as_str()));
    let parts = store.per_slot(&groups, "adaptive", |part| script_call(store, calls, part, now_us, lane)).await?;
    Ok(parts.reply(|v| v.concat()))
  }
}

/// One call on a record, as the script answers it.
pub fn step(state: &mut State, c: &Call, now_us: f64) -> [f64; RESULT] {
  let flag = |b: bool| if b { 1.0 } else { 0.0 };
  let (a, rate, b) = if c.op == PACE {
    let s = state.pace(&c.params, c.weight, c.ok, c.sent_ago_us, c.max_wait_us, now_us);
    (s.delay_us.ceil(), s.rate, flag(s.admitted))
  } else if c.op == GIVE {
    let s = state.give(&c.params, c.weight, c.max_wait_us.max(0.0), now_us);
    (0.0, s.rate, flag(s.admitted))
  } else {
    let a = Answer {
      throttled: c.throttled,
      ok: c.ok,
      sent_ago_us: c.sent_ago_us,
      block_us: c.block_us,
      learned_qps: c.learned_qps,
      learned_ttl_us: c.learned_ttl_us,
      sent_t_ago_us: c.max_wait_us,
    };
    let r = state.report(&c.params, &a, now_us);
    (r.block_us.ceil(), r.rate, flag(r.decreased))
  };
  [a, (rate * 1000.0).floor(), b, (state.block_until_us - now_us).max(0.0).ceil()]
}

/// The calls `part` of `calls` (one hash slot) in one script call.
async fn script_call(
  store: &RedisStore,
  calls: &[Call],
  part: &[usize],
  now_us: Option<f64>,
  lane: &Lane,
) -> Result<Vec<[f64; RESULT]>> {
  let mut keys: Vec<Key> = vec![];
  let mut local: BTreeMap<&str, usize> = BTreeMap::new();
  let mut args: Vec<Value> = vec![now_arg(now_us)];
  for i in part {
    let c = &calls[*i];
    let k = *local.entry(c.key.as_str()).or_insert_with(|| {
      keys.push(Key::from(c.key.as_str()));
      keys.len()
    });
    let p = &c.params;
    args.push(Value::Integer(k as i64));
    for x in [c.op, c.weight, c.ok, c.max_wait_us, if c.throttled { 1.0 } else { 0.0 }, c.block_us] {
      args.push(number(x));
    }
    for x in [c.learned_qps, c.learned_ttl_us, p.max_qps, p.min_qps, p.start_qps, p.inc_abs, p.inc_rel, p.decrease, p.burst, c.sent_ago_us] {
      args.push(number(x));
    }
  }
  let reply = store.run(lane, &SCRIPT, keys, args).await?;
  let mut fields = reply.iter();
  let mut next = || int(fields.next(), "adaptive");
  let out = part.iter().map(|_| Ok([next()?, next()?, next()?, next()?])).collect::<Result<Vec<_>>>()?;
  if fields.next().is_some() {
    return Err(malformed("adaptive"));
  }
  Ok(out)
}

#[cfg(test)]
mod tests {
  use super::*;
  use crate::error::ErrorKind;

  const OK: [f64; WIDTH] = [0.0, 1.0, 0.0, -1.0, 0.0, 0.0, 0.0, 0.0, 100.0, 1.0, 50.0, 0.0, 0.01, 0.1, 0.0, 0.0];

  #[test]
  fn decodes_calls_and_refuses_bad_numbers() {
    let mut two = OK.to_vec();
    two.extend(OK);
    two[WIDTH] = REPORT;
    let calls = Adaptive::decode("1:a1:b", &two).unwrap();
    assert_eq!((calls.len(), calls[1].op), (2, REPORT));
    for (i, bad) in [(0, 3.0), (1, -1.0), (1, 0.5), (3, -2.0), (4, 2.0), (5, -1.0), (8, 0.0), (9, 200.0), (10, 0.5), (12, 11.0), (13, 1.0), (14, -1.0), (8, f64::NAN), (15, -1.0), (15, 0.5)] {
      let mut nums = OK;
      nums[i] = bad;
      assert_eq!(Adaptive::decode("1:a", &nums).unwrap_err().kind, ErrorKind::InvalidArgument, "{i} {bad}");
    }
    assert!(Adaptive::decode("1:a1:b", &OK).is_err());
    assert!(Adaptive::decode("1:a", &OK[..10]).is_err());
  }
}
