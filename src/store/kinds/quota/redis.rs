//! The quota kind on Redis: `lua/quota.lua`, one script call per hash slot, in phases when a
//! call's counters span slots (see the parent module's docs for the phases and what a key of
//! another type does).

use super::{use_amounts, QuotaCall, QuotaMode, QUOTA_MARGIN_MS};
use crate::core::quota::{self, Grant, Request};
use crate::error::{Error, ErrorKind, Result};
use crate::store::kinds::WRONG_TYPE;
use crate::store::redis::calls::{assemble, int, malformed, now_arg, number, Slotted, CHUNK};
use crate::store::redis::script::{lua_script, Script};
use crate::store::redis::{Lane, RedisStore};
use fred::prelude::*;
use std::collections::BTreeMap;
use std::sync::LazyLock;

static QUOTA: LazyLock<Script> = LazyLock::new(|| Script::new(lua_script!("quota")));

impl RedisStore {
  /// One quota call. `timestamp`: whole seconds, or `None` for Redis' clock; `margin_ms` is
  /// added to every counter's TTL. Returns the timestamp used and the grants (none for
  /// [`QuotaMode::Use`]); or [`WRONG_TYPE`] and no grants when one of its counters holds a
  /// value of another type (then nothing was charged).
  pub async fn quota(
    &self,
    call: &QuotaCall,
    mode: QuotaMode,
    timestamp: Option<f64>,
    margin_ms: f64,
    lane: &Lane,
  ) -> Result<(f64, Vec<Grant>)> {
    let (t, grants) = self.quota_calls(call, &[call.requests.len()], mode, timestamp, margin_ms, lane).await?;
    Ok(settle(t, grants))
  }

  /// [`quota`](Self::quota) for the requests of several callers' calls merged into `call`
  /// (`calls[i]` requests each, in order; merged only for [`QuotaMode::CheckAndUse`] on one
  /// slot): a request of a call that names a counter of another type is answered granted
  /// [`WRONG_TYPE`], and none of that call's requests is charged.
  async fn quota_calls(
    &self,
    call: &QuotaCall,
    calls: &[usize],
    mode: QuotaMode,
    timestamp: Option<f64>,
    margin_ms: f64,
    lane: &Lane,
  ) -> Result<(f64, Vec<Grant>)> {
    let mut slots: BTreeMap<u16, Vec<usize>> = BTreeMap::new();
    for (c, key) in call.keys.iter().enumerate() {
      let slot = self.slot(key);
      slots.entry(slot).or_default().push(c);
    }
    let slots: Vec<Vec<usize>> = slots.into_values().collect();
    let all_requests: Vec<usize> = (0..call.requests.len()).collect();
    match mode {
      QuotaMode::Use => {
        let amounts = use_amounts(call);
        let t = timestamp.ok_or_else(|| Error::argument("useQuotas needs a timestamp"))?;
        let adds = slots.iter().map(|counters| self.quota_add(call, counters, &amounts, t, margin_ms, lane));
        let added = futures::future::join_all(adds).await.into_iter().collect::<Result<Vec<bool>>>()?;
        if !added.contains(&true) {
          return Ok((t, vec![]));
        }
        // a slot with a counter of another type added nothing: the other slots' adds are
        // taken back (sent at once, not after a read, so that a call across slots stays
        // pipelined with its neighbours; calls in between may have seen the units, which
        // errs on admitting less)
        let back: Vec<f64> = amounts.iter().map(|a| -a).collect();
        let refunds = slots
          .iter()
          .zip(&added)
          .filter(|(_, wrong)| !**wrong)
          .map(|(counters, _)| self.quota_add(call, counters, &back, t, margin_ms, lane));
        for r in futures::future::join_all(refunds).await {
          r?;
        }
        Ok((WRONG_TYPE, vec![]))
      }
      QuotaMode::CheckAndUse if slots.len() == 1 => {
        let requested: Vec<f64> = call.requests.iter().map(|r| r.requested).collect();
        let (t, charged) =
          self.quota_charge(call, &slots[0], &all_requests, calls, &requested, timestamp, margin_ms, lane).await?;
        let grants = call.requests.iter().zip(charged).map(|(r, (granted, remaining))| {
          if granted == WRONG_TYPE {
            Grant { granted, reached: vec![false; remaining.len()], remaining }
          } else {
            quota::grant(r.requested, &remaining)
          }
        });
        Ok((t, grants.collect()))
      }
      _ => {
        let (t, used) = self.quota_read(call, &slots, timestamp, margin_ms, lane).await?;
        if t == WRONG_TYPE {
          return Ok((WRONG_TYPE, vec![]));
        }
        let (plan, _) = quota::plan(&call.requests, &used);
        if mode == QuotaMode::Check {
          return Ok((t, plan));
        }
        self.quota_spread(call, &slots, plan, t, margin_ms, lane).await.map(|grants| (t, grants))
      }
    }
  }

