//! The per-kind napi functions JS called before the kind registry, each now a thin wrapper
//! over the registry's entries (`memoryCall`/`memoryStep`, `redisCall`/`redisDirect`), with
//! its old arguments and results. To be deleted once lib/ calls the registry's entries.

use super::memory::{call_of, step, Handle};
use super::redis::{decode, direct, spawn, NativeRedisStore, NativeTask, Pending};
use super::{js, js_error};
use crate::error::{Error, ErrorKind};
use crate::store::kinds::concurrent::{decode_concurrent, decode_ops, Concurrent};
use crate::store::kinds::fair::{decode_fair, Fair};
use crate::store::kinds::limit::Limit;
use crate::store::kinds::pacer::{Pacer, BLOCK};
use crate::store::kinds::quota::Quota;
use crate::store::kinds::sliding::Sliding;
use crate::store::kinds::{explicit_now, memory_now, Kind, Registered, Reply, WRONG_TYPE};
use crate::store::redis::calls::wrong_type_message;
use crate::store::validate_key;
use napi::bindgen_prelude::*;
use napi_derive::napi;

fn numbers(reply: Reply) -> Result<Float64Array> {
  Ok(Float64Array::new(reply.numbers))
}

fn grants(text: Option<String>) -> Result<Vec<String>> {
  Ok(js(crate::codec::decode(text.as_deref().unwrap_or("")))?.into_iter().map(str::to_owned).collect())
}

/// A pacer block's call in the pacer's encoding: `nums` = `[qps, maxBurst, factor, durationUs]`.
fn block_call(key: &str, nums: &[f64]) -> Result<(String, [f64; 6])> {
  js(validate_key(key))?;
  let [qps, max_burst, factor, duration_us] = *nums else {
    return Err(js_error(Error::argument("malformed pacer block")));
  };
  Ok((crate::codec::encode(&[key]), [1.0, BLOCK, duration_us, qps, max_burst, factor]))
}

/// Legacy: `memoryStep` of the pacer.
#[napi(catch_unwind)]
pub fn memory_pacer_step(
  #[napi(ts_arg_type = "ExternalObject<'MemoryStore'>")] handle: &Handle,
  id: u32,
) -> Result<()> {
  step(handle, Pacer::CODE, id)
}

/// Legacy: `memoryStep` of the counting limiters.
#[napi(catch_unwind)]
pub fn memory_limit_step(
  #[napi(ts_arg_type = "ExternalObject<'MemoryStore'>")] handle: &Handle,
  id: u32,
) -> Result<()> {
  step(handle, Limit::CODE, id)
}

/// The answer to a concurrent-limiter operation on the embedded store.
#[napi(object)]
pub struct ConcurrentReply {
  /// See `core::concurrent::Reply::values`.
  pub values: Vec<f64>,
  /// Slots handed to waiters: `"<waiter id> <token>"`, as the Redis store publishes them.
  pub grants: Vec<String>,
}

/// Legacy: one concurrent operation (`op`, the lease or waiter id, `[limit, lockUs, waitUs,
/// ttlMs]`) on the embedded store; its reply unpadded.
#[napi(catch_unwind)]
pub fn memory_concurrent(
  #[napi(ts_arg_type = "ExternalObject<'MemoryStore'>")] handle: &Handle,
  key: String,
  op: f64,
  id: String,
  nums: Float64Array,
  now_us: f64,
) -> Result<ConcurrentReply> {
  js(validate_key(&key))?;
  let (request, ttl_ms) = js(decode_concurrent(op, &id, &nums))?;
  let reply = handle.store.concurrent(&key, &id, request, ttl_ms, js(memory_now(now_us))?);
  let grants = reply.grants.iter().map(|(id, token)| crate::store::kinds::concurrent::grant_text(id, *token));
  Ok(ConcurrentReply { values: reply.values, grants: grants.collect() })
}

/// Legacy: `memoryCall` of sliding-window calls.
#[napi(catch_unwind)]
pub fn memory_sliding(
  #[napi(ts_arg_type = "ExternalObject<'MemoryStore'>")] handle: &Handle,
  keys: String,
  nums: Float64Array,
  now_us: f64,
) -> Result<Vec<f64>> {
  Ok(call_of::<Sliding>(&handle.store, &keys, &nums, now_us)?.numbers)
}

/// Legacy: one quota call (`mode`, `timestamp` apart) on the embedded store; its result
/// without its length.
#[napi(catch_unwind)]
pub fn memory_quota(
  #[napi(ts_arg_type = "ExternalObject<'MemoryStore'>")] handle: &Handle,
  keys: String,
  nums: Float64Array,
  mode: f64,
  timestamp: f64,
  now_us: f64,
) -> Result<Vec<f64>> {
  let mut call = vec![nums.len() as f64, mode, timestamp];
  call.extend_from_slice(&nums);
  let mut out = call_of::<Quota>(&handle.store, &keys, &call, now_us)?.numbers;
  out.remove(0);
  Ok(out)
}

