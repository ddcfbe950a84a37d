//! The budget kind (`Budget`): several dimensions charged all or nothing, reservations settled
//! later (`crate::core::budget`). Script `lua/budget.lua`; per budget key `<key>` (state),
//! `<key>:r` (open reservations), `<key>:d` (their deadlines) and
//!
//! `<key>:t` (its tenants).
//!
//! A call, as JS sends it: `text` = per call its budget key, its reservation id and its tenant
//! id (in the encoding of `crate::codec`; stats ignores the id, calls without a tenant send
//! ''), `nums` = per call `[op, ttl_us, max_wait_us, n, share_ppm, max_ppm, ahead_us, then per
//! dimension limit, interval_us, max_burst, max_debt, amount]`, `op` one of [`RESERVE`], [`SETTLE`]
//! (amount = the actual amount), [`CANCEL`], [`STATS`], [`RESERVE_AS`] and [`STATS_OF`] (through
//! a tenant: share, max and ahead apply). Results per call: `[status, delay_us, now_us, open,
//! expired, then per dimension used, reserved, excess]`, for the tenant ops then `[share, max, then per
//! dimension the tenant's use]` (`now_us`:
//! the store's time of the decision, so a reservation's turn is `now_us + delay_us`), `status` as
//! `crate::core::budget` ([`OK`](crate::core::budget::OK), `REFUSED`, `NOT_OPEN`) or
//! [`WRONG_TYPE`](super::WRONG_TYPE) when a key of the budget holds a value of another type
//! (Redis: nothing applied).

use super::{decode_calls, next_part, Kind, Reply, WRONG_TYPE};
use crate::core::budget::tenants::TOP;
use crate::core::budget::{step, ttl_ms, Dimension, Request, State, TenantArg, PPM};
use crate::error::{Error, Result};
use crate::store::memory::MemoryStore;
use crate::store::redis::calls::{int, malformed, now_arg, number};
use crate::store::redis::script::{lua_script, Script};
use crate::store::redis::{Lane, RedisStore};
use crate::store::{integer_in, validate_key, MAX_INTERVAL_US, MAX_LIMIT};
use fred::prelude::*;
use std::collections::BTreeMap;
use std::sync::LazyLock;

/// `lua/budget.lua`'s packing of a budget index and a dimension set into one number (with
/// the op: `(budget * SET_SHIFT + set) * 8 + op`); a script call has at most [`CHUNK`] calls,
/// so at most that many sets.
///
/// [`CHUNK`]: crate::store::redis::calls::CHUNK
pub(crate) const SET_SHIFT: usize = 1024;

static SCRIPT: LazyLock<Script> = LazyLock::new(|| Script::new(lua_script!("budget")));

/// The budget kind (see the module docs).
pub struct Budget;

pub const RESERVE: f64 = 1.0;
pub const SETTLE: f64 = 2.0;
pub const CANCEL: f64 = 3.0;
pub const STATS: f64 = 4.0;
pub const RESERVE_AS: f64 = 5.0;
pub const STATS_OF: f64 = 6.0;
/// Longest tenant id, bytes.
pub const MAX_TENANT_BYTES: usize = 256;
/// Most dimensions of one budget.
pub const MAX_DIMENSIONS: usize = 8;
/// Numbers per dimension in a call: limit, interval_us, max_burst, max_debt, amount.
pub const PER_DIMENSION: usize = 5;

/// One call, decoded and validated.
#[derive(Clone, Debug, PartialEq)]
pub struct Call {
  pub key: String,
  pub id: String,
  pub op: f64,
  pub ttl_us: f64,
  pub max_wait_us: f64,
  pub dimensions: Vec<Dimension>,
  /// Per dimension: reserved (reserve), actual (settle), 0 otherwise.
  pub amounts: Vec<f64>,
  /// The tenant ops: id, share and max (ppm), ahead (µs).
  pub tenant: Option<(String, f64, f64, f64)>,
}

