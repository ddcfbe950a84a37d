//! The counting limiters' kind (`TokenBucketLimiter`/fixed window, `WindowLimiter`,
//! `LeakyBucketLimiter`/`PointsLimiter`): calls of any of their algorithms, decided in order in
//! one store call. Script `lua/limit.lua`; one string per limiter key (16 or 24 bytes).
//!
//! A call, as JS sends it: `text` = one key per entry (in the encoding of `crate::codec`),
//! `nums` = [`LIMIT_FIELDS`] numbers per entry: `kind, weight, limit, interval_us,
//! max_wait_us`, where `kind` is [`BUCKET`], [`WINDOW`] or [`LEAKY`] and `max_wait_us` ≥ 0
//! asks for a take, [`PEEK`] for a take's answer without the charge, [`ADJUST`] for an
//! unconditional charge (weight may be negative), [`RESET`] to delete the key, [`BLOCK`] to
//! admit nobody for `weight` µs, [`GROUP`] then [`MEMBER`]s for an all-or-nothing take,
//! [`BACKOFF`] / [`CONTINUE`] (a window's) to count every call and double (restart) the window
//! past the limit, [`TALLY`] (a window's, right after a call) to count that call's refusal,
//! [`THROTTLE`] (a window's: @nestjs/throttler's count and block, the block's µs as weight).
//! Results: [`LIMIT_RESULT_FIELDS`] numbers per entry: `allowed (0/1), remaining,
//! retry_after_us, reset_after_us`; `remaining` is [`WRONG_TYPE`](super::WRONG_TYPE) when the
//! key holds a value of another type (Redis).
//!
//! An all-or-nothing group (an HTTP door's several windows): an entry [`GROUP`] and the
//! [`MEMBER`] entries right after it, each its own key (distinct), kind, limit and interval,
//! one weight. Every member is first peeked (a take's answer with max wait 0); only if all
//! admit are all taken, else nothing is charged and each member answers its peek (a window
//! with room: allowed, its remaining without the charge). One script call: its keys must
//! share a hash slot.
//!
//! A tally (an HTTP door's `ban`: refusals counted fleet-wide in the decision's own script
//! call): an entry [`TALLY`] right after a call or a group, on a window key of its own in the
//! same hash slot. It is an unconditional charge of its weight when that call (any member of
//! that group) was refused, else a peek: its `remaining` tells the refusals counted in its
//! window (`limit - remaining`), which opens at the first one.
//!
//! The io-buffer step (`memory_io`): in, the entry's five numbers then `nowUs` (-1 = the
//! system clock); out, its four result numbers.

use super::{memory_now, Kind, Reply};
use crate::core::limit::{self, Decision, Op, Params, Save, State, MAX_DELAY_US};
use crate::error::{Error, Result};
use crate::store::memory::{MemoryStore, Write};
use crate::store::redis::calls::{int, malformed, now_arg, number, Slotted, CHUNK};
use crate::store::redis::script::{lua_script, Script};
use crate::store::redis::{Lane, RedisStore};
use crate::store::{integer_in, validate_key, MAX_INTERVAL_US, MAX_LIMIT};
use fred::prelude::*;
use std::collections::{BTreeMap, HashMap};
use std::sync::LazyLock;

static LIMITER: LazyLock<Script> = LazyLock::new(|| Script::new(lua_script!("limit")));

/// The counting limiters' kind (see the module docs).
pub struct Limit;

pub const LIMIT_FIELDS: usize = 5;
pub const LIMIT_RESULT_FIELDS: usize = 4;
/// `kind` code of the fixed window (calendar-aligned bucket).
pub const BUCKET: f64 = limit::Kind::Bucket as u8 as f64;
/// `kind` code of the window that starts at its first call.
pub const WINDOW: f64 = limit::Kind::Window as u8 as f64;
/// `kind` code of the leaky bucket (also the points limiter's).
pub const LEAKY: f64 = limit::Kind::Leaky as u8 as f64;
/// `max_wait_us` code of an unconditional charge.
pub const ADJUST: f64 = -1.0;
/// `max_wait_us` code of a reset.
pub const RESET: f64 = -2.0;
/// `max_wait_us` code of a peek.
pub const PEEK: f64 = -3.0;
/// `max_wait_us` code of a block (the weight field holds its duration, µs).
pub const BLOCK: f64 = -4.0;
/// `max_wait_us` code of the first member of an all-or-nothing group (a take, max wait 0).
pub const GROUP: f64 = -5.0;
/// `max_wait_us` code of a further member of the group opened just before.
pub const MEMBER: f64 = -6.0;
/// `max_wait_us` code of a backoff count (window only, weight ≥ 1: see `limit::Op::Backoff`),
/// doubling past the limit.
pub const BACKOFF: f64 = -7.0;
/// `max_wait_us` code of a backoff count that restarts one interval past the limit.
pub const CONTINUE: f64 = -8.0;
/// `max_wait_us` code of a tally of the refusal of the call (group) just before it (a window's:
/// charged when that call was refused, else peeked).
pub const TALLY: f64 = -9.0;
/// `max_wait_us` code of a throttle (a window's, @nestjs/throttler's storage: see
/// `limit::Op::Throttle`; the weight field holds the block's duration, µs, ≥ 0).
pub const THROTTLE: f64 = -10.0;
/// Most members of a group (they go in one script call).
pub const MAX_GROUP: usize = 64;