/// Legacy: a pacer block on the embedded store; µs until the block ends.
#[napi(catch_unwind)]
pub fn memory_pacer_block(
  #[napi(ts_arg_type = "ExternalObject<'MemoryStore'>")] handle: &Handle,
  key: String,
  nums: Float64Array,
  now_us: f64,
) -> Result<f64> {
  let (text, call) = block_call(&key, &nums)?;
  Ok(call_of::<Pacer>(&handle.store, &text, &call, now_us)?.numbers[0])
}

/// Legacy: fair-tenant assignments on the embedded store (keys and ids as two lists).
#[napi(catch_unwind)]
pub fn memory_fair(
  #[napi(ts_arg_type = "ExternalObject<'MemoryStore'>")] handle: &Handle,
  keys: String,
  ids: String,
  nums: Float64Array,
  now_us: f64,
) -> Result<Vec<f64>> {
  let calls = js(decode_fair(&keys, &ids, &nums))?;
  Ok(js(Fair::memory(&handle.store, &calls, js(memory_now(now_us))?))?.numbers)
}

/// Legacy: `memoryCall` of pacer calls.
#[napi(catch_unwind)]
pub fn memory_pacer_batch(
  #[napi(ts_arg_type = "ExternalObject<'MemoryStore'>")] handle: &Handle,
  keys: String,
  args: Float64Array,
  now_us: f64,
) -> Result<Vec<f64>> {
  Ok(call_of::<Pacer>(&handle.store, &keys, &args, now_us)?.numbers)
}

/// Legacy: a pacer block on a pool lane; resolves with `[µs until the block ends]`.
#[napi(catch_unwind, ts_return_type = "Promise<Float64Array>")]
pub fn redis_pacer_block<'env>(
  env: &'env Env,
  store: &NativeRedisStore,
  key: String,
  nums: Float64Array,
  now_us: f64,
  lane: u32,
) -> Result<PromiseRaw<'env, Float64Array>> {
  let (text, call) = block_call(&key, &nums)?;
  let finish = |reply: Reply| match reply.numbers.first() {
    Some(left) if *left == WRONG_TYPE => Err(js_error(Error::new(ErrorKind::Script, wrong_type_message("pacer")))),
    left => Ok(Float64Array::new(left.copied().into_iter().collect())),
  };
  spawn(env, store, lane, decode::<Pacer>(&text, &call, now_us)?, finish)
}

/// Legacy: `redisCall` of pacer calls.
#[napi(catch_unwind, ts_return_type = "Promise<Float64Array>")]
pub fn redis_pacer_batch<'env>(
  env: &'env Env,
  store: &NativeRedisStore,
  keys: String,
  args: Float64Array,
  now_us: f64,
  lane: u32,
) -> Result<PromiseRaw<'env, Float64Array>> {
  spawn(env, store, lane, decode::<Pacer>(&keys, &args, now_us)?, numbers)
}

/// Legacy: `redisDirect` of pacer calls.
#[napi(catch_unwind, ts_return_type = "ExternalObject<'DirectTask'>")]
pub fn redis_pacer_direct(
  store: &NativeRedisStore,
  keys: String,
  args: Float64Array,
  now_us: f64,
) -> Result<External<NativeTask>> {
  Ok(direct(store, decode::<Pacer>(&keys, &args, now_us)?))
}

/// Legacy: `redisCall` of counting-limiter calls.
#[napi(catch_unwind, ts_return_type = "Promise<Float64Array>")]
pub fn redis_limit_batch<'env>(
  env: &'env Env,
  store: &NativeRedisStore,
  keys: String,
  args: Float64Array,
  now_us: f64,
  lane: u32,
) -> Result<PromiseRaw<'env, Float64Array>> {
  spawn(env, store, lane, decode::<Limit>(&keys, &args, now_us)?, numbers)
}

/// Legacy: `redisDirect` of counting-limiter calls.
#[napi(catch_unwind, ts_return_type = "ExternalObject<'DirectTask'>")]
pub fn redis_limit_direct(
  store: &NativeRedisStore,
  keys: String,
  args: Float64Array,
  now_us: f64,
) -> Result<External<NativeTask>> {
  Ok(direct(store, decode::<Limit>(&keys, &args, now_us)?))
}

/// Legacy: `redisCall` of sliding-window calls.
#[napi(catch_unwind, ts_return_type = "Promise<Float64Array>")]
pub fn redis_sliding_batch<'env>(
  env: &'env Env,
  store: &NativeRedisStore,
  keys: String,
  nums: Float64Array,
  now_us: f64,
  lane: u32,
) -> Result<PromiseRaw<'env, Float64Array>> {
  spawn(env, store, lane, decode::<Sliding>(&keys, &nums, now_us)?, numbers)
}

