//! What every kind's Redis calls share: calls grouped per hash slot (one script call per slot
//! and [`CHUNK`], all slots at once, results put back in call order), script arguments as
//! numbers, the "malformed reply" error, and the message of a call refused for a key of
//! another type ([`WRONG_TYPE`](crate::store::kinds::WRONG_TYPE)).

use super::RedisStore;
use crate::error::{Error, ErrorKind, Result};
use crate::store::kinds::{Failed, Reply};
use fred::prelude::*;
use std::collections::BTreeMap;
use std::future::Future;

/// Calls per script call: a batch is split in chunks of this many per slot, so one script
/// call never runs for long (the JS layer already sends at most this many per batch).
pub const CHUNK: usize = 64;

/// The error of a reply that does not have the shape its script promises; `what` names the
/// kind.
pub fn malformed(what: &str) -> Error {
  Error::new(ErrorKind::Script, format!("malformed {what} reply"))
}

/// An integer field of a reply, as a double.
pub fn int(v: Option<&Value>, what: &str) -> Result<f64> {
  v.and_then(Value::as_i64).map(|x| x as f64).ok_or_else(|| malformed(what))
}

/// A number as a script argument: an integer as such, anything else as its shortest exact
/// decimal string (f64 Display; Lua's `tonumber` reads back the same double).
pub fn number(x: f64) -> Value {
  if x.fract() == 0.0 && x.abs() < 1e15 {
    Value::Integer(x as i64)
  } else {
    Value::String(x.to_string().into())
  }
}

/// The `now_us` argument of a script: the caller's time, or `''` for Redis' clock (`TIME`).
pub fn now_arg(now_us: Option<f64>) -> Value {
  now_us.map(number).unwrap_or_else(|| Value::String("".into()))
}

/// The message of a call refused for a key of another type (never with the key: a name can
/// be a user's data); `what` is the limiter's kind.
pub fn wrong_type_message(what: &str) -> String {
  format!("the key of this {what} holds a value of another type: another writer uses sluice's key prefix")
}

impl RedisStore {
  /// The hash slot of `key` on a cluster; 0 on a standalone server (one group for all).
  pub fn slot(&self, key: &str) -> u16 {
    if self.cluster {
      fred::util::redis_keyslot(key.as_bytes())
    } else {
      0
    }
  }

  /// Calls grouped for script calls, given each call's key: by hash slot, then in chunks of
  /// [`CHUNK`] calls, each group in call order.
  pub fn groups<'k>(&self, keys: impl IntoIterator<Item = &'k str>) -> Vec<Vec<usize>> {
    let mut groups: BTreeMap<(u16, usize), Vec<usize>> = BTreeMap::new();
    for (i, key) in keys.into_iter().enumerate() {
      groups.entry((self.slot(key), i / CHUNK)).or_default().push(i);
    }
    groups.into_values().collect()
  }

  /// Runs `call` once per group (of [`groups`](Self::groups)), all at once, and puts each
  /// call's result back in call order. A group that fails while others succeed (a cluster
  /// master down: only its slots' calls fail) leaves its calls out of `values` and lists them
  /// in `failed`, with the first such error; if every group fails, the first error fails the
  /// whole. `call` gets a group's call indices and answers one result per index; `what` names
  /// the kind.
  pub async fn per_slot<'g, T, F, Fut>(&self, groups: &'g [Vec<usize>], what: &str, call: F) -> Result<Slotted<T>>
  where
    F: FnMut(&'g [usize]) -> Fut,
    Fut: Future<Output = Result<Vec<T>>>,
  {
    let results = futures::future::join_all(groups.iter().map(|g| g.as_slice()).map(call)).await;
    assemble(groups, results, what)
  }
}

