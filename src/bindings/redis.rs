//! The Redis store's napi functions: connecting (options checked here), the store handle, and
//! one entry per lane for a call of any kind (`redisCall` on a pool connection, `redisDirect`
//! then `redisDirectStep` on the JS thread's own socket, lib/store/direct.js); plus the
//! store's own operations that are not kinds: statistics, grant wake-ups, close.
//!
//! Functions rather than async methods: a method keeps a reference to `this` per call, and
//! releasing it costs a second wake-up of the JS thread.

use super::{js, js_error};
use crate::error::Error;
use crate::store::kinds::{self, explicit_now, Kind, Registered, Reply, Visit};
use crate::store::redis::{DirectTask, Lane, RedisOptions, RedisStore, Step};
use napi::bindgen_prelude::*;
use napi_derive::napi;
use std::sync::Arc;
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

/// A connected Redis store.
#[napi]
pub struct NativeRedisStore {
  pub(super) inner: Arc<RedisStore>,
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

/// A call of kind `K`, decoded and validated on the JS thread, at its time (`None`: Redis'
/// clock), waiting for its lane (a pool connection, or the JS thread's direct socket).
pub(super) struct Pending<K: Kind> {
  pub(super) call: K::Call,
  pub(super) now: Option<f64>,
}

/// Decodes a call of kind `K` (`nowUs` -1: Redis' clock).
pub(super) fn decode<K: Kind>(text: &str, nums: &[f64], now_us: f64) -> Result<Pending<K>> {
  let call = js(K::decode(text, nums))?;
  Ok(Pending { call, now: js(explicit_now(now_us))? })
}

/// Runs `pending` on pool lane `lane`, spawned in call order: its ticket is taken here, on
/// the JS thread, and it sends on its turn (see `SendOrder`); resolves with `finish(reply)`.
pub(super) fn spawn<'env, K: Kind, T: ToNapiValue + Send + 'static>(
  env: &'env Env,
  store: &NativeRedisStore,
  lane: u32,
  pending: Pending<K>,
  finish: fn(Reply) -> Result<T>,
) -> Result<PromiseRaw<'env, T>> {
  let inner = store.inner.clone();
  let ticket = inner.order.ticket();
  env.spawn_future(async move {
    let lane = Lane::Pool(lane);
    let call = K::redis(&inner, &pending.call, pending.now, &lane);
    finish(inner.order.run(ticket, call).await.map_err(js_error)?)
  })
}

/// Starts `pending` on the direct lane: nothing is sent until `redisDirectStep`.
pub(super) fn direct<K: Kind>(store: &NativeRedisStore, pending: Pending<K>) -> External<NativeTask> {
  let inner = store.inner.clone();
  let task = DirectTask::new(move |lane| async move { K::redis(&inner, &pending.call, pending.now, &lane).await });
  External::new(parking_lot::Mutex::new(task))
}

/// The answer of a call whose kind answers strings too.
#[napi(object)]
pub struct RedisReply {
  pub values: Float64Array,
  /// Strings, in lib/codec.js' encoding (for concurrent: the grants made, `"<waiter id>
  /// <token>"`, also published on `<key>:wake`).
  pub text: String,
}

fn finish(reply: Reply) -> Result<Either<Float64Array, RedisReply>> {
  let values = Float64Array::new(reply.numbers);
  Ok(match reply.text {
    None => Either::A(values),
    Some(text) => Either::B(RedisReply { values, text }),
  })
}

/// A call of kind `kind` on pool lane `lane`: `text` (strings, encoded by lib/codec.js) and
/// `nums` in the kind's call layout (see its file under `src/store/kinds/`), at `nowUs` (-1 =
/// Redis' clock). Resolves with the kind's flat results; with the strings it answers, for a
/// kind that answers strings.
#[napi(catch_unwind, ts_return_type = "Promise<Float64Array | RedisReply>")]
pub fn redis_call<'env>(
  env: &'env Env,
  store: &NativeRedisStore,
  kind: u32,
  text: String,
  nums: Float64Array,
  now_us: f64,
  lane: u32,
) -> Result<PromiseRaw<'env, Either<Float64Array, RedisReply>>> {
  struct Call<'a, 'env>(&'env Env, &'a NativeRedisStore, &'a str, &'a [f64], f64, u32);
  impl<'env> Visit for Call<'_, 'env> {
    type Out = Result<PromiseRaw<'env, Either<Float64Array, RedisReply>>>;
    fn visit<K: Registered>(self) -> Self::Out {
      spawn(self.0, self.1, self.5, decode::<K>(self.2, self.3, self.4)?, finish)
    }
  }
  js(kinds::visit(kind, Call(env, store, &text, &nums, now_us, lane)))?
}

/// The same call on the direct lane: a task for `redisDirectStep` (a standalone server only).
#[napi(catch_unwind, ts_return_type = "ExternalObject<'DirectTask'>")]
pub fn redis_direct(
  store: &NativeRedisStore,
  kind: u32,
  text: String,
  nums: Float64Array,
  now_us: f64,
) -> Result<External<NativeTask>> {
  struct Direct<'a>(&'a NativeRedisStore, &'a str, &'a [f64], f64);
  impl Visit for Direct<'_> {
    type Out = Result<External<NativeTask>>;
    fn visit<K: Registered>(self) -> Self::Out {
      Ok(direct(self.0, decode::<K>(self.1, self.2, self.3)?))
    }
  }
  js(kinds::visit(kind, Direct(store, &text, &nums, now_us)))?
}

/// A store call on the direct lane, as JS holds it.
pub type NativeTask = parking_lot::Mutex<DirectTask<'static>>;

/// What to do next for a direct task: write `out` (`count` commands) and feed their replies
/// back to `redisDirectStep`; or, when `out` is absent, the call is done with `values` (and,
/// for a kind that answers strings, `text`).
#[napi(object, object_from_js = false)]
pub struct DirectStep {
  pub out: Option<Buffer>,
  pub count: u32,
  pub values: Option<Float64Array>,
  pub text: Option<String>,
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
    Step::Send(out, count) => Ok(DirectStep { out: Some(out.into()), count: count as u32, values: None, text: None }),
    Step::Done(Ok(Reply { numbers, text })) => {
      Ok(DirectStep { out: None, count: 0, values: Some(Float64Array::new(numbers)), text })
    }
    Step::Done(Err(e)) => Err(js_error(e)),
  }
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
  let ops = js(crate::store::redis::decode_stats(&ops))?;
  let inner = store.inner.clone();
  env.spawn_future(async move { inner.stats_ops(&ops, &Lane::Pool(lane)).await.map_err(js_error) })
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
