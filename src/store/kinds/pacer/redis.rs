//! The pacer on Redis: `lua/pacer.lua` decides entries grouped per hash slot; a composite
//! whose members live in different slots is charged member by member and taken back with
//! `lua/pacer_undo.lua` when refused; `lua/pacer_block.lua` blocks a key; `lua/pacer_give.lua`
//! takes back what a caller will not use. Key layout: one
//! string per pacer key (24 bytes, see `lua/pacer.lua`).

use super::{Member, PacerBatch};
use crate::core::pacer::{Decision, Mode, Params};
use crate::error::Result;
use crate::store::kinds::WRONG_TYPE;
use crate::store::redis::calls::{malformed, now_arg, number, Slotted, CHUNK};
use crate::store::redis::script::{lua_script, Script};
use crate::store::redis::{Lane, RedisStore};
use fred::prelude::*;
use std::collections::BTreeMap;
use std::sync::LazyLock;

static PACER: LazyLock<Script> = LazyLock::new(|| Script::new(lua_script!("pacer")));
static PACER_UNDO: LazyLock<Script> = LazyLock::new(|| Script::new(lua_script!("pacer_undo")));
static PACER_BLOCK: LazyLock<Script> = LazyLock::new(|| Script::new(lua_script!("pacer_block")));
static PACER_GIVE: LazyLock<Script> = LazyLock::new(|| Script::new(lua_script!("pacer_give")));

impl RedisStore {
  /// Blocks the pacer of `key` for `duration_us` (`lua/pacer_block.lua`); µs until it ends,
  /// or [`WRONG_TYPE`] when the key holds a value of another type (nothing written).
  pub async fn pacer_block(
    &self,
    key: &str,
    params: &Params,
    duration_us: f64,
    now_us: Option<f64>,
    lane: &Lane,
  ) -> Result<f64> {
    let args =
      vec![now_arg(now_us), number(duration_us), number(params.qps), number(params.max_burst), number(params.factor)];
    debug_assert_eq!(args.len(), BLOCK_ARGS);
    let reply = self.run(lane, &PACER_BLOCK, vec![Key::from(key)], args).await?;
    let left = match reply.as_slice() {
      [left] => left.as_i64().map(|x| x as f64),
      _ => None,
    }
    .ok_or_else(|| malformed("pacer block"))?;
    Ok(left)
  }

  /// Gives back `weight` on the pacer of `key`, its slot `start_in_us` from now
  /// (`lua/pacer_give.lua`): 1 when given back, 0 when it stays spent, or [`WRONG_TYPE`] when
  /// the key holds a value of another type.
  pub async fn pacer_give(
    &self,
    key: &str,
    params: &Params,
    weight: f64,
    start_in_us: f64,
    now_us: Option<f64>,
    lane: &Lane,
  ) -> Result<f64> {
    let args = vec![
      now_arg(now_us),
      number(weight),
      number(params.qps),
      number(params.max_burst),
      number(params.factor),
      number(start_in_us),
    ];
    debug_assert_eq!(args.len(), GIVE_ARGS);
    let reply = self.run(lane, &PACER_GIVE, vec![Key::from(key)], args).await?;
    match reply.as_slice() {
      [left] => left.as_i64().map(|x| x as f64),
      _ => None,
    }
    .ok_or_else(|| malformed("pacer give-back"))
  }

  /// Decides a batch: per entry, its members' decisions. One script call per slot (and
  /// [`CHUNK`]) for the entries whose members share a slot, one charge per member for a
  /// cross-slot composite; a group that fails while others are decided (its master down)
  /// fails its entries only (see [`RedisStore::per_slot`]).
  pub async fn pacer_batch(
    &self,
    batch: &PacerBatch,
    now_us: Option<f64>,
    lane: &Lane,
  ) -> Result<Slotted<Vec<Decision>>> {
    // the slot of an entry whose members share one, None for a cross-slot composite
    let slot_of = |e: usize| {
      let mut slots = batch.members[batch.entries[e].members.clone()].iter().map(|m| self.slot(&batch.keys[m.key]));
      let first = slots.next().unwrap_or(0);
      slots.all(|s| s == first).then_some(first)
    };
    // entries grouped by slot (one group on a standalone server), each cross-slot composite
    // a group of its own
    let mut groups: BTreeMap<(u16, usize), Vec<usize>> = BTreeMap::new();
    let mut cross_slot = vec![];
    for e in 0..batch.entries.len() {
      match slot_of(e) {
        Some(slot) => groups.entry((slot, e / CHUNK)).or_default().push(e),
        None => cross_slot.push(vec![e]),
      }
    }
    let groups: Vec<Vec<usize>> = groups.into_values().chain(cross_slot).collect();
    self
      .per_slot(&groups, "pacer", |entries| async move {
        match entries {
          [e] if slot_of(*e).is_none() => Ok(vec![self.cross_slot_entry(batch, *e, now_us, lane).await?]),
          _ => self.pacer_call(batch, entries, now_us, lane).await,
        }
      })
      .await
  }

