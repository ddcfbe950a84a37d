//! The concurrent kind (`ConcurrentLimiter`, a distributed semaphore with a wait queue):
//! operations on leases and waiters, decided in order. Script `lua/concurrent.lua`; per
//! limiter key `<key>:h` (holders), `<key>:q` (queue), `<key>:i` (info) and the grant channel
//! `<key>:wake`.
//!
//! A call, as JS sends it: `text` = per operation its limiter key then its lease or waiter id
//! (in the encoding of `crate::codec`), `nums` = 5 per operation: `op` ([`ACQUIRE`],
//! [`RELEASE`], [`EXTEND`], [`POLL`], [`CANCEL`], [`STATS`]), `limit, lock_us, wait_us,
//! ttl_ms`. Results: [`CONCURRENT_RESULT_FIELDS`] numbers per operation (its reply,
//! zero-padded; see `core::concurrent::Reply::values`), the first
//! [`WRONG_TYPE`](super::WRONG_TYPE) when a key of its limiter holds a value of another type
//! (Redis: nothing applied); and, as text, the slots the call handed to waiters,
//! `"<waiter id> <token>"` each (on Redis, also published on `<key>:wake`).

use super::{Kind, Reply};
use crate::core::concurrent::{Reply as OpReply, Request, Semaphore};
use crate::error::{Error, Result};
use crate::store::memory::MemoryStore;
use crate::store::redis::calls::{malformed, now_arg, number, Slotted};
use crate::store::redis::script::{lua_script, Script};
use crate::store::redis::{Lane, RedisStore};
use crate::store::{integer_in, validate_key, MAX_INTERVAL_US, MAX_LIMIT};
use fred::prelude::*;
use std::sync::LazyLock;

static CONCURRENT: LazyLock<Script> = LazyLock::new(|| Script::new(lua_script!("concurrent")));

/// The concurrent kind (see the module docs).
pub struct Concurrent;

pub const ACQUIRE: f64 = 1.0;
pub const RELEASE: f64 = 2.0;
pub const EXTEND: f64 = 3.0;
pub const POLL: f64 = 4.0;
pub const CANCEL: f64 = 5.0;
pub const STATS: f64 = 6.0;
/// Numbers per operation in a result (stats has the most).
pub const CONCURRENT_RESULT_FIELDS: usize = 9;
/// Numbers in the script's reply to every operation but stats.
pub(crate) const REPLY_FIELDS: usize = 4;
/// `lua/concurrent.lua`'s packing of a limiter index and a parameter set into one number (with
/// the op: `(limiter * SET_SHIFT + set) * 8 + op`).
pub(crate) const SET_SHIFT: usize = 1024;

/// One operation: limiter key, lease or waiter id, op, `[limit, lock_us, wait_us, ttl_ms]`.
pub type ConcurrentOp = (String, String, f64, [f64; 4]);

/// Operations decoded and validated, with what each asks of the core.
#[derive(Clone, Debug, PartialEq)]
pub struct ConcurrentCall {
  pub ops: Vec<ConcurrentOp>,
  requests: Vec<(Request, f64)>,
}

/// Decodes and validates one concurrent-limiter operation: `op`, the lease or waiter `id`,
/// and `[limit, lock_us, wait_us, ttl_ms]`; the core's request and the TTL, ms.
pub fn decode_concurrent(op: f64, id: &str, nums: &[f64]) -> Result<(Request, f64)> {
  if id.is_empty() || id.len() > 192 || id.contains(|c: char| c.is_whitespace()) {
    return Err(Error::argument("lease id must be 1..=192 bytes without whitespace"));
  }
  // release and extend may name a lease (`id|token|acquired_us`); the others take a plain id
  if !matches!(op, RELEASE | EXTEND) && id.contains('|') {
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
    ACQUIRE => Request::Acquire { limit, lock_us, wait_us },
    RELEASE => Request::Release { limit },
    EXTEND => Request::Extend { lock_us },
    POLL => Request::Poll { limit },
    CANCEL => Request::Cancel { limit },
    STATS => Request::Stats,
    _ => return Err(Error::argument(format!("unknown concurrent op {op}"))),
  };
  Ok((request, ttl_ms))
}

/// Decodes operations from two lists in the encoding of `crate::codec`, `keys` and `ids`, and
/// 5 numbers per operation (see the module docs).
pub fn decode_ops(keys: &str, ids: &str, nums: &[f64]) -> Result<ConcurrentCall> {
  let (mut keys, mut ids) = (crate::codec::parts(keys), crate::codec::parts(ids));
  decode_with(|| (keys.next(), ids.next()), nums)
}

