//! The only napi code: converts types and errors, holds store handles. No limiter logic.
//!
//! These functions and classes are the native layer under `lib/` (the public JS API); users
//! do not call them directly. Errors cross as `Error` whose message starts with the stable code
//! (`ERR_TIMEOUT: ...`); `lib/errors.js` turns them into `SluiceError` instances.
// napi-derive registers exports only outside `cfg(test)`, so a test build sees them unused.
#![cfg_attr(test, allow(dead_code))]

use crate::core::pacer::Mode;
use crate::error::{Error, ErrorKind};
use crate::store::fair::{decode_fair, FairCall};
use crate::store::limits::{decode_concurrent, decode_entry, encode_limit_decisions, LimitBatch, LIMIT_FIELDS};
use crate::store::memory::{system_now_us, MemoryStore};
use crate::store::redis::{pacer_batch_flat, DirectTask, Lane, Outcome, RedisOptions, RedisStore, Step};
use crate::store::windows::{encode_grants, encode_sliding, quota_timestamp, QuotaCall, QuotaMode, SlidingBatch};
use crate::store::{encode_decisions, validate_key, validate_params, validate_weight, PacerBatch};
use napi::bindgen_prelude::*;
use napi_derive::napi;
use std::sync::Arc;
use std::time::Duration;

fn js_error(e: Error) -> napi::Error {
  napi::Error::new(Status::GenericFailure, e.to_string())
}

/// `now_us` from JS: a negative value means "use the store's clock".
fn explicit_now(now_us: f64) -> std::result::Result<Option<f64>, Error> {
  if now_us < 0.0 {
    return Ok(None);
  }
  if now_us.is_finite() && now_us.fract() == 0.0 && now_us < 9e15 {
    Ok(Some(now_us))
  } else {
    Err(Error::argument(format!("clock time must be whole microseconds, got {now_us}")))
  }
}

/// The embedded store's clock: the explicit time, or the system clock.
fn memory_now(now_us: f64) -> Result<f64> {
  Ok(explicit_now(now_us).map_err(js_error)?.unwrap_or_else(system_now_us))
}

// The embedded store is driven through plain functions on an `External` handle: on this
// machine a napi class method costs ~260 ns per call, a function with an External ~130 ns,
// and the memory store's whole decision is cheaper than either.

/// The embedded store, with the JS `Float64Array` its steps exchange numbers through: given
/// once here, so a step converts two arguments instead of three (the typed array alone cost
/// 40-90 ns per call).
pub struct MemoryHandle {
  store: MemoryStore,
  io: parking_lot::Mutex<Float64Array>,
}

/// Creates the embedded store's engine (synchronous: no tokio hop). `io` (6 numbers) carries
/// the numbers of every `memoryPacerStep` both ways.
#[napi(catch_unwind, ts_return_type = "ExternalObject<'MemoryStore'>")]
pub fn memory_store_new(io: Float64Array) -> Result<External<MemoryHandle>> {
  if io.len() < 6 {
    return Err(js_error(Error::new(ErrorKind::Internal, "io buffer too small")));
  }
  Ok(External::new(MemoryHandle { store: MemoryStore::new(), io: parking_lot::Mutex::new(io) }))
}

/// Interns a key of the embedded store: the id to pass to `memoryPacerStep`, valid until a
/// `memorySweep` that returns true.
#[napi(catch_unwind)]
pub fn memory_intern(
  #[napi(ts_arg_type = "ExternalObject<'MemoryStore'>")] handle: &External<MemoryHandle>,
  key: String,
) -> Result<u32> {
  validate_key(&key).map_err(js_error)?;
  u32::try_from(handle.store.intern(&key)).map_err(|_| js_error(Error::new(ErrorKind::Internal, "too many keys")))
}

/// One pacer call on the embedded store, on an interned key. The store's `io` buffer carries
/// the numbers both ways (two arguments to convert instead of nine): in, `[weight, qps,
/// maxBurst, factor, pace (1/0), nowUs (-1 = system clock)]`; out, `[delayUs,
/// watermarkBefore, admitted (1/0)]` in its first three slots.
#[napi(catch_unwind)]
pub fn memory_pacer_step(
  #[napi(ts_arg_type = "ExternalObject<'MemoryStore'>")] handle: &External<MemoryHandle>,
  id: u32,
) -> Result<()> {
  let mut io = handle.io.lock();
  // SAFETY: this call is synchronous on the JS thread, so no JS code runs, and none can touch
  // the buffer, while it is read and written here; the reference held by the Float64Array
  // keeps the buffer alive for as long as the handle lives.
  let io = unsafe { io.as_mut() };
  let store = &handle.store;
  let (weight, pace) = (io[0], io[4]);
  let mode = if pace == 1.0 { Mode::Pace } else { Mode::RateLimit };
  let checked = validate_weight(weight)
    .and_then(|_| validate_params(io[1], io[2], io[3], mode))
    .and_then(|params| Ok((params, explicit_now(io[5])?)));
  let (params, now) = checked.map_err(js_error)?;
  let d = store.pacer_step_id(id as usize, &params, weight, now.unwrap_or_else(system_now_us)).map_err(js_error)?;
  io[0] = d.delay_us;
  io[1] = d.watermark_before;
  io[2] = if d.admitted { 1.0 } else { 0.0 };
  Ok(())
}

