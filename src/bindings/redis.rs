//! The Redis store's napi functions: connecting (options checked here), the store handle, and
//! one entry per lane for a call of any kind (`redisCall` on a pool connection, `redisDirect`
//! then `redisDirectStep` on the JS thread's own socket, lib/store/direct.js); plus the
//! store's own operations that are not kinds: statistics, grant wake-ups, close.
//!
//! Functions rather than async methods: a method keeps a reference to `this` per call, and
//! releasing it costs a second wake-up of the JS thread. A kind's call makes no JS object:
//! its numbers are read from the caller's typed array while the call is decoded, and its
//! result is written into the result buffer JS gave `redisAttach`, under the call's slot
//! (see completions.rs).

use super::completions::{settled, Completions, Settled};
use super::{js, js_error, napi_failure, resolved, Code, NativeError};
use crate::error::{Error, ErrorKind};
use crate::store::kinds::{self, explicit_now, Kind, Registered, Visit};
use crate::store::redis::{DirectTask, Lane, RedisOptions, RedisStore, Step};
use napi::bindgen_prelude::*;
use napi_derive::napi;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

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
  /// A master found through Redis Sentinel (checked in JS, lib/store/options.js).
  pub sentinel: Option<NativeSentinelOptions>,
}

/// `RedisStore.connect`'s `sentinel` option.
#[napi(object)]
pub struct NativeSentinelOptions {
  pub name: String,
  pub sentinels: Vec<String>,
  pub user: Option<String>,
  pub password: Option<String>,
  pub sentinel_password: Option<String>,
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
  let sentinels = o.sentinel.as_ref().map_or(&[][..], |s| &s.sentinels[..]);
  for u in std::iter::once(&url).chain(cluster.iter()).chain(sentinels.iter()) {
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
    sentinel: o.sentinel.map(|s| crate::store::redis::SentinelOptions {
      name: s.name,
      sentinels: s.sentinels,
      user: s.user,
      password: s.password,
      sentinel_password: s.sentinel_password,
    }),
  })
}

/// Connects a pool (every connection up, cluster slots known) or fails within the connect
/// timeout.
#[napi(catch_unwind, ts_return_type = "Promise<NativeRedisStore | NativeError>")]
pub async fn connect_redis(options: NativeRedisOptions) -> Result<Either<NativeRedisStore, NativeError>> {
  let connected = match redis_options(options) {
    Ok(options) => RedisStore::connect(options).await,
    Err(e) => Err(e),
  };
  resolved(connected.map(|store| NativeRedisStore { inner: Arc::new(store), completions: OnceLock::new() }))
}

/// A connected Redis store.
#[napi]
pub struct NativeRedisStore {
  pub(super) inner: Arc<RedisStore>,
  /// Where its calls' results go (`redisAttach`).
  completions: OnceLock<Arc<Completions>>,
}

impl NativeRedisStore {
  fn completions(&self) -> Result<&Arc<Completions>, Code> {
    self.completions.get().ok_or_else(|| js_error(Error::new(ErrorKind::Internal, "redisAttach was not called")))
  }
}

/// Gives the store its result buffer `out` (a `Float64Array`; a later call replaces it) and,
/// the first time, the function its pool calls' results are announced to: `onDone(records,
/// extra)` (see completions.rs for the records' layout). Keep `onDone` free of references to
/// the store: the store's native side holds it.
#[napi(catch_unwind)]
pub fn redis_attach(
  env: &Env,
  store: &NativeRedisStore,
  #[napi(ts_arg_type = "Float64Array")] out: Unknown,
  #[napi(ts_arg_type = "(records: number, extra?: Array<number[] | TextReply | PartialReply | NativeError>) => void")]
  on_done: Unknown,
) -> Result<(), Code> {
  match store.completions.get() {
    Some(c) => c.set_out(env, out.raw()).map_err(napi_failure),
    None => {
      let made = Completions::new(env, on_done.raw(), out.raw()).map_err(napi_failure)?;
      let _ = store.completions.set(made);
      Ok(())
    }
  }
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

  /// Makes every pool connection again (behind Sentinel: to the master the sentinels name
  /// now); calls under way on the old connections fail with `ERR_STORE_UNAVAILABLE`.
  #[napi(catch_unwind)]
  pub async fn reconnect(&self) -> Result<()> {
    self.inner.reconnect().await;
    Ok(())
  }

  /// Each master's `maxmemory_policy`: `[server, policy, why unreadable]` (one of the last two
  /// empty).
  #[napi(catch_unwind)]
  pub async fn eviction_policies(&self) -> Result<Vec<Vec<String>>> {
    let found = self.inner.eviction_policies().await;
    Ok(
      found
        .into_iter()
        .map(|(server, policy)| match policy {
          Ok(p) => vec![server, p, String::new()],
          Err(e) => vec![server, String::new(), e],
        })
        .collect(),
    )
  }

  /// Closes the pool; later calls fail with `ERR_CLOSED`.
  #[napi(catch_unwind)]
  pub async fn close(&self) -> Result<()> {
    self.inner.close().await;
    if let Some(completions) = self.completions.get() {
      completions.release();
    }
    Ok(())
  }
}