/// Legacy: `redisDirect` of sliding-window calls.
#[napi(catch_unwind, ts_return_type = "ExternalObject<'DirectTask'>")]
pub fn redis_sliding_direct(
  store: &NativeRedisStore,
  keys: String,
  nums: Float64Array,
  now_us: f64,
) -> Result<External<NativeTask>> {
  Ok(direct(store, decode::<Sliding>(&keys, &nums, now_us)?))
}

/// Quota calls in their old encoding (`keys[i]` and `heads[3 i ..]` = `[nums length, mode,
/// timestamp]` per call, their `nums` concatenated) as the quota kind's one call.
fn quota_call(keys: &[String], heads: &[f64], nums: &[f64]) -> Result<(String, Vec<f64>)> {
  let malformed = || js_error(Error::argument("malformed quota batch"));
  if heads.len() != keys.len() * 3 {
    return Err(malformed());
  }
  let mut call = Vec::with_capacity(heads.len() + nums.len());
  let mut at = 0usize;
  for (keys, head) in keys.iter().zip(heads.chunks(3)) {
    let len = head[0];
    if !(len >= 0.0 && len.fract() == 0.0 && at + len as usize <= nums.len()) {
      return Err(malformed());
    }
    let body = &nums[at..at + len as usize];
    // each call's keys are its own: as many as its counters
    if body.first() != Some(&(js(crate::codec::decode(keys))?.len() as f64)) {
      return Err(js_error(Error::argument("malformed quota call")));
    }
    call.extend_from_slice(head);
    call.extend_from_slice(body);
    at += len as usize;
  }
  if at != nums.len() {
    return Err(malformed());
  }
  Ok((keys.concat(), call))
}

/// Legacy: `redisCall` of quota calls; resolves with, per call, its result length then its
/// result.
#[napi(catch_unwind, ts_return_type = "Promise<Float64Array>")]
pub fn redis_quota_batch<'env>(
  env: &'env Env,
  store: &NativeRedisStore,
  keys: Vec<String>,
  heads: Float64Array,
  nums: Float64Array,
  lane: u32,
) -> Result<PromiseRaw<'env, Float64Array>> {
  let (text, call) = quota_call(&keys, &heads, &nums)?;
  spawn(env, store, lane, decode::<Quota>(&text, &call, -1.0)?, numbers)
}

/// Legacy: `redisDirect` of quota calls.
#[napi(catch_unwind, ts_return_type = "ExternalObject<'DirectTask'>")]
pub fn redis_quota_direct(
  store: &NativeRedisStore,
  keys: Vec<String>,
  heads: Float64Array,
  nums: Float64Array,
) -> Result<External<NativeTask>> {
  let (text, call) = quota_call(&keys, &heads, &nums)?;
  Ok(direct(store, decode::<Quota>(&text, &call, -1.0)?))
}

/// Legacy: fair-tenant assignments on a pool lane (keys and ids as two lists).
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
  let calls = js(decode_fair(&keys, &ids, &nums))?;
  spawn(env, store, lane, Pending::<Fair> { call: calls, now: js(explicit_now(now_us))? }, numbers)
}

/// Legacy: fair-tenant assignments on the direct lane.
#[napi(catch_unwind, ts_return_type = "ExternalObject<'DirectTask'>")]
pub fn redis_fair_direct(
  store: &NativeRedisStore,
  keys: String,
  ids: String,
  nums: Float64Array,
  now_us: f64,
) -> Result<External<NativeTask>> {
  let calls = js(decode_fair(&keys, &ids, &nums))?;
  Ok(direct(store, Pending::<Fair> { call: calls, now: js(explicit_now(now_us))? }))
}

/// The answer to `redisConcurrentBatch`.
#[napi(object)]
pub struct ConcurrentBatchReply {
  pub values: Float64Array,
  pub grants: Vec<String>,
}

/// Legacy: concurrent-limiter operations on a pool lane (keys and ids as two lists, 5
/// numbers per operation); resolves with 9 numbers per operation and the grants made.
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
  let call = js(decode_ops(&keys, &ids, &nums))?;
  let finish =
    |reply: Reply| Ok(ConcurrentBatchReply { values: Float64Array::new(reply.numbers), grants: grants(reply.text)? });
  spawn(env, store, lane, Pending::<Concurrent> { call, now: js(explicit_now(now_us))? }, finish)
}

/// Legacy: concurrent-limiter operations on the direct lane.
#[napi(catch_unwind, ts_return_type = "ExternalObject<'DirectTask'>")]
pub fn redis_concurrent_direct(
  store: &NativeRedisStore,
  keys: String,
  ids: String,
  nums: Float64Array,
  now_us: f64,
) -> Result<External<NativeTask>> {
  let call = js(decode_ops(&keys, &ids, &nums))?;
  Ok(direct(store, Pending::<Concurrent> { call, now: js(explicit_now(now_us))? }))
}