/// One rate-limiter call (bucket, window, leaky/points) on the embedded store, on an interned
/// key, through the `io` buffer: in, `[kind, weight, limit, intervalUs, maxWaitUs, nowUs]`
/// (see `LimitBatch` for the codes); out, `[allowed (1/0), remaining, retryAfterUs,
/// resetAfterUs]` in its first four slots.
#[napi(catch_unwind)]
pub fn memory_limit_step(
  #[napi(ts_arg_type = "ExternalObject<'MemoryStore'>")] handle: &External<MemoryHandle>,
  id: u32,
) -> Result<()> {
  let mut io = handle.io.lock();
  // SAFETY: as in `memory_pacer_step`: synchronous on the JS thread, buffer kept alive.
  let io = unsafe { io.as_mut() };
  let (kind, params, weight, action) = decode_entry(&io[..LIMIT_FIELDS]).map_err(js_error)?;
  let now = memory_now(io[5])?;
  let d = handle.store.limit_step_id(id as usize, kind, &params, weight, action, now).map_err(js_error)?;
  io[..4].copy_from_slice(&[if d.allowed { 1.0 } else { 0.0 }, d.remaining, d.retry_after_us, d.reset_after_us]);
  Ok(())
}

/// The answer to a concurrent-limiter operation on the embedded store.
#[napi(object)]
pub struct ConcurrentReply {
  /// See `core::concurrent::Reply::values`.
  pub values: Vec<f64>,
  /// Slots handed to waiters: `"<waiter id> <token>"`, as the Redis store publishes them.
  pub grants: Vec<String>,
}

/// One concurrent-limiter operation on the embedded store: `op` (1 acquire, 2 release,
/// 3 extend, 4 poll, 5 cancel, 6 stats), the lease or waiter id, `[limit, lockUs, waitUs,
/// ttlMs]`.
#[napi(catch_unwind)]
pub fn memory_concurrent(
  #[napi(ts_arg_type = "ExternalObject<'MemoryStore'>")] handle: &External<MemoryHandle>,
  key: String,
  op: f64,
  id: String,
  nums: Float64Array,
  now_us: f64,
) -> Result<ConcurrentReply> {
  validate_key(&key).map_err(js_error)?;
  let (request, ttl_ms) = decode_concurrent(op, &id, &nums).map_err(js_error)?;
  let reply = handle.store.concurrent(&key, &id, request, ttl_ms, memory_now(now_us)?);
  Ok(ConcurrentReply {
    values: reply.values,
    grants: reply.grants.into_iter().map(|(id, token)| format!("{id} {token}")).collect(),
  })
}

// The embedded store's calls that answer several numbers return a JS array, not a Float64Array
// over a Rust Vec: such an external buffer is freed by a finalizer that Node runs only when the
// event loop turns, so a loop of synchronous calls that never yields (a batch job) grew by
// ~400 B per call without bound (issue 15).

/// Sliding-window calls on the embedded store, in the flat encoding of `SlidingBatch`
/// (`keys` encoded by lib/codec.js; per call `[op, weight, windowCount, then limit,
/// intervalUs per window]`); per call `[allowed, retryAfterUs, then remaining, retryAfterUs
/// per window]`.
#[napi(catch_unwind)]
pub fn memory_sliding(
  #[napi(ts_arg_type = "ExternalObject<'MemoryStore'>")] handle: &External<MemoryHandle>,
  keys: String,
  nums: Float64Array,
  now_us: f64,
) -> Result<Vec<f64>> {
  let batch = SlidingBatch::decode(&keys, &nums).map_err(js_error)?;
  Ok(encode_sliding(&handle.store.sliding_batch(&batch, memory_now(now_us)?)))
}