type Part<'a> = Option<Result<&'a str>>;

fn decode_with<'a>(mut next: impl FnMut() -> (Part<'a>, Part<'a>), nums: &[f64]) -> Result<ConcurrentCall> {
  let malformed = || Error::argument("malformed concurrent batch");
  let mut call = ConcurrentCall { ops: vec![], requests: vec![] };
  for f in nums.chunks(5) {
    let ((Some(key), Some(id)), [op, limit, lock_us, wait_us, ttl_ms]) = (next(), f) else {
      return Err(malformed());
    };
    let (key, id) = (key?, id?);
    validate_key(key)?;
    let nums = [*limit, *lock_us, *wait_us, *ttl_ms];
    call.requests.push(decode_concurrent(*op, id, &nums)?);
    call.ops.push((key.to_owned(), id.to_owned(), *op, nums));
  }
  if !matches!(next(), (None, None)) {
    return Err(malformed());
  }
  Ok(call)
}

/// A grant as JS reads it: `"<waiter id> <token>"`.
pub fn grant_text(id: &str, token: f64) -> String {
  format!("{id} {token}")
}

impl Kind for Concurrent {
  type Call = ConcurrentCall;
  type State = Box<Semaphore>;
  const OPS: &'static [(&'static str, f64)] = &[
    ("acquire", ACQUIRE),
    ("release", RELEASE),
    ("extend", EXTEND),
    ("poll", POLL),
    ("cancel", CANCEL),
    ("stats", STATS),
  ];
  const RESULTS: &'static [(&'static str, &'static [&'static str])] = &[
    ("lease", &["status", "token", "earliest_expiry_us", "now_us"]),
    ("done", &["ok"]),
    (
      "stats",
      &["held", "held_us", "immediate", "waited", "wait_us", "overages", "reclaimed", "current", "waiters"],
    ),
  ];

  /// `text` holds each operation's key then its id.
  fn decode(text: &str, nums: &[f64]) -> Result<ConcurrentCall> {
    let mut parts = crate::codec::parts(text);
    decode_with(|| (parts.next(), parts.next()), nums)
  }

  fn memory(store: &MemoryStore, call: &ConcurrentCall, now_us: f64) -> Result<Reply> {
    let ops = call.ops.iter().zip(&call.requests).map(|((key, id, ..), (request, ttl_ms))| (key, id, *request, *ttl_ms));
    let replies = store.step_keyed::<Concurrent, _, _>(ops, now_us, |op| op.0, |op, semaphore, expires_us| {
      apply(semaphore, op.1, op.2, op.3, expires_us, now_us)
    });
    Ok(Reply::with_text(replies.into_iter().map(|mut reply| {
      reply.values.resize(CONCURRENT_RESULT_FIELDS, 0.0);
      (reply.values, reply.grants.iter().map(|(id, token)| grant_text(id, *token)).collect())
    })))
  }

  async fn redis(store: &RedisStore, call: &ConcurrentCall, now_us: Option<f64>, lane: &Lane) -> Result<Reply> {
    Ok(store.concurrent_batch(&call.ops, now_us, lane).await?.text_reply())
  }
}

/// One operation on a semaphore whose state expires at `expires_us`: its reply, and the
/// state's expiry after it (`ttl_ms` from now when the operation changed it).
fn apply(semaphore: &mut Semaphore, id: &str, request: Request, ttl_ms: f64, expires_us: f64, now_us: f64) -> (OpReply, f64) {
  let reply = semaphore.apply(id, request, now_us);
  let expires_us = if reply.changed { now_us + ttl_ms * 1000.0 } else { expires_us };
  (reply, expires_us)
}

impl MemoryStore {
  /// One concurrent-limiter operation.
  pub fn concurrent(&self, key: &str, id: &str, request: Request, ttl_ms: f64, now_us: f64) -> OpReply {
    let mut inner = self.lock();
    inner.step_key::<Concurrent, _>(key, now_us, |semaphore, expires_us| {
      apply(semaphore, id, request, ttl_ms, expires_us, now_us)
    })
  }
}

