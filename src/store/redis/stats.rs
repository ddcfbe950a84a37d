//! Limiter statistics on Redis (`lua/stats.lua`): a list of operations, run in order per hash
//! slot (every operation's keys share one slot), all slots at once. Statistics are written in
//! the background, so nothing here is ordered with decisions.

use super::calls::malformed;
use super::script::{lua_script, Script};
use super::{Lane, RedisStore};
use crate::error::{Error, Result};
use crate::store::validate_key;
use fred::prelude::*;
use std::collections::BTreeMap;
use std::sync::LazyLock;

static STATS: LazyLock<Script> = LazyLock::new(|| Script::new(lua_script!("stats")));

/// One operation: its name, keys and arguments (see `lua/stats.lua`).
#[derive(Clone, Debug, PartialEq)]
pub struct StatsOp {
  pub op: String,
  pub keys: Vec<String>,
  pub args: Vec<String>,
}

const OPS: [(&str, usize); 7] =
  [("incr", 1), ("registry", 5), ("del", 1), ("hgetall", 1), ("since", 2), ("lease", 1), ("leases", 1)];

/// Decodes the flat list (one string crosses from Node, not one per part, in the encoding of
/// [`crate::codec`], so no byte of a name is read as structure): per operation
/// `<op> <key count> <key>... <arg count> <arg>...`.
pub fn decode_stats(text: &str) -> Result<Vec<StatsOp>> {
  let flat: Vec<&str> = crate::codec::decode(text)?;
  let malformed = || Error::argument("malformed statistics call");
  let mut ops = vec![];
  let mut i = 0;
  let count = |s: Option<&&str>| s.and_then(|s| s.parse::<usize>().ok()).ok_or_else(malformed);
  while i < flat.len() {
    let op = flat[i].to_string();
    let nkeys = count(flat.get(i + 1))?;
    if !OPS.iter().any(|(name, keys)| *name == op && *keys == nkeys) {
      return Err(malformed());
    }
    let keys: Vec<String> =
      flat.get(i + 2..i + 2 + nkeys).ok_or_else(malformed)?.iter().map(|k| k.to_string()).collect();
    for key in &keys {
      validate_key(key)?;
    }
    let nargs = count(flat.get(i + 2 + nkeys))?;
    let start = i + 3 + nkeys;
    let args: Vec<String> =
      flat.get(start..start + nargs).ok_or_else(malformed)?.iter().map(|a| a.to_string()).collect();
    ops.push(StatsOp { op, keys, args });
    i = start + nargs;
  }
  Ok(ops)
}

fn text(v: &Value) -> Option<String> {
  match v {
    Value::String(s) => Some(s.to_string()),
    Value::Bytes(b) => Some(String::from_utf8_lossy(b).into_owned()),
    Value::Integer(x) => Some(x.to_string()),
    Value::Double(x) => Some(x.to_string()),
    _ => None,
  }
}

impl RedisStore {
  /// Runs `ops`; per operation its reply as strings (empty for writes).
  pub async fn stats_ops(&self, ops: &[StatsOp], lane: &Lane) -> Result<Vec<Vec<String>>> {
    let groups = self.groups(ops.iter().map(|op| op.keys[0].as_str()));
    self.per_slot(&groups, "statistics", |group| self.stats_call(ops, group, lane)).await?.all()
  }

  async fn stats_call(&self, ops: &[StatsOp], group: &[usize], lane: &Lane) -> Result<Vec<Vec<String>>> {
    let bad = || malformed("statistics");
    let mut keys: Vec<Key> = vec![];
    let mut local: BTreeMap<&str, usize> = BTreeMap::new();
    let mut args: Vec<Value> = vec![];
    for i in group {
      let op = &ops[*i];
      args.push(Value::String(op.op.as_str().into()));
      args.push(Value::Integer(op.keys.len() as i64));
      for key in &op.keys {
        let k = *local.entry(key.as_str()).or_insert_with(|| {
          keys.push(Key::from(key.as_str()));
          keys.len()
        });
        args.push(Value::Integer(k as i64));
      }
      args.push(Value::Integer(op.args.len() as i64));
      args.extend(op.args.iter().map(|a| Value::String(a.as_str().into())));
    }
    let reply = self.run(lane, &STATS, keys, args).await?;
    if reply.len() != group.len() {
      return Err(bad());
    }
    reply
      .iter()
      .map(|r| match r {
        Value::Array(items) => items.iter().map(|v| text(v).ok_or_else(bad)).collect(),
        Value::Null => Ok(vec![]),
        _ => Err(bad()),
      })
      .collect()
  }
}

#[cfg(test)]
mod tests {
  use super::*;

  fn strings(xs: &[&str]) -> Vec<String> {
    xs.iter().map(|s| s.to_string()).collect()
  }

  fn text(xs: &[&str]) -> String {
    crate::codec::encode(xs)
  }

  #[test]
  fn decodes_operations_and_rejects_malformed_ones() {
    let ops =
      decode_stats(&text(&["incr", "1", "k", "3", "60000", "admitted", "2", "hgetall", "1", "k", "0"])).unwrap();
    assert_eq!(ops.len(), 2);
    assert_eq!(ops[0].args, strings(&["60000", "admitted", "2"]));
    assert_eq!(ops[1].op, "hgetall");
    for bad in [
      vec!["flushall", "0", "0"],
      vec!["del", "2", "k", "j", "0"],
      vec!["incr", "2", "k", "j", "0"],
      vec!["incr", "1", "k", "5", "1"],
      vec!["incr", "1", "", "0"],
      vec!["incr", "x", "k", "0"],
      vec!["incr"],
    ] {
      assert!(decode_stats(&text(&bad)).is_err(), "{bad:?}");
    }
  }

  #[test]
  fn issue_24_a_name_holding_the_old_separators_stays_one_argument() {
    let member = "pacer:x\n1\n\nincr\n1\nvictim\n3\n1,,0";
    let ops = decode_stats(&text(&[
      "registry", "5", "z", "h", "p", "q", "s", "7", "60000", "10000", "8000", "2500", member, "1", "",
    ]))
    .unwrap();
    assert_eq!(ops.len(), 1);
    assert_eq!(ops[0].args, strings(&["60000", "10000", "8000", "2500", member, "1", ""]));
    assert!(decode_stats("registry\n2\nz\nh\n0").is_err(), "the old newline encoding is refused");
  }
}