/// What one entry does.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Action {
  /// One call of the core's step (a block's duration is also the entry's weight, as sent).
  Step(Op),
  /// A take (max wait 0) of an all-or-nothing group; `opens`: its first member.
  Group {
    opens: bool,
  },
  /// The refusal of the call (or group) just before it counted: an adjust when it was refused,
  /// else a peek.
  Tally,
}

impl Action {
  /// The core's operation of the entry decided alone (a group member's is a take).
  pub fn op(self) -> Op {
    match self {
      Action::Step(op) => op,
      Action::Group { .. } => Op::Take { max_wait_us: 0.0 },
      Action::Tally => Op::Peek,
    }
  }
}

#[derive(Clone, Debug, PartialEq)]
pub struct LimitEntry {
  /// Index into [`LimitBatch::keys`].
  pub key: usize,
  pub kind: limit::Kind,
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
    check_groups(&batch)?;
    Ok(batch)
  }
}

/// The entries of `batch` grouped for deciding: each all-or-nothing group as one range (its
/// members), every other entry alone; a tally with the call (group) before it.
pub fn units(batch: &LimitBatch) -> impl Iterator<Item = std::ops::Range<usize>> + '_ {
  let mut i = 0;
  std::iter::from_fn(move || {
    let start = i;
    if start >= batch.entries.len() {
      return None;
    }
    i += 1;
    if batch.entries[start].action == (Action::Group { opens: true }) {
      while batch.entries.get(i).is_some_and(|e| e.action == Action::Group { opens: false }) {
        i += 1;
      }
    }
    // a tally belongs to the call (group) before it: decided after it, in its script call
    if start < i && batch.entries[start].action != Action::Tally && batch.entries.get(i).is_some_and(|e| e.action == Action::Tally) {
      i += 1;
    }
    Some(start..i)
  })
}

/// A group opens before its members, holds distinct keys, one weight, at most [`MAX_GROUP`];
/// a tally follows a take, a backoff count or a group, on a key of its own.
fn check_groups(batch: &LimitBatch) -> Result<()> {
  for unit in units(batch) {
    let mut members = &batch.entries[unit];
    if members[0].action == (Action::Group { opens: false }) {
      return Err(Error::argument("malformed limiter batch: a group member outside a group"));
    }
    if let Some((last, rest)) = members.split_last().filter(|(l, _)| l.action == Action::Tally) {
      let counted = rest.first().map(|e| e.action);
      if !matches!(counted, Some(Action::Group { .. } | Action::Step(Op::Take { .. } | Op::Backoff { .. }))) {
        return Err(Error::argument("malformed limiter batch: a tally follows a take or a group"));
      }
      if rest.iter().any(|e| e.key == last.key) {
        return Err(Error::argument("malformed limiter batch: a tally counts on a key of its own"));
      }
      members = rest;
    }
    if members.len() > MAX_GROUP {
      return Err(Error::argument(format!("a group holds at most {MAX_GROUP} members")));
    }
    for (i, m) in members.iter().enumerate().skip(1) {
      if m.weight != members[0].weight {
        return Err(Error::argument("malformed limiter batch: a group's members have one weight"));
      }
      if members[..i].iter().any(|o| o.key == m.key) {
        return Err(Error::argument("malformed limiter batch: a group names a key twice"));
      }
    }
  }
  Ok(())
}