impl Call {
  fn request(&self) -> Request<'_> {
    match self.op {
      RESERVE => {
        Request::Reserve { id: &self.id, amounts: &self.amounts, ttl_us: self.ttl_us, max_wait_us: self.max_wait_us }
      }
      SETTLE => Request::Settle { id: &self.id, actual: &self.amounts },
      CANCEL => Request::Cancel { id: &self.id },
      RESERVE_AS | STATS_OF => {
        let (id, share, max, ahead_us) = self.tenant.as_ref().expect("decoded with a tenant");
        let tenant = TenantArg { id, share: *share, max: *max, ahead_us: *ahead_us };
        if self.op == RESERVE_AS {
          let (amounts, ttl_us, max_wait_us) = (&self.amounts, self.ttl_us, self.max_wait_us);
          Request::ReserveAs { tenant, id: &self.id, amounts, ttl_us, max_wait_us }
        } else {
          Request::StatsOf { tenant }
        }
      }
      _ => Request::Stats,
    }
  }
}

/// Decodes one call's numbers from `nums`; returns it and how many numbers it took.
fn decode_call(key: &str, id: &str, tenant: &str, nums: &[f64]) -> Result<(Call, usize)> {
  let bad = || Error::argument("malformed budget call");
  let [op, ttl_us, max_wait_us, n, share, max, ahead_us, ..] = *nums else { return Err(bad()) };
  if ![RESERVE, SETTLE, CANCEL, STATS, RESERVE_AS, STATS_OF].contains(&op) || !integer_in(n, 1.0, MAX_DIMENSIONS as f64) {
    return Err(bad());
  }
  let n = n as usize;
  let Some(spec) = nums.get(7..7 + PER_DIMENSION * n) else { return Err(bad()) };
  let tenant = if op == RESERVE_AS || op == STATS_OF {
    if tenant.is_empty() || tenant.len() > MAX_TENANT_BYTES {
      return Err(Error::argument(format!("a tenant id must be 1..={MAX_TENANT_BYTES} bytes")));
    }
    if !integer_in(max, 1.0, PPM) || !integer_in(share, 0.0, max) {
      return Err(Error::argument("a tenant's share and maxShare must be ppm integers, 0 <= share <= max, 1 <= max <= 1e6"));
    }
    if !integer_in(ahead_us, 0.0, MAX_INTERVAL_US) {
      return Err(Error::argument("a tenant's borrowing horizon must be whole µs within 10 years"));
    }
    Some((tenant.to_owned(), share, max, ahead_us))
  } else {
    None
  };
  if !integer_in(ttl_us, 1.0, MAX_INTERVAL_US) || !integer_in(max_wait_us, 0.0, MAX_INTERVAL_US) {
    return Err(Error::argument("ttl and max wait must be whole µs within 10 years"));
  }
  if op != STATS && (id.is_empty() || id.len() > 192 || id.contains(|c: char| c.is_whitespace())) {
    return Err(Error::argument("reservation id must be 1..=192 bytes without whitespace"));
  }
  let mut dimensions = Vec::with_capacity(n);
  let mut amounts = Vec::with_capacity(n);
  for q in spec.chunks(PER_DIMENSION) {
    let [limit, interval_us, max_burst, max_debt, amount] = *q else { return Err(bad()) };
    if !integer_in(limit, 1.0, MAX_LIMIT) || !integer_in(max_burst, 0.0, MAX_LIMIT) || !integer_in(max_debt, 0.0, 2.0 * MAX_LIMIT) {
      return Err(Error::argument(
        "a dimension's limit must be an integer in [1, 1e9], its maxBurst in [0, 1e9], its maxDebt in [0, 2e9]",
      ));
    }
    if !integer_in(interval_us, 1.0, MAX_INTERVAL_US) {
      return Err(Error::argument("a dimension's interval must be whole µs within 10 years"));
    }
    let most = if op == RESERVE || op == RESERVE_AS { limit + max_burst } else { MAX_LIMIT };
    if !integer_in(amount, 0.0, most) {
      return Err(Error::argument(format!("an amount must be an integer in [0, {most}], got {amount}")));
    }
    dimensions.push(Dimension { limit, interval_us, max_burst, max_debt });
    amounts.push(if op == RESERVE || op == SETTLE || op == RESERVE_AS { amount } else { 0.0 });
  }
  validate_key(key)?;
  let call = Call { key: key.to_owned(), id: id.to_owned(), op, ttl_us, max_wait_us, dimensions, amounts, tenant };
  Ok((call, 7 + PER_DIMENSION * n))
}

