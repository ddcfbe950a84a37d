//! Fair-tenant assignments on Redis: `lua/fair.lua`, one script call per hash slot (up to
//! [`CHUNK`] calls), all slots at once; calls on one key stay in order.

use super::script::FAIR;
use super::{number, Lane, RedisStore, CHUNK};
use crate::error::{Error, ErrorKind, Result};
use crate::store::fair::{FairCall, FairMode};
use fred::prelude::*;
use std::collections::BTreeMap;

fn malformed() -> Error {
  Error::new(ErrorKind::Script, "malformed fair reply")
}

impl RedisStore {
  /// Per call, the tenant's count in each rule's window, this job included; a call whose key
  /// holds a value of another type (nothing applied) has [`WRONG_TYPE`](super::WRONG_TYPE)
  /// as its first count, then zeros.
  pub async fn fair_batch(&self, calls: &[FairCall], now_us: Option<f64>, lane: &Lane) -> Result<Vec<Vec<f64>>> {
    let mut groups: BTreeMap<(u16, usize), Vec<usize>> = BTreeMap::new();
    for (i, call) in calls.iter().enumerate() {
      let slot = if self.cluster { fred::util::redis_keyslot(call.key.as_bytes()) } else { 0 };
      groups.entry((slot, i / CHUNK)).or_default().push(i);
    }
    let sent = groups.values().map(|group| self.fair_call(calls, group, now_us, lane));
    let results = futures::future::join_all(sent).await;
    let mut out = vec![None; calls.len()];
    for (group, result) in groups.values().zip(results) {
      for (i, counts) in group.iter().zip(result?) {
        out[*i] = Some(counts);
      }
    }
    out.into_iter().map(|c| c.ok_or_else(malformed)).collect()
  }

  async fn fair_call(
    &self,
    calls: &[FairCall],
    group: &[usize],
    now_us: Option<f64>,
    lane: &Lane,
  ) -> Result<Vec<Vec<f64>>> {
    let mut keys: Vec<Key> = vec![];
    let mut local: BTreeMap<&str, usize> = BTreeMap::new();
    let mut args: Vec<Value> = vec![now_us.map(number).unwrap_or_else(|| Value::String("".into()))];
    for i in group {
      let call = &calls[*i];
      let k = *local.entry(call.key.as_str()).or_insert_with(|| {
        keys.push(Key::from(call.key.as_str()));
        keys.len()
      });
      let mode = match call.mode {
        FairMode::Exact => 0,
        FairMode::Approximate => 1,
      };
      args.extend([Value::Integer(k as i64), Value::Integer(mode), Value::Integer(call.horizon_ms as i64)]);
      args.extend([Value::String(call.id.as_str().into()), Value::Integer(call.rules.len() as i64)]);
      for (per, granularity) in &call.rules {
        args.extend([Value::Integer(*per as i64), Value::Integer(*granularity as i64)]);
      }
    }
    let reply = self.run(lane, &FAIR, keys, args).await?;
    let mut fields = reply.iter();
    let out = group
      .iter()
      .map(|i| {
        calls[*i]
          .rules
          .iter()
          .map(|_| fields.next().and_then(Value::as_i64).map(|x| x as f64).ok_or_else(malformed))
          .collect::<Result<Vec<f64>>>()
      })
      .collect::<Result<Vec<_>>>()?;
    if fields.next().is_some() {
      return Err(malformed());
    }
    Ok(out)
  }
}