/// Decodes and validates one entry's [`LIMIT_FIELDS`] numbers.
pub fn decode_entry(f: &[f64]) -> Result<(limit::Kind, Params, f64, Action)> {
  let kind = limit::Kind::from_code(f[0]).ok_or_else(|| Error::argument("malformed limiter call: bad kind"))?;
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
    Action::Step(Op::Reset)
  } else if max_wait_us == PEEK {
    Action::Step(Op::Peek)
  } else if max_wait_us == BLOCK {
    if !integer_in(weight, 1.0, MAX_INTERVAL_US) {
      return Err(Error::argument(format!("a block must last whole µs in [1, 10 years], got {weight}")));
    }
    return Ok((kind, Params { limit, interval_us }, weight, Action::Step(Op::Block { us: weight })));
  } else if max_wait_us == BACKOFF || max_wait_us == CONTINUE {
    if kind != limit::Kind::Window {
      return Err(Error::argument("malformed limiter call: a backoff count is a window's"));
    }
    if !integer_in(weight, 1.0, MAX_LIMIT) {
      return Err(Error::argument(format!("a backoff count's weight must be an integer in [1, {MAX_LIMIT}]")));
    }
    let op = Op::Backoff { doubling: max_wait_us == BACKOFF };
    return Ok((kind, Params { limit, interval_us }, weight, Action::Step(op)));
  } else if max_wait_us == THROTTLE {
    if kind != limit::Kind::Window {
      return Err(Error::argument("malformed limiter call: a throttle is a window's"));
    }
    if !integer_in(weight, 0.0, MAX_INTERVAL_US) {
      return Err(Error::argument(format!("a throttle's block must last whole µs in [0, 10 years], got {weight}")));
    }
    return Ok((kind, Params { limit, interval_us }, weight, Action::Step(Op::Throttle { block_us: weight })));
  } else if max_wait_us == GROUP || max_wait_us == MEMBER {
    Action::Group { opens: max_wait_us == GROUP }
  } else if max_wait_us == TALLY {
    if kind != limit::Kind::Window {
      return Err(Error::argument("malformed limiter call: a tally is a window's"));
    }
    Action::Tally
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

/// Flattens decisions for the JS layer.
pub fn encode_limit_decisions(decisions: &[Decision]) -> Vec<f64> {
  let mut out = Vec::with_capacity(decisions.len() * LIMIT_RESULT_FIELDS);
  for d in decisions {
    out.extend([if d.allowed { 1.0 } else { 0.0 }, d.remaining, d.retry_after_us, d.reset_after_us]);
  }
  out
}

impl Kind for Limit {
  type Call = LimitBatch;
  type State = State;
  const OPS: &'static [(&'static str, f64)] = &[
    ("bucket", BUCKET),
    ("window", WINDOW),
    ("leaky", LEAKY),
    ("adjust", ADJUST),
    ("reset", RESET),
    ("peek", PEEK),
    ("block", BLOCK),
    ("group", GROUP),
    ("member", MEMBER),
    ("backoff", BACKOFF),
    ("continue", CONTINUE),
    ("tally", TALLY),
    ("throttle", THROTTLE),
  ];
  const RESULTS: &'static [(&'static str, &'static [&'static str])] =
    &[("entry", &["allowed", "remaining", "retry_after_us", "reset_after_us"])];

  fn decode(text: &str, nums: &[f64]) -> Result<LimitBatch> {
    LimitBatch::decode(text, nums)
  }

  fn memory(store: &MemoryStore, batch: &LimitBatch, now_us: f64) -> Result<Reply> {
    Ok(Reply::numbers(encode_limit_decisions(&store.limit_batch(batch, now_us))))
  }

  async fn redis(store: &RedisStore, batch: &LimitBatch, now_us: Option<f64>, lane: &Lane) -> Result<Reply> {
    Ok(store.limit_batch(batch, now_us, lane).await?.reply(|v| encode_limit_decisions(&v)))
  }

  fn memory_io(store: &MemoryStore, id: usize, io: &mut [f64]) -> Result<()> {
    let (kind, params, weight, action) = decode_entry(&io[..LIMIT_FIELDS])?;
    let entry = LimitEntry { key: 0, kind, params, weight, action };
    let now_us = memory_now(io[5])?;
    let d = store.step_id::<Limit, _>(id, now_us, |state, expires_us| decide(&entry, action.op(), state, expires_us, now_us))?;
    io[..4].copy_from_slice(&[if d.allowed { 1.0 } else { 0.0 }, d.remaining, d.retry_after_us, d.reset_after_us]);
    Ok(())
  }
}

/// One entry's call `op` on its key's live state (expiring at `expires_us`): the core's
/// decision, and what its save does to the key.
fn decide(e: &LimitEntry, op: Op, state: Option<&State>, expires_us: f64, now_us: f64) -> (Decision, Write<State>) {
  let outcome = limit::step(e.kind, state.copied(), &e.params, e.weight, op, now_us);
  let write = match outcome.save {
    Save::Keep => Write::Keep,
    Save::Set(next, ttl_ms) => Write::Until(next, now_us + ttl_ms * 1000.0),
    Save::AtLeast(next, ttl_ms) => Write::Until(next, expires_us.max(now_us + ttl_ms * 1000.0)),
    Save::Delete => Write::Clear,
  };
  (outcome.decision, write)
}