/// A quota call on the embedded store (mode 1 check, 2 checkAndUse, 3 use), in the flat
/// encoding of `QuotaCall`, at `timestamp` (whole seconds); `[timestamp, per request
/// granted, then reached (0/1) per quota]` (just the timestamp for use).
#[napi(catch_unwind)]
pub fn memory_quota(
  #[napi(ts_arg_type = "ExternalObject<'MemoryStore'>")] handle: &External<MemoryHandle>,
  keys: String,
  nums: Float64Array,
  mode: f64,
  timestamp: f64,
  now_us: f64,
) -> Result<Vec<f64>> {
  let call = QuotaCall::decode(&keys, &nums).map_err(js_error)?;
  let mode = QuotaMode::from_code(mode).map_err(js_error)?;
  let now = memory_now(now_us)?;
  let t = quota_timestamp(timestamp).map_err(js_error)?.unwrap_or((now / 1e6).floor());
  Ok(encode_grants(t, &handle.store.quota(&call, mode, t, now)))
}

/// A pacer block: `nums` = `[qps, maxBurst, factor, durationUs]`, validated.
fn decode_pacer_block(key: &str, nums: &[f64]) -> std::result::Result<(crate::core::pacer::Params, f64), Error> {
  validate_key(key)?;
  let [qps, max_burst, factor, duration_us] = *nums else {
    return Err(Error::argument("malformed pacer block"));
  };
  let params = validate_params(qps, max_burst, factor, Mode::RateLimit)?;
  if !(duration_us.is_finite() && duration_us.fract() == 0.0 && (1.0..=315_360_000_000_000.0).contains(&duration_us)) {
    return Err(Error::argument(format!("a block must last whole µs in [1, 10 years], got {duration_us}")));
  }
  Ok((params, duration_us))
}

/// Blocks a pacer on the embedded store (see `pacer::block`); µs until the block ends.
#[napi(catch_unwind)]
pub fn memory_pacer_block(
  #[napi(ts_arg_type = "ExternalObject<'MemoryStore'>")] handle: &External<MemoryHandle>,
  key: String,
  nums: Float64Array,
  now_us: f64,
) -> Result<f64> {
  let (params, duration_us) = decode_pacer_block(&key, &nums).map_err(js_error)?;
  Ok(handle.store.pacer_block(&key, &params, duration_us, memory_now(now_us)?))
}

/// Blocks a pacer on a pool lane; resolves with `[µs until the block ends]`.
#[napi(catch_unwind, ts_return_type = "Promise<Float64Array>")]
pub fn redis_pacer_block<'env>(
  env: &'env Env,
  store: &NativeRedisStore,
  key: String,
  nums: Float64Array,
  now_us: f64,
  lane: u32,
) -> Result<PromiseRaw<'env, Float64Array>> {
  StoreCall::pacer_block(&key, &nums, now_us)?.spawn(env, store, lane)
}

/// Fair-tenant assignments on the embedded store, in the flat encoding of `decode_fair`
/// (`keys` and `ids` encoded by lib/codec.js; per call `[mode, horizonMs, granularityMs,
/// ruleCount, then perMs per rule]`); per call, the tenant's count in each rule's window.
#[napi(catch_unwind)]
pub fn memory_fair(
  #[napi(ts_arg_type = "ExternalObject<'MemoryStore'>")] handle: &External<MemoryHandle>,
  keys: String,
  ids: String,
  nums: Float64Array,
  now_us: f64,
) -> Result<Vec<f64>> {
  let calls = decode_fair(&keys, &ids, &nums).map_err(js_error)?;
  Ok(handle.store.fair_batch(&calls, memory_now(now_us)?).concat())
}

/// Drops expired keys of the embedded store once enough have accumulated; true = ids were
/// freed and every id handed out before is invalid.
#[napi(catch_unwind)]
pub fn memory_sweep(
  #[napi(ts_arg_type = "ExternalObject<'MemoryStore'>")] handle: &External<MemoryHandle>,
  now_us: f64,
) -> Result<bool> {
  Ok(handle.store.sweep(memory_now(now_us)?))
}

/// A batch on the embedded store, in the flat encoding of `PacerBatch::decode`; results per
/// member.
#[napi(catch_unwind)]
pub fn memory_pacer_batch(
  #[napi(ts_arg_type = "ExternalObject<'MemoryStore'>")] handle: &External<MemoryHandle>,
  keys: String,
  args: Float64Array,
  now_us: f64,
) -> Result<Vec<f64>> {
  let batch = PacerBatch::decode(&keys, &args).map_err(js_error)?;
  Ok(encode_decisions(&handle.store.pacer_batch(&batch, memory_now(now_us)?)))
}