  /// Several quota calls of one tick, each `(call, mode, timestamp)`, answered in order.
  /// Consecutive `checkAndUse` calls whose counters share one slot and that have the same
  /// timestamp (always so on a standalone server, unless timestamps differ) are decided in
  /// one script call (up to [`CHUNK`] calls), exactly as if sent one after the other: a
  /// call's requests see the earlier calls' grants. Every other call runs on its own, in
  /// order: each sees what the earlier calls of the tick charged. A run that fails while
  /// others are decided (its master down) fails its calls only.
  pub async fn quota_batch(
    &self,
    calls: &[(QuotaCall, QuotaMode, Option<f64>)],
    lane: &Lane,
  ) -> Result<Slotted<(f64, Vec<Grant>)>> {
    let slot_of = |call: &QuotaCall| -> Option<u16> {
      let mut slots = call.keys.iter().map(|k| self.slot(k));
      let first = slots.next()?;
      slots.all(|s| s == first).then_some(first)
    };
    // runs of mergeable calls: (slot, timestamp bits) and the calls; None = on its own
    type Run = (Option<(u16, u64)>, Vec<usize>);
    let mut runs: Vec<Run> = vec![];
    for (i, (call, mode, t)) in calls.iter().enumerate() {
      let merge = match (mode, slot_of(call)) {
        (QuotaMode::CheckAndUse, Some(slot)) => Some((slot, t.map_or(u64::MAX, f64::to_bits))),
        _ => None,
      };
      match runs.last_mut() {
        Some((Some(m), run)) if merge == Some(*m) && run.len() < CHUNK => run.push(i),
        _ => runs.push((merge, vec![i])),
      }
    }
    // A run whose script calls are all sent when it starts is pipelined with its
    // neighbours (sent in order on one connection per node, so each sees the earlier ones).
    // A call in phases across slots is a barrier: it starts once the earlier runs are done,
    // and the later ones start once it is done.
    let phased = |run: &[usize]| {
      let (call, mode, t) = &calls[run[0]];
      slot_of(call).is_none() && (*mode == QuotaMode::CheckAndUse || (*mode == QuotaMode::Check && t.is_none()))
    };
    // each run's result; a run that fails while others are decided (its master down) fails
    // its calls only (see RedisStore::per_slot)
    let mut results = Vec::with_capacity(runs.len());
    let mut pending = vec![];
    for (_, run) in &runs {
      if phased(run) {
        results.extend(futures::future::join_all(pending.drain(..)).await);
        results.push(self.quota_run(calls, run, lane).await);
      } else {
        pending.push(self.quota_run(calls, run, lane));
      }
    }
    results.extend(futures::future::join_all(pending).await);
    let groups: Vec<Vec<usize>> = runs.into_iter().map(|(_, run)| run).collect();
    assemble(&groups, results, "quota")
  }

  /// One run of [`quota_batch`](Self::quota_batch): a call on its own, or merged calls.
  async fn quota_run(
    &self,
    calls: &[(QuotaCall, QuotaMode, Option<f64>)],
    run: &[usize],
    lane: &Lane,
  ) -> Result<Vec<(f64, Vec<Grant>)>> {
    if run.len() == 1 {
      let (call, mode, t) = &calls[run[0]];
      let margin = if t.is_some() { QUOTA_MARGIN_MS } else { 0.0 };
      return Ok(vec![self.quota(call, *mode, *t, margin, lane).await?]);
    }
    self.quota_merged(calls, run, lane).await
  }