  /// One script call for entries that share a slot: per entry, its members' decisions.
  async fn pacer_call(
    &self,
    batch: &PacerBatch,
    entries: &[usize],
    now_us: Option<f64>,
    lane: &Lane,
  ) -> Result<Vec<Vec<Decision>>> {
    let mut args = ScriptArgs::new(now_us);
    for e in entries {
      let entry = &batch.entries[*e];
      args.entry(batch, &batch.members[entry.members.clone()], entry.mode, false);
    }
    let (keys, args) = args.finish();
    let reply = self.run(lane, &PACER, keys, args).await?;
    let members: usize = entries.iter().map(|e| batch.entries[*e].members.len()).sum();
    if reply.len() != members * REPLY_FIELDS {
      return Err(malformed("pacer"));
    }
    let mut fields = reply.chunks(REPLY_FIELDS);
    entries
      .iter()
      .map(|e| {
        let entry = &batch.entries[*e];
        let mut decisions =
          entry.members.clone().map(|_| decision_from(fields.next().unwrap_or_default())).collect::<Result<Vec<_>>>()?;
        settle_admission(&mut decisions, entry.mode);
        Ok(decisions)
      })
      .collect()
  }

  /// A composite whose members live in different cluster slots: every member is charged on
  /// its own node at once; if any refuses (rate-limit mode), the others' charges are taken
  /// back by compare-and-set. Exact unless another call wrote the same key in between, in
  /// which case that charge stays (it errs on admitting less, never more).
  async fn cross_slot_entry(
    &self,
    batch: &PacerBatch,
    e: usize,
    now_us: Option<f64>,
    lane: &Lane,
  ) -> Result<Vec<Decision>> {
    let entry = &batch.entries[e];
    let members = &batch.members[entry.members.clone()];
    let charges = members.iter().map(|m| {
      let mut args = ScriptArgs::new(now_us);
      args.entry(batch, std::slice::from_ref(m), entry.mode, true);
      let (keys, args) = args.finish();
      self.run(lane, &PACER, keys, args)
    });
    let replies = futures::future::join_all(charges).await;
    let mut decisions = vec![];
    let mut written = vec![];
    let mut failure = None;
    for (m, reply) in members.iter().zip(replies) {
      match reply {
        Ok(reply) if reply.len() == REPLY_FIELDS + 2 => {
          let mut d = decision_from(&reply[..REPLY_FIELDS])?;
          settle_admission(std::slice::from_mut(&mut d), entry.mode);
          decisions.push(d);
          let new = reply[REPLY_FIELDS + 1].as_bytes().map(|b| b.to_vec()).unwrap_or_default();
          if !new.is_empty() {
            let old = reply[REPLY_FIELDS].as_bytes().map(|b| b.to_vec()).unwrap_or_default();
            written.push((m, old, new));
          }
        }
        Ok(_) => failure = Some(malformed("pacer")),
        Err(err) => failure = Some(err),
      }
    }
    // a member's key of another type fails the whole entry: the others' charges are taken back
    let wrong = decisions.iter().any(|d| d.delay_us == WRONG_TYPE);
    let all = failure.is_none() && decisions.iter().all(|d| d.admitted);
    if (entry.mode == Mode::RateLimit && !all) || wrong {
      let undo = written.iter().map(|(m, old, new)| {
        let args = vec![Value::Bytes(new.clone().into()), Value::Bytes(old.clone().into())];
        self.run(lane, &PACER_UNDO, vec![Key::from(batch.keys[m.key].as_str())], args)
      });
      for result in futures::future::join_all(undo).await {
        result?;
      }
      for d in &mut decisions {
        d.admitted = false;
        if wrong {
          d.delay_us = WRONG_TYPE;
          d.watermark_before = 0.0;
        }
      }
    }
    match failure {
      Some(err) => Err(err),
      None => Ok(decisions),
    }
  }
}

/// Builds the ARGV of `lua/pacer.lua`: keys and parameter sets deduplicated, numbers as
/// their shortest exact decimal strings (Lua's `tonumber` reads back the same double).
struct ScriptArgs {
  keys: Vec<Key>,
  key_index: std::collections::HashMap<usize, usize>,
  params: Vec<Value>,
  param_index: std::collections::HashMap<[u64; 4], usize>,
  entries: Vec<Value>,
  now: Value,
}