/// Options of `connectRedis`; numbers arrive as doubles and are checked here (a napi `u32`
/// would silently wrap a negative).
#[napi(object)]
pub struct NativeRedisOptions {
  pub url: Option<String>,
  pub cluster: Option<Vec<String>>,
  pub pool_size: Option<f64>,
  pub command_timeout_ms: Option<f64>,
  pub connect_timeout_ms: Option<f64>,
  /// Return the store even when Redis cannot be reached yet (it keeps dialling).
  pub start_down: Option<bool>,
  /// TLS settings for rediss:// URLs.
  pub tls: Option<NativeTlsOptions>,
}

/// `RedisStore.connect`'s `tls` option, PEM text (Buffers are decoded in JS).
#[napi(object)]
pub struct NativeTlsOptions {
  pub ca: Option<String>,
  pub cert: Option<String>,
  pub key: Option<String>,
  pub reject_unauthorized: Option<bool>,
}

fn millis(name: &str, value: Option<f64>, default: Duration) -> std::result::Result<Duration, Error> {
  match value {
    None => Ok(default),
    Some(ms) if (1.0..=3_600_000.0).contains(&ms) && ms.fract() == 0.0 => Ok(Duration::from_millis(ms as u64)),
    Some(ms) => Err(Error::config(format!("{name} must be an integer in [1, 3600000], got {ms}"))),
  }
}

fn redis_options(o: NativeRedisOptions) -> std::result::Result<RedisOptions, Error> {
  let defaults = RedisOptions::default();
  let pool_size = match o.pool_size {
    None => defaults.pool_size,
    Some(n) if n.fract() == 0.0 && (1.0..=64.0).contains(&n) => n as usize,
    Some(n) => return Err(Error::config(format!("poolSize must be an integer in [1, 64], got {n}"))),
  };
  let url = o.url.unwrap_or(defaults.url);
  let cluster = o.cluster.unwrap_or_default();
  for u in std::iter::once(&url).chain(cluster.iter()) {
    if !(u.starts_with("redis://") || u.starts_with("rediss://")) {
      let shown = crate::store::redis::redact_url(u);
      return Err(Error::config(format!("Redis URLs must start with redis:// or rediss://, got {shown:?}")));
    }
  }
  Ok(RedisOptions {
    url,
    cluster,
    pool_size,
    command_timeout: millis("commandTimeoutMs", o.command_timeout_ms, defaults.command_timeout)?,
    connect_timeout: millis("connectTimeoutMs", o.connect_timeout_ms, defaults.connect_timeout)?,
    start_down: o.start_down.unwrap_or(false),
    tls: o.tls.map(|t| crate::store::redis::TlsOptions {
      ca: t.ca,
      cert: t.cert,
      key: t.key,
      reject_unauthorized: t.reject_unauthorized.unwrap_or(true),
    }),
  })
}

/// Connects a pool (every connection up, cluster slots known) or fails within the connect
/// timeout.
#[napi(catch_unwind)]
pub async fn connect_redis(options: NativeRedisOptions) -> Result<NativeRedisStore> {
  let options = redis_options(options).map_err(js_error)?;
  let store = RedisStore::connect(options).await.map_err(js_error)?;
  Ok(NativeRedisStore { inner: Arc::new(store) })
}

/// A store call on a Redis store, decoded and validated on the JS thread; it makes its script
/// calls on the lane it is run on (a pool connection, or the JS thread's direct socket).
enum StoreCall {
  Pacer(PacerBatch, Option<f64>),
  Limit(LimitBatch, Option<f64>),
  Sliding(SlidingBatch, Option<f64>),
  Quota(Vec<(QuotaCall, QuotaMode, Option<f64>)>),
  Concurrent(Vec<(String, String, f64, [f64; 4])>, Option<f64>),
  Fair(Vec<FairCall>, Option<f64>),
  PacerBlock(String, crate::core::pacer::Params, f64, Option<f64>),
}

impl StoreCall {
  fn pacer(keys: &str, args: &[f64], now_us: f64) -> Result<StoreCall> {
    let batch = PacerBatch::decode(keys, args).map_err(js_error)?;
    Ok(StoreCall::Pacer(batch, explicit_now(now_us).map_err(js_error)?))
  }

  fn limit(keys: &str, args: &[f64], now_us: f64) -> Result<StoreCall> {
    let batch = LimitBatch::decode(keys, args).map_err(js_error)?;
    Ok(StoreCall::Limit(batch, explicit_now(now_us).map_err(js_error)?))
  }