  /// `checkAndUse` calls on one slot with one timestamp, as one call whose requests are
  /// theirs in order (counters renumbered into one list).
  async fn quota_merged(
    &self,
    calls: &[(QuotaCall, QuotaMode, Option<f64>)],
    run: &[usize],
    lane: &Lane,
  ) -> Result<Vec<(f64, Vec<Grant>)>> {
    let mut merged = QuotaCall::default();
    let sizes: Vec<usize> = run.iter().map(|i| calls[*i].0.requests.len()).collect();
    let mut index: std::collections::HashMap<&str, usize> = Default::default();
    for i in run {
      let call = &calls[*i].0;
      let local: Vec<usize> = call
        .keys
        .iter()
        .zip(&call.shapes)
        .map(|(key, shape)| {
          *index.entry(key.as_str()).or_insert_with(|| {
            merged.keys.push(key.clone());
            merged.shapes.push(*shape);
            merged.keys.len() - 1
          })
        })
        .collect();
      for r in &call.requests {
        let mut r = r.clone();
        for q in &mut r.quotas {
          q.counter = local[q.counter];
        }
        merged.requests.push(r);
      }
    }
    let t = calls[run[0]].2;
    let margin = if t.is_some() { QUOTA_MARGIN_MS } else { 0.0 };
    let (t, mut grants) = self.quota_calls(&merged, &sizes, QuotaMode::CheckAndUse, t, margin, lane).await?;
    let mut out = Vec::with_capacity(run.len());
    for size in sizes {
      let rest = grants.split_off(size.min(grants.len()));
      out.push(settle(t, std::mem::replace(&mut grants, rest)));
    }
    Ok(out)
  }

  /// Phase 1: what every counter used at the call's timestamp.
  async fn quota_read(
    &self,
    call: &QuotaCall,
    slots: &[Vec<usize>],
    timestamp: Option<f64>,
    margin_ms: f64,
    lane: &Lane,
  ) -> Result<(f64, Vec<f64>)> {
    let mut used = vec![0.0; call.keys.len()];
    let mut rest = slots;
    let t = match timestamp {
      Some(t) => t,
      None => {
        let (t, values) = self.quota_script(call, &slots[0], 1, vec![], None, margin_ms, lane).await?;
        if t == WRONG_TYPE {
          return Ok((WRONG_TYPE, vec![]));
        }
        for (c, u) in slots[0].iter().zip(values) {
          used[*c] = u;
        }
        rest = &slots[1..];
        t
      }
    };
    let reads = rest.iter().map(|counters| self.quota_script(call, counters, 1, vec![], Some(t), margin_ms, lane));
    let mut wrong = false;
    for (counters, r) in rest.iter().zip(futures::future::join_all(reads).await) {
      let (read_at, values) = r?;
      if read_at == WRONG_TYPE {
        wrong = true;
        continue;
      }
      if values.len() != counters.len() {
        return Err(malformed("quota"));
      }
      for (c, u) in counters.iter().zip(values) {
        used[*c] = u;
      }
    }
    Ok(if wrong { (WRONG_TYPE, vec![]) } else { (t, used) })
  }