impl MemoryStore {
  /// Rate-limiter calls, in order, under one lock acquisition; a group all or nothing.
  pub fn limit_batch(&self, batch: &LimitBatch, now_us: f64) -> Vec<Decision> {
    let mut inner = self.lock();
    let ids: Vec<usize> = batch.keys.iter().map(|k| inner.intern(k)).collect();
    let mut out = Vec::with_capacity(batch.entries.len());
    let mut run = |e: &LimitEntry, op: Op| {
      inner.step_id::<Limit, _>(ids[e.key], now_us, |state, expires_us| decide(e, op, state, expires_us, now_us))
    };
    for unit in units(batch) {
      let mut members = &batch.entries[unit];
      let tally = members.split_last().filter(|(l, _)| l.action == Action::Tally);
      if let Some((_, rest)) = tally {
        members = rest;
      }
      let from = out.len();
      if members.len() == 1 {
        out.push(run(&members[0], members[0].action.op()));
      } else {
        // every member peeked; all taken only if all admit
        let peeks: Vec<Decision> = members.iter().map(|e| run(e, Op::Peek)).collect();
        if peeks.iter().all(|d| d.allowed) {
          out.extend(members.iter().map(|e| run(e, Op::Take { max_wait_us: 0.0 })));
        } else {
          out.extend(peeks);
        }
      }
      if let Some((t, _)) = tally {
        let refused = out[from..].iter().any(|d| !d.allowed);
        out.push(run(t, if refused { Op::Adjust } else { Op::Peek }));
      }
    }
    out
  }
}

impl RedisStore {
  /// Decides a batch of rate-limiter calls; one script call per hash slot (and chunk), an
  /// all-or-nothing group always within one (its keys must share a slot).
  pub async fn limit_batch(&self, batch: &LimitBatch, now_us: Option<f64>, lane: &Lane) -> Result<Slotted<Decision>> {
    let mut groups: BTreeMap<(u16, usize), Vec<usize>> = BTreeMap::new();
    for unit in units(batch) {
      let (first, members) = (unit.start, &batch.entries[unit.clone()]);
      let slot = self.slot(&batch.keys[members[0].key]);
      if members.iter().any(|m| self.slot(&batch.keys[m.key]) != slot) {
        return Err(Error::argument("the keys of an all-or-nothing limiter group must share a hash slot"));
      }
      groups.entry((slot, first / CHUNK)).or_default().extend(unit);
    }
    let groups: Vec<Vec<usize>> = groups.into_values().collect();
    self.per_slot(&groups, "limiter", |entries| self.limit_call(batch, entries, now_us, lane)).await
  }

  async fn limit_call(
    &self,
    batch: &LimitBatch,
    entries: &[usize],
    now_us: Option<f64>,
    lane: &Lane,
  ) -> Result<Vec<Decision>> {
    let mut keys: Vec<Key> = vec![];
    let mut local: BTreeMap<usize, usize> = BTreeMap::new();
    let mut args: Vec<Value> = Vec::with_capacity(1 + entries.len() * 5);
    args.push(now_arg(now_us));
    for e in entries {
      let entry = &batch.entries[*e];
      let k = *local.entry(entry.key).or_insert_with(|| {
        keys.push(Key::from(batch.keys[entry.key].as_str()));
        keys.len()
      });
      let max_wait = match entry.action {
        Action::Step(Op::Reset) => RESET,
        Action::Step(Op::Block { .. }) => BLOCK,
        Action::Step(Op::Adjust) => ADJUST,
        Action::Step(Op::Peek) => PEEK,
        Action::Step(Op::Backoff { doubling: true }) => BACKOFF,
        Action::Step(Op::Backoff { doubling: false }) => CONTINUE,
        Action::Step(Op::Throttle { .. }) => THROTTLE,
        Action::Step(Op::Take { max_wait_us }) => max_wait_us,
        Action::Group { opens: true } => GROUP,
        Action::Group { opens: false } => MEMBER,
        Action::Tally => TALLY,
      };
      args.extend([
        Value::Integer((k * 4 + entry.kind as usize) as i64),
        number(entry.weight),
        number(entry.params.limit),
        number(entry.params.interval_us),
        number(max_wait),
      ]);
    }
    let reply = self.run(lane, &LIMITER, keys, args).await?;
    if reply.len() != entries.len() * LIMIT_RESULT_FIELDS {
      return Err(malformed("limiter"));
    }
    // a key of another type: remaining is WRONG_TYPE, passed on as is
    reply
      .chunks(LIMIT_RESULT_FIELDS)
      .map(|f| {
        let int = |i: usize| int(f.get(i), "limiter");
        Ok(Decision { allowed: int(0)? == 1.0, remaining: int(1)?, retry_after_us: int(2)?, reset_after_us: int(3)? })
      })
      .collect()
  }
}

#[cfg(test)]
#[path = "limit_tests.rs"]
mod tests;