/// One call's result: its numbers, and the tenant ids it lists (stats).
fn flatten(call: &Call, reply: &crate::core::budget::Reply, now_us: f64) -> (Vec<f64>, Vec<String>) {
  let (mut out, mut ids) = (Vec::with_capacity(width(call)), vec![]);
  out.extend([reply.status, reply.delay_us, now_us, reply.open, reply.expired]);
  for ((used, reserved), excess) in reply.dimensions.iter().zip(&reply.excess) {
    out.extend([*used, *reserved, *excess]);
  }
  if call.tenant.is_some() {
    match &reply.tenant {
      Some((share, max, used)) => {
        out.extend([*share, *max]);
        out.extend(used);
      }
      None => out.extend(std::iter::repeat_n(0.0, 2 + call.dimensions.len())),
    }
  }
  if call.op == STATS {
    let n = call.dimensions.len();
    out.extend([reply.active, reply.tenants.len() as f64]);
    for (id, share, max, used) in &reply.tenants {
      ids.push(id.clone());
      out.extend([*share, *max]);
      out.extend(used);
    }
    out.extend(std::iter::repeat_n(0.0, (TOP - reply.tenants.len()) * (2 + n)));
  }
  (out, ids)
}

/// Numbers in the result of `call`.
fn width(call: &Call) -> usize {
  let n = call.dimensions.len();
  5 + 3 * n + if call.tenant.is_some() { 2 + n } else { 0 } + if call.op == STATS { 2 + TOP * (2 + n) } else { 0 }
}

impl Kind for Budget {
  type Call = Vec<Call>;
  type State = Box<State>;
  const OPS: &'static [(&'static str, f64)] =
    &[
    ("reserve", RESERVE),
    ("settle", SETTLE),
    ("cancel", CANCEL),
    ("stats", STATS),
    ("reserveAs", RESERVE_AS),
    ("statsOf", STATS_OF),
  ];
  const RESULTS: &'static [(&'static str, &'static [&'static str])] = &[
    ("call", &["status", "delay_us", "now_us", "open", "expired"]),
    ("dimension", &["used", "reserved", "excess"]),
    ("tenant", &["share_ppm", "max_ppm"]),
    ("tenant_dimension", &["used"]),
    ("tenants", &["active", "listed"]),
  ];

  /// `text` holds each call's key, its id and its tenant id.
  fn decode(text: &str, nums: &[f64]) -> Result<Vec<Call>> {
    decode_calls(text, nums, "budget", |parts, nums| {
      let (key, id, tenant) = (next_part(parts, "budget")?, next_part(parts, "budget")?, next_part(parts, "budget")?);
      decode_call(key, id, tenant, nums)
    })
  }

  fn memory(store: &MemoryStore, calls: &Vec<Call>, now_us: f64) -> Result<Reply> {
    let parts = store.step_keyed::<Budget, _, _>(calls, now_us, |call| &call.key, |call, state, expires_us| {
      let (reply, changed) = step(state, &call.dimensions, &call.request(), now_us);
      let expires_us = if changed { now_us + ttl_ms(state, now_us) * 1000.0 } else { expires_us };
      (flatten(call, &reply, now_us), expires_us)
    });
    Ok(Reply::with_text(parts))
  }

  async fn redis(store: &RedisStore, calls: &Vec<Call>, now_us: Option<f64>, lane: &Lane) -> Result<Reply> {
    let groups = store.groups(calls.iter().map(|c| c.key.as_str()));
    let replies = store.per_slot(&groups, "budget", |part| script_call(store, calls, part, now_us, lane)).await?;
    Ok(replies.text_reply())
  }
}