  /// Phases 2 and 3 of a call across slots: charge each slot up to the plan, then give back
  /// what a slot charged beyond the request's smallest charge.
  async fn quota_spread(
    &self,
    call: &QuotaCall,
    slots: &[Vec<usize>],
    plan: Vec<Grant>,
    t: f64,
    margin_ms: f64,
    lane: &Lane,
  ) -> Result<Vec<Grant>> {
    let planned: Vec<f64> = plan.iter().map(|g| g.granted).collect();
    // the requests with a quota on each slot (and something planned: the rest charge nothing)
    let members: Vec<Vec<usize>> = slots
      .iter()
      .map(|counters| {
        (0..call.requests.len())
          .filter(|r| planned[*r] > 0.0 && call.requests[*r].quotas.iter().any(|q| counters.contains(&q.counter)))
          .collect()
      })
      .collect();
    let planned_ref = &planned;
    let charges = slots.iter().zip(&members).map(|(counters, requests)| async move {
      if requests.is_empty() {
        return Ok((t, vec![]));
      }
      self.quota_charge(call, counters, requests, &[requests.len()], planned_ref, Some(t), margin_ms, lane).await
    });
    let mut final_granted = planned.clone();
    let mut effective: Vec<Vec<f64>> = plan.iter().map(|g| g.remaining.clone()).collect();
    let mut per_slot = vec![];
    // a counter that took another type since phase 1: that slot charged nothing, the others
    // are given everything back, and the call fails
    let mut wrong = false;
    for ((counters, requests), r) in slots.iter().zip(&members).zip(futures::future::join_all(charges).await) {
      let (_, mut charged) = r?;
      for (granted, _) in &mut charged {
        if *granted == WRONG_TYPE {
          wrong = true;
          *granted = 0.0;
        }
      }
      for (r, (granted, remaining)) in requests.iter().zip(&charged) {
        final_granted[*r] = final_granted[*r].min(*granted);
        // the remaining each of this slot's quotas showed when charging
        let mut seen = remaining.iter();
        for (q, eff) in call.requests[*r].quotas.iter().zip(effective[*r].iter_mut()) {
          if counters.contains(&q.counter) {
            *eff = eff.min(*seen.next().unwrap_or(eff));
          }
        }
      }
      per_slot.push(charged);
    }
    if wrong {
      final_granted.iter_mut().for_each(|g| *g = 0.0);
    }
    let refunds = slots.iter().zip(&members).zip(&per_slot).filter_map(|((counters, requests), charged)| {
      let mut amounts = vec![0.0; call.keys.len()];
      for (r, (granted, _)) in requests.iter().zip(charged) {
        let back = granted - final_granted[*r];
        if back > 0.0 {
          for c in quota::distinct_counters(&call.requests[*r]) {
            if counters.contains(&c) {
              amounts[c] -= back;
            }
          }
        }
      }
      amounts.iter().any(|a| *a != 0.0).then(|| {
        let amounts = amounts;
        async move { self.quota_add(call, counters, &amounts, t, margin_ms, lane).await }
      })
    });
    for r in futures::future::join_all(refunds).await {
      r?;
    }
    if wrong {
      return Ok(
        call.requests.iter().map(|_| Grant { granted: WRONG_TYPE, reached: vec![], remaining: vec![] }).collect(),
      );
    }
    Ok(
      call
        .requests
        .iter()
        .zip(plan)
        .enumerate()
        .map(
          |(i, (request, g))| {
            if final_granted[i] == g.granted {
              g
            } else {
              quota::grant(request.requested, &effective[i])
            }
          },
        )
        .collect(),
    )
  }

  /// Charges `requests` (indices) on the slot of `counters`, each at most `limit_of[r]`;
  /// per request: what it was charged and the remaining of each of its quotas on this slot.
  /// `calls`: how many of `requests`, in order, each caller's call made; the requests of a
  /// call that names a counter of another type are answered granted [`WRONG_TYPE`], and none
  /// of them is charged.
  #[allow(clippy::too_many_arguments)]
  async fn quota_charge(
    &self,
    call: &QuotaCall,
    counters: &[usize],
    requests: &[usize],
    calls: &[usize],
    limit_of: &[f64],
    timestamp: Option<f64>,
    margin_ms: f64,
    lane: &Lane,
  ) -> Result<(f64, Vec<(f64, Vec<f64>)>)> {
    let mut body = vec![];
    let mut widths = vec![];
    let mut rest = requests;
    for n in calls {
      let (of_call, after) = rest.split_at((*n).min(rest.len()));
      rest = after;
      // each caller's call starts with its number of requests
      body.push(Value::Integer(of_call.len() as i64));
      for r in of_call {
        let Request { quotas, .. } = &call.requests[*r];
        let mine: Vec<_> =
          quotas.iter().filter_map(|q| Some((counters.iter().position(|c| *c == q.counter)?, q.limit))).collect();
        body.push(number(limit_of[*r]));
        body.push(Value::Integer(mine.len() as i64));
        for (local, limit) in &mine {
          body.extend([Value::Integer(*local as i64 + 1), number(*limit)]);
        }
        widths.push(mine.len());
      }
    }
    if !rest.is_empty() {
      return Err(Error::new(ErrorKind::Internal, "quota: requests without a call"));
    }
    let (t, values) = self.quota_script(call, counters, 2, body, timestamp, margin_ms, lane).await?;
    let mut it = values.into_iter();
    let charged = widths
      .iter()
      .map(|w| {
        let granted = it.next().ok_or_else(|| malformed("quota"))?;
        let remaining = (0..*w).map(|_| it.next().ok_or_else(|| malformed("quota"))).collect::<Result<Vec<_>>>()?;
        Ok((granted, remaining))
      })
      .collect::<Result<Vec<_>>>()?;
    Ok((t, charged))
  }