impl RedisStore {
  /// Several concurrent-limiter operations, decided in order: one script call per hash slot
  /// (on a standalone server, one for all), on the connection of `lane`. Per operation: its
  /// [`CONCURRENT_RESULT_FIELDS`] numbers, zero-padded, and the grants its script call made
  /// (`"<waiter id> <token>"`, also published), given with the first operation of the call.
  /// A slot's call that fails while others are decided (its master down) fails its
  /// operations only (see [`RedisStore::per_slot`]).
  pub async fn concurrent_batch(
    &self,
    ops: &[ConcurrentOp],
    now_us: Option<f64>,
    lane: &Lane,
  ) -> Result<Slotted<(Vec<f64>, Vec<String>)>> {
    let groups = self.groups(ops.iter().map(|(key, ..)| key.as_str()));
    self
      .per_slot(&groups, "concurrent", |members| async move {
        let (replies, mut grants) = self.concurrent_call(ops, members, now_us, lane).await?;
        Ok(
          replies
            .into_iter()
            .map(|mut values| {
              values.resize(CONCURRENT_RESULT_FIELDS, 0.0);
              (values, std::mem::take(&mut grants))
            })
            .collect(),
        )
      })
      .await
  }

  async fn concurrent_call(
    &self,
    ops: &[ConcurrentOp],
    members: &[usize],
    now_us: Option<f64>,
    lane: &Lane,
  ) -> Result<(Vec<Vec<f64>>, Vec<String>)> {
    // limiters and parameter sets are numbered from 1, in order of first use
    fn index_of<T: PartialEq + Copy>(list: &mut Vec<T>, item: T) -> usize {
      match list.iter().position(|x| *x == item) {
        Some(i) => i + 1,
        None => {
          list.push(item);
          list.len()
        }
      }
    }
    let mut limiters: Vec<&str> = vec![];
    let mut sets: Vec<[f64; 4]> = vec![];
    let mut encoded: Vec<Value> = Vec::with_capacity(members.len() * 2);
    for i in members {
      let (key, id, op, nums) = &ops[*i];
      let g = index_of(&mut limiters, key.as_str());
      let set = index_of(&mut sets, *nums);
      encoded.push(Value::Integer(((g * SET_SHIFT + set) * 8) as i64 + *op as i64));
      encoded.push(Value::String(id.as_str().into()));
    }
    let keys: Vec<Key> =
      limiters.iter().flat_map(|k| ["h", "q", "i"].map(|part| Key::from(format!("{k}:{part}")))).collect();
    let mut args = vec![now_arg(now_us), number(limiters.len() as f64)];
    args.extend(limiters.iter().map(|k| Value::String(format!("{k}:wake").into())));
    args.push(number(sets.len() as f64));
    args.extend(sets.iter().flatten().map(|x| number(*x)));
    args.extend(encoded);
    let reply = self.run(lane, &CONCURRENT, keys, args).await?;
    let mut fields = reply.iter();
    let replies = members
      .iter()
      .map(|i| {
        let width = if ops[*i].2 == STATS { CONCURRENT_RESULT_FIELDS } else { REPLY_FIELDS };
        (0..width)
          .map(|_| fields.next().and_then(Value::as_i64).map(|x| x as f64).ok_or_else(|| malformed("concurrent")))
          .collect()
      })
      .collect::<Result<Vec<Vec<f64>>>>()?;
    let grants =
      fields.map(|v| v.as_string().ok_or_else(|| malformed("concurrent"))).collect::<Result<Vec<String>>>()?;
    Ok((replies, grants))
  }
}

#[cfg(test)]
mod tests {
  use super::*;

  #[test]
  fn decodes_operations_and_answers_grants_as_text() {
    let nums = [ACQUIRE, 1.0, 1e6, 1e6, 1000.0, ACQUIRE, 1.0, 1e6, 1e6, 1000.0];
    let call = Concurrent::decode(&crate::codec::encode(&["k", "a", "k", "b"]), &nums).unwrap();
    assert_eq!(call, decode_ops("1:k1:k", "1:a1:b", &nums).unwrap());
    let store = MemoryStore::new();
    let reply = Concurrent::memory(&store, &call, 1e6).unwrap();
    assert_eq!(reply.numbers.len(), 2 * CONCURRENT_RESULT_FIELDS);
    assert_eq!((reply.numbers[0], reply.numbers[9]), (1.0, 0.0), "a took the slot, b waits");
    let lease = format!("a|{}|{}", reply.numbers[1], reply.numbers[3]);
    let release = Concurrent::decode(&crate::codec::encode(&["k", &lease]), &[RELEASE, 1.0, 1e6, 0.0, 1000.0]);
    let reply = Concurrent::memory(&store, &release.unwrap(), 1.5e6).unwrap();
    assert_eq!(crate::codec::decode(reply.text.as_deref().unwrap_or("")).unwrap().len(), 1, "b was granted it");
    for bad in [&nums[..4], &[7.0, 1.0, 1e6, 1e6, 1000.0]] {
      assert!(Concurrent::decode("1:k1:a", bad).is_err());
    }
    assert!(Concurrent::decode("1:k", &nums[..5]).is_err(), "a key without its id");
  }
}