/// The calls `part` of `calls` (one hash slot) in one script call; each call's flat result and
/// the tenant ids it lists (stats: after every call's numbers, in call order).
async fn script_call(
  store: &RedisStore,
  calls: &[Call],
  part: &[usize],
  now_us: Option<f64>,
  lane: &Lane,
) -> Result<Vec<(Vec<f64>, Vec<String>)>> {
  // budgets (3 keys each) and dimension sets numbered from 1 in order of first use; a
  // set's numbers are sent once, each call names its set
  let mut keys: Vec<Key> = vec![];
  let mut local: BTreeMap<&str, usize> = BTreeMap::new();
  let mut sets: Vec<&[Dimension]> = vec![];
  let mut params: Vec<Value> = vec![];
  let mut entries: Vec<Value> = vec![];
  for i in part {
    let call = &calls[*i];
    let b = *local.entry(call.key.as_str()).or_insert_with(|| {
      keys.extend([
        Key::from(call.key.as_str()),
        Key::from(format!("{}:r", call.key)),
        Key::from(format!("{}:d", call.key)),
        Key::from(format!("{}:t", call.key)),
        Key::from(format!("{}:a", call.key)),
      ]);
      keys.len() / 5
    });
    let p = match sets.iter().position(|s| *s == call.dimensions.as_slice()) {
      Some(p) => p + 1,
      None => {
        sets.push(&call.dimensions);
        params.push(Value::Integer(call.dimensions.len() as i64));
        for d in &call.dimensions {
          params.extend([number(d.limit), number(d.interval_us), number(d.max_burst), number(d.max_debt)]);
        }
        sets.len()
      }
    };
    entries.extend([
      Value::Integer(((b * SET_SHIFT + p) * 8) as i64 + call.op as i64),
      Value::String(call.id.as_str().into()),
      number(call.ttl_us),
      number(call.max_wait_us),
    ]);
    entries.extend(call.amounts.iter().map(|a| number(*a)));
    if let Some((id, share, max, ahead_us)) = &call.tenant {
      entries.extend([Value::String(id.as_str().into()), number(*share), number(*max), number(*ahead_us)]);
    }
  }
  let mut args: Vec<Value> = Vec::with_capacity(2 + params.len() + entries.len());
  args.extend([now_arg(now_us), Value::Integer(sets.len() as i64)]);
  args.extend(params);
  args.extend(entries);
  let reply = store.run(lane, &SCRIPT, keys, args).await?;
  let mut fields = reply.iter();
  let numbers = part
    .iter()
    .map(|i| {
      let width = width(&calls[*i]);
      let values = (0..width).map(|_| int(fields.next(), "budget")).collect::<Result<Vec<f64>>>()?;
      if values[0] == WRONG_TYPE {
        return Ok(values.iter().enumerate().map(|(k, v)| if k == 0 { *v } else { 0.0 }).collect());
      }
      Ok(values)
    })
    .collect::<Result<Vec<Vec<f64>>>>()?;
  // then the ids the stats calls list, in call order
  let mut results = Vec::with_capacity(numbers.len());
  for (i, values) in part.iter().zip(numbers) {
    let call = &calls[*i];
    let listed = if call.op == STATS && values[0] != WRONG_TYPE {
      let k = values[width(call) - TOP * (2 + call.dimensions.len()) - 1];
      if !(0.0..=TOP as f64).contains(&k) {
        return Err(malformed("budget"));
      }
      (0..k as usize)
        .map(|_| fields.next().and_then(|v| v.as_string()).ok_or_else(|| malformed("budget")))
        .collect::<Result<Vec<String>>>()?
    } else {
      vec![]
    };
    results.push((values, listed));
  }
  if fields.next().is_some() {
    return Err(malformed("budget"));
  }
  Ok(results)
}

#[cfg(test)]
mod tests {
  use super::*;
  use crate::error::ErrorKind;