  fn sliding(keys: &str, nums: &[f64], now_us: f64) -> Result<StoreCall> {
    let batch = SlidingBatch::decode(keys, nums).map_err(js_error)?;
    Ok(StoreCall::Sliding(batch, explicit_now(now_us).map_err(js_error)?))
  }

  fn quota(keys: &[String], heads: &[f64], nums: &[f64]) -> Result<StoreCall> {
    let malformed = || js_error(Error::argument("malformed quota batch"));
    if heads.len() != keys.len() * 3 {
      return Err(malformed());
    }
    let mut calls = Vec::with_capacity(keys.len());
    let mut at = 0usize;
    for (keys, head) in keys.iter().zip(heads.chunks(3)) {
      let len = head[0];
      if !(len >= 0.0 && len.fract() == 0.0 && at + len as usize <= nums.len()) {
        return Err(malformed());
      }
      let call = QuotaCall::decode(keys, &nums[at..at + len as usize]).map_err(js_error)?;
      at += len as usize;
      let mode = QuotaMode::from_code(head[1]).map_err(js_error)?;
      calls.push((call, mode, quota_timestamp(head[2]).map_err(js_error)?));
    }
    if at != nums.len() {
      return Err(malformed());
    }
    Ok(StoreCall::Quota(calls))
  }

  fn pacer_block(key: &str, nums: &[f64], now_us: f64) -> Result<StoreCall> {
    let (params, duration_us) = decode_pacer_block(key, nums).map_err(js_error)?;
    Ok(StoreCall::PacerBlock(key.to_owned(), params, duration_us, explicit_now(now_us).map_err(js_error)?))
  }

  fn fair(keys: &str, ids: &str, nums: &[f64], now_us: f64) -> Result<StoreCall> {
    let calls = decode_fair(keys, ids, nums).map_err(js_error)?;
    Ok(StoreCall::Fair(calls, explicit_now(now_us).map_err(js_error)?))
  }

  fn concurrent(keys: &str, ids: &str, nums: &[f64], now_us: f64) -> Result<StoreCall> {
    let mut ops = vec![];
    let (mut keys, mut ids) = (crate::codec::parts(keys), crate::codec::parts(ids));
    for f in nums.chunks(5) {
      let (Some(key), Some(id), [op, limit, lock_us, wait_us, ttl_ms]) = (keys.next(), ids.next(), f) else {
        return Err(js_error(Error::argument("malformed concurrent batch")));
      };
      let (key, id) = (key.map_err(js_error)?, id.map_err(js_error)?);
      validate_key(key).map_err(js_error)?;
      let nums = [*limit, *lock_us, *wait_us, *ttl_ms];
      decode_concurrent(*op, id, &nums).map_err(js_error)?;
      ops.push((key.to_owned(), id.to_owned(), *op, nums));
    }
    if keys.next().is_some() || ids.next().is_some() {
      return Err(js_error(Error::argument("malformed concurrent batch")));
    }
    Ok(StoreCall::Concurrent(ops, explicit_now(now_us).map_err(js_error)?))
  }

  async fn run(self, store: Arc<RedisStore>, lane: Lane) -> crate::error::Result<Outcome> {
    let lane = &lane;
    Ok(match self {
      StoreCall::Pacer(batch, now) => Outcome::Numbers(pacer_batch_flat(&store, &batch, now, lane).await?),
      StoreCall::Limit(batch, now) => {
        Outcome::Numbers(encode_limit_decisions(&store.limit_batch(&batch, now, lane).await?))
      }
      StoreCall::Sliding(batch, now) => {
        Outcome::Numbers(encode_sliding(&store.sliding_batch(&batch, now, lane).await?))
      }
      StoreCall::Quota(calls) => {
        let mut out = vec![];
        for (t, grants) in store.quota_batch(&calls, lane).await? {
          let encoded = encode_grants(t, &grants);
          out.push(encoded.len() as f64);
          out.extend(encoded);
        }
        Outcome::Numbers(out)
      }
      StoreCall::Concurrent(ops, now) => {
        let (values, grants) = store.concurrent_batch(&ops, now, lane).await?;
        Outcome::Concurrent(values, grants)
      }
      StoreCall::PacerBlock(key, params, duration_us, now) => {
        Outcome::Numbers(vec![store.pacer_block(&key, &params, duration_us, now, lane).await?])
      }
      StoreCall::Fair(calls, now) => Outcome::Numbers(store.fair_batch(&calls, now, lane).await?.concat()),
    })
  }