  /// Adds `amounts[c]` to each counter `c` of `counters` (one slot); true (and nothing added)
  /// when one of them holds a value of another type.
  async fn quota_add(
    &self,
    call: &QuotaCall,
    counters: &[usize],
    amounts: &[f64],
    t: f64,
    margin_ms: f64,
    lane: &Lane,
  ) -> Result<bool> {
    if counters.iter().all(|c| amounts[*c] == 0.0) {
      return Ok(false);
    }
    let body = counters.iter().map(|c| number(amounts[*c])).collect();
    Ok(self.quota_script(call, counters, 3, body, Some(t), margin_ms, lane).await?.0 == WRONG_TYPE)
  }

  /// One `lua/quota.lua` call on `counters` (one slot): the timestamp it used and the rest
  /// of its reply.
  #[allow(clippy::too_many_arguments)]
  async fn quota_script(
    &self,
    call: &QuotaCall,
    counters: &[usize],
    mode: i64,
    body: Vec<Value>,
    timestamp: Option<f64>,
    margin_ms: f64,
    lane: &Lane,
  ) -> Result<(f64, Vec<f64>)> {
    let keys: Vec<Key> = counters.iter().map(|c| Key::from(call.keys[*c].as_str())).collect();
    let mut args =
      vec![now_arg(timestamp), number(margin_ms), Value::Integer(mode), Value::Integer(counters.len() as i64)];
    for c in counters {
      let (window_s, granularity_s) = call.shapes[*c];
      args.extend([number(window_s), number(granularity_s)]);
    }
    args.extend(body);
    let reply = self.run(lane, &QUOTA, keys, args).await?;
    let mut values = reply.iter().map(|v| int(Some(v), "quota"));
    let t = values.next().ok_or_else(|| malformed("quota"))??;
    Ok((t, values.collect::<Result<Vec<_>>>()?))
  }
}

/// A caller's call as it is answered: one of its counters held another type (the timestamp or
/// a request's grant is [`WRONG_TYPE`]) makes it the timestamp [`WRONG_TYPE`] and no grants.
fn settle(t: f64, grants: Vec<Grant>) -> (f64, Vec<Grant>) {
  if t == WRONG_TYPE || grants.iter().any(|g| g.granted == WRONG_TYPE) {
    (WRONG_TYPE, vec![])
  } else {
    (t, grants)
  }
}

#[cfg(test)]
mod tests {
  use super::*;

  #[test]
  fn a_call_with_a_counter_of_another_type_is_answered_by_the_marker_alone() {
    let grant = |granted| Grant { granted, reached: vec![false], remaining: vec![1.0] };
    assert_eq!(settle(5.0, vec![grant(1.0), grant(WRONG_TYPE)]), (WRONG_TYPE, vec![]));
    assert_eq!(settle(WRONG_TYPE, vec![]), (WRONG_TYPE, vec![]));
    assert_eq!(settle(5.0, vec![grant(1.0)]), (5.0, vec![grant(1.0)]));
  }
}