  #[test]
  fn decodes_calls_and_refuses_bad_numbers() {
    let nums = [
      RESERVE, 1e6, 0.0, 2.0, 0.0, 0.0, 0.0, 10.0, 1e6, 0.0, 10.0, 3.0, 100.0, 6e7, 5.0, 105.0, 105.0, // 3 and 105
      STATS, 1.0, 0.0, 2.0, 0.0, 0.0, 0.0, 10.0, 1e6, 0.0, 10.0, 0.0, 100.0, 6e7, 5.0, 105.0, 0.0,
    ];
    let text = crate::codec::encode(&["k", "a", "", "k", "", ""]);
    let calls = Budget::decode(&text, &nums).unwrap();
    assert_eq!(calls.len(), 2);
    assert_eq!(calls[0].amounts, vec![3.0, 105.0]);
    let store = MemoryStore::new();
    let reply = Budget::memory(&store, &calls, 1e6).unwrap();
    let first = [1.0, 0.0, 1e6, 1.0, 0.0, 3.0, 3.0, 0.0, 105.0, 105.0, 0.0];
    // stats then lists the active tenants (none), padded to TOP
    assert_eq!(reply.numbers, [&first[..], &first[..], &[0.0; 2 + TOP * 4]].concat());
    assert_eq!(reply.text.as_deref(), Some(crate::codec::encode::<&str>(&[]).as_str()));
    // through a tenant: its share, max and use follow
    let nums = [RESERVE_AS, 1e6, 0.0, 1.0, 500_000.0, 1e6, 0.0, 10.0, 1e6, 0.0, 10.0, 2.0];
    let calls = Budget::decode(&crate::codec::encode(&["k2", "b", "t\n1"]), &nums).unwrap();
    let reply = Budget::memory(&store, &calls, 1e6).unwrap();
    assert_eq!(reply.numbers, [1.0, 0.0, 1e6, 1.0, 0.0, 2.0, 2.0, 0.0, 500_000.0, 1e6, 2.0]);
    for (bad, tenant) in [
      (vec![5.0, 1e6, 0.0, 1.0, 0.0, 0.0, 0.0, 10.0, 1e6, 0.0, 10.0, 1.0], ""),
      (vec![RESERVE, 1e6, 0.0, 0.0, 0.0, 0.0, 0.0], ""),
      (vec![RESERVE, 1e6, 0.0, 9.0, 0.0, 0.0, 0.0], ""),
      (vec![RESERVE, 1e6, 0.0, 2.0, 0.0, 0.0, 0.0, 10.0, 1e6, 0.0, 10.0, 1.0], ""),
      (vec![RESERVE, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 10.0, 1e6, 0.0, 10.0, 1.0], ""),
      (vec![RESERVE, 1e6, 0.0, 1.0, 0.0, 0.0, 0.0, 10.0, 1e6, 0.0, 10.0, 11.0], ""),
      (vec![RESERVE, 1e6, 0.0, 1.0, 0.0, 0.0, 0.0, 10.0, 1e6, 0.0, 10.0, 1.5], ""),
      (vec![RESERVE, 1e6, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 1e6, 0.0, 10.0, 0.0], ""),
      (vec![RESERVE, 1e6, 0.0, 1.0, 0.0, 0.0, 0.0, 10.0, 0.5, 0.0, 10.0, 0.0], ""),
      (vec![RESERVE, 1e6, 0.0, 1.0, 0.0, 0.0, 0.0, 10.0, 1e6, 0.0, -1.0, 0.0], ""),
      (vec![RESERVE, 1e6, 0.0, 1.0, 0.0, 0.0, 0.0, 10.0, 1e6, 0.0, 0.5, 0.0], ""),
      (vec![RESERVE_AS, 1e6, 0.0, 1.0, 0.5, 1e6, 0.0, 10.0, 1e6, 0.0, 10.0, 1.0], "t"),
      (vec![RESERVE_AS, 1e6, 0.0, 1.0, 2e6, 1e6, 0.0, 10.0, 1e6, 0.0, 10.0, 1.0], "t"),
      (vec![RESERVE_AS, 1e6, 0.0, 1.0, 1e6, 5e5, 0.0, 10.0, 1e6, 0.0, 10.0, 1.0], "t"),
      (vec![RESERVE_AS, 1e6, 0.0, 1.0, 0.0, 1e6, -1.0, 10.0, 1e6, 0.0, 10.0, 1.0], "t"),
      (vec![RESERVE_AS, 1e6, 0.0, 1.0, 0.0, 1e6, 0.0, 10.0, 1e6, 0.0, 10.0, 1.0], ""),
      (vec![STATS_OF, 1e6, 0.0, 1.0, 0.0, 0.0, 0.0, 10.0, 1e6, 0.0, 10.0, 0.0], "t"),
    ] {
      let text = crate::codec::encode(&["k", "a", tenant]);
      assert_eq!(Budget::decode(&text, &bad).unwrap_err().kind, ErrorKind::InvalidArgument, "{bad:?}");
    }
    let nums = [SETTLE, 1e6, 0.0, 1.0, 0.0, 0.0, 0.0, 10.0, 1e6, 0.0, 10.0, 50.0];
    assert!(Budget::decode(&crate::codec::encode(&["k", "a", ""]), &nums).is_ok(), "a settle may exceed the limit");
    assert!(Budget::decode(&crate::codec::encode(&["k", "a b", ""]), &nums).is_err());
    assert!(Budget::decode(&crate::codec::encode(&["k", "a"]), &nums).is_err());
  }

  #[test]
  fn the_script_holds_its_snippets() {
    assert!(!SCRIPT.lua.contains("\n-- @include "), "build.rs expands every @include of lua/budget.lua");
    assert!(SCRIPT.lua.contains("local function reserve_as(") && SCRIPT.lua.contains("local function load(b)"));
  }
}