  /// Runs on a pool connection, spawned in call order: its ticket is taken here, on the JS
  /// thread, and it sends on its turn (see `SendOrder`). Resolves with the flat numbers.
  fn spawn<'env>(self, env: &'env Env, store: &NativeRedisStore, lane: u32) -> Result<PromiseRaw<'env, Float64Array>> {
    let inner = store.inner.clone();
    let ticket = inner.order.ticket();
    let call = self.run(inner.clone(), Lane::Pool(lane));
    env.spawn_future(async move {
      match inner.order.run(ticket, call).await.map_err(js_error)? {
        Outcome::Numbers(out) => Ok(Float64Array::new(out)),
        Outcome::Concurrent(..) => Err(js_error(Error::new(ErrorKind::Internal, "unexpected concurrent reply"))),
      }
    })
  }

  /// Starts on the direct lane: nothing is sent until `redisDirectStep`.
  fn direct(self, store: &NativeRedisStore) -> External<NativeTask> {
    let inner = store.inner.clone();
    External::new(parking_lot::Mutex::new(DirectTask::new(move |lane| self.run(inner, lane))))
  }
}

/// A store call on the direct lane, as JS holds it.
pub type NativeTask = parking_lot::Mutex<DirectTask<'static>>;

// Every store call has two doors: `redis<Kind>Batch` runs it on a pool connection (`lane`)
// and resolves with its result; `redis<Kind>Direct` returns a task that `redisDirectStep`
// drives on the JS thread's own socket (lib/direct.js). Functions rather than async methods:
// a method keeps a reference to `this` per call, and releasing it costs a second wake-up of
// the JS thread.

/// Pacer calls (`PacerBatch::decode`'s flat encoding) on a pool lane; results per member.
#[napi(catch_unwind, ts_return_type = "Promise<Float64Array>")]
pub fn redis_pacer_batch<'env>(
  env: &'env Env,
  store: &NativeRedisStore,
  keys: String,
  args: Float64Array,
  now_us: f64,
  lane: u32,
) -> Result<PromiseRaw<'env, Float64Array>> {
  StoreCall::pacer(&keys, &args, now_us)?.spawn(env, store, lane)
}

/// Pacer calls on the direct lane.
#[napi(catch_unwind, ts_return_type = "ExternalObject<'DirectTask'>")]
pub fn redis_pacer_direct(
  store: &NativeRedisStore,
  keys: String,
  args: Float64Array,
  now_us: f64,
) -> Result<External<NativeTask>> {
  Ok(StoreCall::pacer(&keys, &args, now_us)?.direct(store))
}

/// Rate-limiter calls (`LimitBatch::decode`'s flat encoding) on a pool lane.
#[napi(catch_unwind, ts_return_type = "Promise<Float64Array>")]
pub fn redis_limit_batch<'env>(
  env: &'env Env,
  store: &NativeRedisStore,
  keys: String,
  args: Float64Array,
  now_us: f64,
  lane: u32,
) -> Result<PromiseRaw<'env, Float64Array>> {
  StoreCall::limit(&keys, &args, now_us)?.spawn(env, store, lane)
}

/// Rate-limiter calls on the direct lane.
#[napi(catch_unwind, ts_return_type = "ExternalObject<'DirectTask'>")]
pub fn redis_limit_direct(
  store: &NativeRedisStore,
  keys: String,
  args: Float64Array,
  now_us: f64,
) -> Result<External<NativeTask>> {
  Ok(StoreCall::limit(&keys, &args, now_us)?.direct(store))
}

/// Sliding-window calls (the flat encoding of `memorySliding`) on a pool lane.
#[napi(catch_unwind, ts_return_type = "Promise<Float64Array>")]
pub fn redis_sliding_batch<'env>(
  env: &'env Env,
  store: &NativeRedisStore,
  keys: String,
  nums: Float64Array,
  now_us: f64,
  lane: u32,
) -> Result<PromiseRaw<'env, Float64Array>> {
  StoreCall::sliding(&keys, &nums, now_us)?.spawn(env, store, lane)
}

/// Sliding-window calls on the direct lane.
#[napi(catch_unwind, ts_return_type = "ExternalObject<'DirectTask'>")]
pub fn redis_sliding_direct(
  store: &NativeRedisStore,
  keys: String,
  nums: Float64Array,
  now_us: f64,
) -> Result<External<NativeTask>> {
  Ok(StoreCall::sliding(&keys, &nums, now_us)?.direct(store))
}