/// A call of kind `K`, decoded and validated on the JS thread, at its time (`None`: Redis'
/// clock), waiting for its lane (a pool connection, or the JS thread's direct socket).
pub(super) struct Pending<K: Kind> {
  pub(super) call: K::Call,
  pub(super) now: Option<f64>,
}

/// Decodes a call of kind `K` (`nowUs` -1: Redis' clock).
pub(super) fn decode<K: Kind>(text: &str, nums: &[f64], now_us: f64) -> Result<Pending<K>, Code> {
  let call = js(K::decode(text, nums))?;
  Ok(Pending { call, now: js(explicit_now(now_us))? })
}

/// A call of kind `kind` on pool lane `lane`: `text` (strings, encoded by lib/base/codec.js) and
/// `nums` in the kind's call layout (see its file under `src/store/kinds/`; read now, not
/// kept), at `nowUs` (-1 = Redis' clock). Sent in call order (its ticket is taken here, on the
/// JS thread, see `SendOrder`); its result is announced under `slot` (see `redisAttach`).
#[napi(catch_unwind)]
#[allow(clippy::too_many_arguments)]
pub fn redis_call(
  env: &Env,
  store: &NativeRedisStore,
  kind: u32,
  text: String,
  nums: Float64ArraySlice,
  now_us: f64,
  lane: u32,
  slot: u32,
) -> Result<(), Code> {
  struct Call<'a>(&'a NativeRedisStore, &'a Arc<Completions>, &'a str, &'a [f64], f64, u32, u32);
  impl Visit for Call<'_> {
    type Out = Result<(), Code>;
    fn visit<K: Registered>(self) -> Self::Out {
      let Call(store, completions, text, nums, now_us, lane, slot) = self;
      let pending = decode::<K>(text, nums, now_us)?;
      let inner = store.inner.clone();
      let completions = completions.clone();
      let ticket = inner.order.ticket();
      napi::bindgen_prelude::spawn(async move {
        let lane = Lane::Pool(lane);
        let call = K::redis(&inner, &pending.call, pending.now, &lane);
        let result = inner.order.run(ticket, call).await;
        completions.complete(slot, result);
      });
      Ok(())
    }
  }
  let completions = store.completions()?;
  js(kinds::visit(kind, Call(store, completions, &text, &nums, now_us, lane, slot)))??;
  completions.sent(env).map_err(napi_failure)
}

/// The same call on the direct lane: a task for `redisDirectStep` (a standalone server only).
#[napi(catch_unwind, ts_return_type = "ExternalObject<'DirectTask'>")]
pub fn redis_direct(
  store: &NativeRedisStore,
  kind: u32,
  text: String,
  nums: Float64ArraySlice,
  now_us: f64,
) -> Result<External<NativeTask>, Code> {
  struct Direct<'a>(&'a NativeRedisStore, &'a str, &'a [f64], f64);
  impl Visit for Direct<'_> {
    type Out = Result<External<NativeTask>, Code>;
    fn visit<K: Registered>(self) -> Self::Out {
      let pending = decode::<K>(self.1, self.2, self.3)?;
      let inner = self.0.inner.clone();
      let task = DirectTask::new(move |lane| async move { K::redis(&inner, &pending.call, pending.now, &lane).await });
      Ok(External::new(NativeTask { task: parking_lot::Mutex::new(task), completions: self.0.completions()?.clone() }))
    }
  }
  js(kinds::visit(kind, Direct(store, &text, &nums, now_us)))?
}

/// A store call on the direct lane, as JS holds it, with the store's result buffer.
pub struct NativeTask {
  task: parking_lot::Mutex<DirectTask<'static>>,
  completions: Arc<Completions>,
}