impl ScriptArgs {
  fn new(now_us: Option<f64>) -> Self {
    ScriptArgs {
      keys: vec![],
      key_index: Default::default(),
      params: vec![],
      param_index: Default::default(),
      entries: vec![],
      now: Value::String(now_us.map(|n| format!("{n:.0}")).unwrap_or_default().into()),
    }
  }

  /// One entry: a single call is `<(key * KEY_SHIFT + set) * 4 + mode>`, a composite
  /// `<-(members * 4 + mode)>` then `<key * KEY_SHIFT + set>` per member; a parameter set is
  /// qps, max_burst, factor and weight.
  fn entry(&mut self, batch: &PacerBatch, members: &[Member], mode: Mode, report: bool) {
    let mode = if mode == Mode::Pace { 1 } else { 0 } + if report { 2 } else { 0 };
    if members.len() > 1 {
      self.entries.push(Value::Integer(-((members.len() * 4 + mode) as i64)));
    }
    for m in members {
      let mut index = self.member_index(&batch.keys[m.key], m.key, m);
      if members.len() == 1 {
        index = index * 4 + mode;
      }
      self.entries.push(Value::Integer(index as i64));
    }
  }

  /// `key * KEY_SHIFT + parameter set` (qps, max_burst, factor, weight), both 1-based, adding
  /// the key and the set if new.
  fn member_index(&mut self, key: &str, batch_key: usize, m: &Member) -> usize {
    let next = self.keys.len() + 1;
    let k = *self.key_index.entry(batch_key).or_insert_with(|| {
      self.keys.push(Key::from(key));
      next
    });
    let p = &m.params;
    let next = self.params.len() / 4 + 1;
    let params = &mut self.params;
    let bits = [p.qps.to_bits(), p.max_burst.to_bits(), p.factor.to_bits(), m.weight.to_bits()];
    let set = *self.param_index.entry(bits).or_insert_with(|| {
      params.extend([number(p.qps), number(p.max_burst), number(p.factor), number(m.weight)]);
      next
    });
    k * KEY_SHIFT + set
  }

  fn finish(self) -> (Vec<Key>, Vec<Value>) {
    let mut args = Vec::with_capacity(2 + self.params.len() + self.entries.len());
    args.push(self.now);
    args.push(Value::Integer((self.params.len() / 4) as i64));
    args.extend(self.params);
    args.extend(self.entries);
    (self.keys, args)
  }
}

/// Fields per member in the script's reply: delay_us, watermark_before in millionths.
pub(crate) const REPLY_FIELDS: usize = 2;
/// ARGV of `lua/pacer_block.lua` and `lua/pacer_give.lua`: now, then the block's duration, qps,
/// max_burst, factor; the give-back's weight, qps, max_burst, factor, start_in_us.
pub(crate) const BLOCK_ARGS: usize = 5;
pub(crate) const GIVE_ARGS: usize = 6;
/// A member's argument packs its key index and parameter set: `key * KEY_SHIFT + set`.
pub(crate) const KEY_SHIFT: usize = 1 << 20;

fn decision_from(fields: &[Value]) -> Result<Decision> {
  let int = |i: usize| fields.get(i).and_then(Value::as_i64).ok_or_else(|| malformed("pacer"));
  Ok(Decision { delay_us: int(0)? as f64, watermark_before: int(1)? as f64 / 1e6, admitted: false })
}

/// The script does not return admission: a pace call always is; a rate-limit entry is when
/// every member's delay is 0 (then all were charged, otherwise none); an entry with a key of
/// another type ([`WRONG_TYPE`] delays) never is.
fn settle_admission(members: &mut [Decision], mode: Mode) {
  let admitted = (mode == Mode::Pace && members.iter().all(|d| d.delay_us != WRONG_TYPE))
    || members.iter().all(|d| d.delay_us == 0.0);
  for d in members {
    d.admitted = admitted;
  }
}

#[cfg(test)]
mod tests {
  use super::*;

  #[test]
  fn an_entry_with_a_key_of_another_type_is_never_admitted() {
    let d = |delay_us| Decision { delay_us, watermark_before: 0.0, admitted: false };
    for mode in [Mode::Pace, Mode::RateLimit] {
      let mut members = [d(0.0), d(WRONG_TYPE)];
      settle_admission(&mut members, mode);
      assert!(members.iter().all(|m| !m.admitted), "{mode:?}");
      let mut members = [d(0.0), d(0.0)];
      settle_admission(&mut members, mode);
      assert!(members.iter().all(|m| m.admitted), "{mode:?}");
    }
    assert!(!crate::store::redis::calls::wrong_type_message("pacer").contains('{'));
  }
}