/// Quota calls on a pool lane: `keys[i]` and `heads[3 i ..]` = `[nums length, mode (1 check,
/// 2 checkAndUse, 3 use), timestamp (-1 = Redis' clock)]` per call, their `nums` (as
/// `memoryQuota`) concatenated. Resolves with, per call, its result length then its result.
/// Atomic when a call's counters share a slot; across slots, see `store::redis::windows`.
#[napi(catch_unwind, ts_return_type = "Promise<Float64Array>")]
pub fn redis_quota_batch<'env>(
  env: &'env Env,
  store: &NativeRedisStore,
  keys: Vec<String>,
  heads: Float64Array,
  nums: Float64Array,
  lane: u32,
) -> Result<PromiseRaw<'env, Float64Array>> {
  StoreCall::quota(&keys, &heads, &nums)?.spawn(env, store, lane)
}

/// Quota calls on the direct lane.
#[napi(catch_unwind, ts_return_type = "ExternalObject<'DirectTask'>")]
pub fn redis_quota_direct(
  store: &NativeRedisStore,
  keys: Vec<String>,
  heads: Float64Array,
  nums: Float64Array,
) -> Result<External<NativeTask>> {
  Ok(StoreCall::quota(&keys, &heads, &nums)?.direct(store))
}

/// Statistics operations on a pool lane (see `lua/stats.lua`): `ops` = per operation `<op>
/// <key count> <key>... <arg count> <arg>...`, every part encoded by lib/codec.js (one string
/// to convert, not one per part: a flush of 10,000 limiters has about 150,000 parts; no byte
/// of a name is read as structure); resolves with each operation's reply.
#[napi(catch_unwind, ts_return_type = "Promise<string[][]>")]
pub fn redis_stats<'env>(
  env: &'env Env,
  store: &NativeRedisStore,
  ops: String,
  lane: u32,
) -> Result<PromiseRaw<'env, Vec<Vec<String>>>> {
  let ops = crate::store::redis::decode_stats(&ops).map_err(js_error)?;
  let inner = store.inner.clone();
  env.spawn_future(async move { inner.stats_ops(&ops, &Lane::Pool(lane)).await.map_err(js_error) })
}

/// Fair-tenant assignments on a pool lane (as `memoryFair`); one script call per slot.
#[napi(catch_unwind, ts_return_type = "Promise<Float64Array>")]
pub fn redis_fair_batch<'env>(
  env: &'env Env,
  store: &NativeRedisStore,
  keys: String,
  ids: String,
  nums: Float64Array,
  now_us: f64,
  lane: u32,
) -> Result<PromiseRaw<'env, Float64Array>> {
  StoreCall::fair(&keys, &ids, &nums, now_us)?.spawn(env, store, lane)
}

/// Fair-tenant assignments on the direct lane.
#[napi(catch_unwind, ts_return_type = "ExternalObject<'DirectTask'>")]
pub fn redis_fair_direct(
  store: &NativeRedisStore,
  keys: String,
  ids: String,
  nums: Float64Array,
  now_us: f64,
) -> Result<External<NativeTask>> {
  Ok(StoreCall::fair(&keys, &ids, &nums, now_us)?.direct(store))
}

/// Concurrent-limiter operations on a pool lane: `keys` and `ids` encoded by lib/codec.js,
/// `nums` = 5 per operation (`op, limit, lockUs, waitUs, ttlMs`, as `memoryConcurrent`). Resolves with
/// `values`, 9 numbers per operation (its reply, zero-padded), and `grants`, the slots it
/// handed to waiters (also published on `<key>:wake`).
#[napi(catch_unwind, ts_return_type = "Promise<ConcurrentBatchReply>")]
pub fn redis_concurrent_batch<'env>(
  env: &'env Env,
  store: &NativeRedisStore,
  keys: String,
  ids: String,
  nums: Float64Array,
  now_us: f64,
  lane: u32,
) -> Result<PromiseRaw<'env, ConcurrentBatchReply>> {
  let call = StoreCall::concurrent(&keys, &ids, &nums, now_us)?;
  let inner = store.inner.clone();
  let ticket = inner.order.ticket();
  let call = call.run(inner.clone(), Lane::Pool(lane));
  env.spawn_future(async move {
    match inner.order.run(ticket, call).await.map_err(js_error)? {
      Outcome::Concurrent(values, grants) => Ok(ConcurrentBatchReply { values: Float64Array::new(values), grants }),
      Outcome::Numbers(_) => Err(js_error(Error::new(ErrorKind::Internal, "unexpected reply"))),
    }
  })
}

/// Concurrent-limiter operations on the direct lane.
#[napi(catch_unwind, ts_return_type = "ExternalObject<'DirectTask'>")]
pub fn redis_concurrent_direct(
  store: &NativeRedisStore,
  keys: String,
  ids: String,
  nums: Float64Array,
  now_us: f64,
) -> Result<External<NativeTask>> {
  Ok(StoreCall::concurrent(&keys, &ids, &nums, now_us)?.direct(store))
}