/// Runs a direct task until it needs replies: first with no replies, then with the replies
/// of the commands it last handed out, concatenated as Redis sent them. Answers the bytes to
/// write (a copy: no finalizer), their command count in the result buffer's first number; or,
/// done, the number `n` of results written at the result buffer's start; or the result
/// itself when it holds strings or does not fit there; or, failed, its store failure (a
/// `NativeError`).
#[napi(catch_unwind, ts_return_type = "Buffer | number | number[] | TextReply | PartialReply | NativeError")]
pub fn redis_direct_step<'env>(
  env: &'env Env,
  #[napi(ts_arg_type = "ExternalObject<'DirectTask'>")] task: &External<NativeTask>,
  replies: Option<BufferSlice>,
) -> Result<Either3<BufferSlice<'env>, f64, Settled>, Code> {
  let step = task.task.lock().step(replies.as_deref());
  // SAFETY: on the JS thread, and the slice is dropped before this function returns
  let out = unsafe { task.completions.out_slice(env.raw()).map_err(napi_failure)? };
  match step {
    Step::Send(bytes, count) => {
      out[0] = count as f64;
      Ok(Either3::A(BufferSlice::copy_from(env, bytes).map_err(napi_failure)?))
    }
    Step::Done(Ok(reply)) if reply.text.is_none() && reply.failed.is_none() && reply.numbers.len() <= out.len() => {
      out[..reply.numbers.len()].copy_from_slice(&reply.numbers);
      Ok(Either3::B(reply.numbers.len() as f64))
    }
    Step::Done(Ok(reply)) => Ok(Either3::C(settled(reply))),
    // a store failure is a value (its detail a field), as on the pool lane
    Step::Done(Err(e)) => Ok(Either3::C(Either4::D(NativeError::of(&e)))),
  }
}

/// Statistics operations on a pool lane (see `lua/stats.lua`): `ops` = per operation `<op>
/// <key count> <key>... <arg count> <arg>...`, every part encoded by lib/base/codec.js (one string
/// to convert, not one per part: a flush of 10,000 limiters has about 150,000 parts; no byte
/// of a name is read as structure); resolves with each operation's reply.
#[napi(catch_unwind, ts_return_type = "Promise<string[][] | NativeError>")]
pub fn redis_stats<'env>(
  env: &'env Env,
  store: &NativeRedisStore,
  ops: String,
  lane: u32,
) -> Result<PromiseRaw<'env, Either<StatsReplies, NativeError>>, Code> {
  let ops = js(crate::store::redis::decode_stats(&ops))?;
  let inner = store.inner.clone();
  env.spawn_future(async move { resolved(inner.stats_ops(&ops, &Lane::Pool(lane)).await) }).map_err(napi_failure)
}

/// Each statistics operation's reply.
type StatsReplies = Vec<Vec<String>>;

/// One operation on the store's rules (see `lua/rules.lua`) on a pool lane: `call` = its five
/// keys, then its arguments, encoded by lib/base/codec.js; resolves with its reply.
#[napi(catch_unwind, ts_return_type = "Promise<string[] | NativeError>")]
pub fn redis_rules<'env>(
  env: &'env Env,
  store: &NativeRedisStore,
  call: String,
  lane: u32,
) -> Result<PromiseRaw<'env, Either<Vec<String>, NativeError>>, Code> {
  let (keys, args) = js(crate::store::redis::decode_rules(&call))?;
  let inner = store.inner.clone();
  env.spawn_future(async move { resolved(inner.rules_op(keys, args, &Lane::Pool(lane)).await) }).map_err(napi_failure)
}

/// Subscribes the store's listener to a grant channel; resolves once Redis confirmed.
#[napi(catch_unwind, ts_return_type = "Promise<void | NativeError>")]
pub fn redis_subscribe<'env>(
  env: &'env Env,
  store: &NativeRedisStore,
  channel: String,
) -> Result<PromiseRaw<'env, Either<(), NativeError>>, Code> {
  let inner = store.inner.clone();
  env.spawn_future(async move { resolved(inner.subscribe(&channel).await) }).map_err(napi_failure)
}

#[napi(catch_unwind, ts_return_type = "Promise<void | NativeError>")]
pub fn redis_unsubscribe<'env>(
  env: &'env Env,
  store: &NativeRedisStore,
  channel: String,
) -> Result<PromiseRaw<'env, Either<(), NativeError>>, Code> {
  let inner = store.inner.clone();
  env.spawn_future(async move { resolved(inner.unsubscribe(&channel).await) }).map_err(napi_failure)
}

/// Grant messages received since the last call (`"<waiter id> <token>"`, or `"*"`: re-poll
/// every waiter), waiting for at least one; an empty list after `redisStopWakes` or close.
#[napi(catch_unwind, ts_return_type = "Promise<string[]>")]
pub fn redis_next_wakes<'env>(env: &'env Env, store: &NativeRedisStore) -> Result<PromiseRaw<'env, Vec<String>>, Code> {
  let inner = store.inner.clone();
  env.spawn_future(async move { Ok(inner.next_wakes().await) }).map_err(napi_failure)
}

/// The grant and rules messages received since the last call, at once, without waiting.
#[napi(catch_unwind)]
pub fn redis_take_wakes(store: &NativeRedisStore) -> Vec<String> {
  store.inner.take_wakes()
}

/// Ends a pending `redisNextWakes` with an empty list.
#[napi(catch_unwind)]
pub fn redis_stop_wakes(store: &NativeRedisStore) {
  store.inner.stop_wakes();
}