/// Puts each group's results back in call order (see [`RedisStore::per_slot`]), for kinds
/// that run their groups themselves (in an order of their own); `results` in group order.
pub fn assemble<T>(groups: &[Vec<usize>], results: Vec<Result<Vec<T>>>, what: &str) -> Result<Slotted<T>> {
  let n = groups.iter().map(Vec::len).sum();
  let mut out: Vec<Option<T>> = (0..n).map(|_| None).collect();
  let mut failed: Vec<u32> = vec![];
  let mut error: Option<Error> = None;
  for (group, result) in groups.iter().zip(results) {
    match result {
      Ok(values) => {
        for (i, value) in group.iter().zip(values) {
          out[*i] = Some(value);
        }
      }
      Err(e) => {
        failed.extend(group.iter().map(|i| *i as u32));
        error.get_or_insert(e);
      }
    }
  }
  let Some(error) = error else {
    let values = out.into_iter().map(|v| v.ok_or_else(|| malformed(what))).collect::<Result<Vec<T>>>()?;
    return Ok(Slotted { values, failed: None });
  };
  if failed.len() == n {
    return Err(error);
  }
  failed.sort_unstable();
  let mut values = Vec::with_capacity(n - failed.len());
  let mut next = failed.iter().peekable();
  for (i, v) in out.into_iter().enumerate() {
    if next.peek().is_some_and(|f| **f as usize == i) {
      next.next();
      continue;
    }
    values.push(v.ok_or_else(|| malformed(what))?);
  }
  Ok(Slotted { values, failed: Some(Failed { calls: failed, error }) })
}

/// What [`RedisStore::per_slot`] answers: the results of the calls that were decided, in call
/// order, and the calls that failed while others were decided.
#[derive(Clone, Debug, PartialEq)]
pub struct Slotted<T> {
  pub values: Vec<T>,
  pub failed: Option<Failed>,
}

impl<T> Slotted<T> {
  /// Every call's result, or the error of the calls that failed (for callers that need all).
  pub fn all(self) -> Result<Vec<T>> {
    match self.failed {
      None => Ok(self.values),
      Some(f) => Err(f.error),
    }
  }

  /// The results mapped to a [`Reply`] (its `failed` set from these).
  pub fn reply(self, numbers: impl FnOnce(Vec<T>) -> Vec<f64>) -> Reply {
    Reply { numbers: numbers(self.values), text: None, failed: self.failed }
  }
}

impl Slotted<(Vec<f64>, Vec<String>)> {
  /// Per call its numbers and strings, as one [`Reply`] (see [`Reply::with_text`]).
  pub fn text_reply(self) -> Reply {
    Reply { failed: self.failed, ..Reply::with_text(self.values) }
  }
}

#[cfg(test)]
mod tests {
  use super::*;

  fn down() -> Error {
    super::super::connect::classify(Some(ErrorKind::StoreUnavailable), "Failed to route command.")
  }

  #[test]
  fn every_group_decided_is_every_result_in_call_order() {
    let groups = vec![vec![0, 2], vec![1, 3]];
    let s = assemble(&groups, vec![Ok(vec!["a", "c"]), Ok(vec!["b", "d"])], "t").unwrap();
    assert_eq!(s, Slotted { values: vec!["a", "b", "c", "d"], failed: None });
  }

  #[test]
  fn a_failed_group_leaves_its_calls_out_and_lists_them() {
    let groups = vec![vec![0, 3], vec![1, 2], vec![4]];
    let results = vec![Ok(vec!["a", "d"]), Err(down()), Ok(vec!["e"])];
    let s = assemble(&groups, results, "t").unwrap();
    assert_eq!(s.values, vec!["a", "d", "e"]);
    assert_eq!(s.failed, Some(Failed { calls: vec![1, 2], error: down() }));
    assert_eq!(s.clone().all(), Err(down()));
    let reply = s.reply(|v| v.iter().map(|x| x.len() as f64).collect());
    assert_eq!(reply.numbers, vec![1.0, 1.0, 1.0]);
    assert_eq!(reply.failed.unwrap().calls, vec![1, 2]);
  }

  #[test]
  fn every_group_failed_is_the_first_error() {
    let timeout = Error::new(ErrorKind::Timeout, "late");
    let r = assemble::<&str>(&[vec![0], vec![1]], vec![Err(timeout.clone()), Err(down())], "t");
    assert_eq!(r, Err(timeout));
  }

  #[test]
  fn a_group_answering_too_few_results_is_malformed() {
    let r = assemble(&[vec![0, 1]], vec![Ok(vec!["a"])], "t");
    assert_eq!(r, Err(malformed("t")));
  }
}