/// What to do next for a direct task: write `out` (`count` commands) and feed their replies
/// back to `redisDirectStep`; or, when `out` is absent, the call is done with `values` (and,
/// for concurrent operations, `grants`).
#[napi(object, object_from_js = false)]
pub struct DirectStep {
  pub out: Option<Buffer>,
  pub count: u32,
  pub values: Option<Float64Array>,
  pub grants: Option<Vec<String>>,
}

/// Runs a direct task until it needs replies: first with no replies, then with the replies
/// of the `count` commands it last handed out, concatenated as Redis sent them. A failed
/// call throws its store error.
#[napi(catch_unwind)]
pub fn redis_direct_step(
  #[napi(ts_arg_type = "ExternalObject<'DirectTask'>")] task: &External<NativeTask>,
  replies: Option<Buffer>,
) -> Result<DirectStep> {
  let step = task.lock().step(replies.as_deref());
  match step {
    Step::Send(out, count) => Ok(DirectStep { out: Some(out.into()), count: count as u32, values: None, grants: None }),
    Step::Done(Ok(Outcome::Numbers(values))) => {
      Ok(DirectStep { out: None, count: 0, values: Some(Float64Array::new(values)), grants: None })
    }
    Step::Done(Ok(Outcome::Concurrent(values, grants))) => {
      Ok(DirectStep { out: None, count: 0, values: Some(Float64Array::new(values)), grants: Some(grants) })
    }
    Step::Done(Err(e)) => Err(js_error(e)),
  }
}

/// The answer to `redisConcurrentBatch`.
#[napi(object)]
pub struct ConcurrentBatchReply {
  pub values: Float64Array,
  pub grants: Vec<String>,
}

/// Subscribes the store's listener to a grant channel; resolves once Redis confirmed.
#[napi(catch_unwind, ts_return_type = "Promise<void>")]
pub fn redis_subscribe<'env>(
  env: &'env Env,
  store: &NativeRedisStore,
  channel: String,
) -> Result<PromiseRaw<'env, ()>> {
  let inner = store.inner.clone();
  env.spawn_future(async move { inner.subscribe(&channel).await.map_err(js_error) })
}

#[napi(catch_unwind, ts_return_type = "Promise<void>")]
pub fn redis_unsubscribe<'env>(
  env: &'env Env,
  store: &NativeRedisStore,
  channel: String,
) -> Result<PromiseRaw<'env, ()>> {
  let inner = store.inner.clone();
  env.spawn_future(async move { inner.unsubscribe(&channel).await.map_err(js_error) })
}

/// Grant messages received since the last call (`"<waiter id> <token>"`, or `"*"`: re-poll
/// every waiter), waiting for at least one; an empty list after `redisStopWakes` or close.
#[napi(catch_unwind, ts_return_type = "Promise<string[]>")]
pub fn redis_next_wakes<'env>(env: &'env Env, store: &NativeRedisStore) -> Result<PromiseRaw<'env, Vec<String>>> {
  let inner = store.inner.clone();
  env.spawn_future(async move { Ok(inner.next_wakes().await) })
}

/// Ends a pending `redisNextWakes` with an empty list.
#[napi(catch_unwind)]
pub fn redis_stop_wakes(store: &NativeRedisStore) {
  store.inner.stop_wakes();
}

/// A connected Redis store.
#[napi]
pub struct NativeRedisStore {
  inner: Arc<RedisStore>,
}

#[napi]
impl NativeRedisStore {
  /// Whether this store talks to a Redis Cluster.
  #[napi(getter)]
  pub fn is_cluster(&self) -> bool {
    self.inner.is_cluster()
  }

  /// Whether Redis was reached when `connectRedis` returned (false only with `startDown`).
  #[napi(getter)]
  pub fn started_up(&self) -> bool {
    self.inner.started_up()
  }

  /// Closes the pool; later calls fail with `ERR_CLOSED`.
  #[napi(catch_unwind)]
  pub async fn close(&self) -> Result<()> {
    self.inner.close().await;
    Ok(())
  }
}

/// One tokio worker: the Redis path is I/O-bound and its batches are already coalesced, and
/// on a small machine every cross-thread hand-off between two workers costs a wake-up.
#[napi_derive::module_init]
fn init_runtime() {
  if let Ok(rt) = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build() {
    napi::bindgen_prelude::create_custom_tokio_runtime(rt);
  }
}
