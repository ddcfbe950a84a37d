//! The Redis store: one fred pool (standalone or Redis Cluster), scripts by EVALSHA.
//!
//! - Every call has a deadline (`command_timeout`): a Redis that is down answers
//!   `StoreUnavailable` at once when no connection is up, `Timeout` when a command is stuck.
//!   Reconnection runs in the background forever, so the store recovers by itself.
//! - Commands are never replayed after a lost connection (`fail_fast`): a lost reply is an
//!   error, never a double charge. fred writes a command again only after a `MOVED` or `ASK`
//!   (it was not run) and after a write that failed (it was not sent); and we resend with EVAL
//!   after NOSCRIPT (EVAL also caches the script there).
//! - On a cluster, a batch is split per hash slot: each slot's entries are script calls (one
//!   per 64) on the node that owns it, all slots in flight at once.
//! - A key of another type under our prefix (another writer's) fails only the calls on it:
//!   every script reads a call's keys (`redis.pcall`) before writing anything of that call,
//!   applies nothing of it, and answers [`WRONG_TYPE`] in a field that is never negative
//!   otherwise; the other calls of its script call are decided as usual. The value goes to
//!   JS unchanged, in the call's flat result, where that call alone rejects with
//!   `ERR_SCRIPT`: a limiter call's `remaining`, a pacer member's `delay_us`, a sliding call's
//!   `retry_after_us`, a quota call's timestamp, a fair call's first count, a concurrent
//!   operation's first value.

mod direct;
mod fair;
mod script;
mod stats;
mod tls;
mod windows;

pub use direct::{reply_end, DirectTask, Lane, Outcome, Step};

pub use stats::{decode_stats, StatsOp};
pub use tls::TlsOptions;
pub use windows::QUOTA_MARGIN_MS;

use super::limits::{Action, LimitBatch, ADJUST, BLOCK, LIMIT_RESULT_FIELDS, PEEK, RESET};
use super::{encode_decisions, PacerBatch};
use crate::core::limit;
use crate::core::pacer::{Decision, Mode};
use crate::error::{Error, ErrorKind, Result};
use fred::clients::SubscriberClient;
use fred::prelude::*;
use fred::types::config::{Config as FredConfig, ReconnectPolicy, ServerConfig};
use script::{Script, CONCURRENT, LIMITER, PACER, PACER_UNDO};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Options of [`RedisStore::connect`], validated there.
#[derive(Clone, Debug)]
pub struct RedisOptions {
  /// `redis://` or `rediss://` URL of a standalone server.
  pub url: String,
  /// Seed node URLs of a Redis Cluster; when non-empty, `url` is ignored.
  pub cluster: Vec<String>,
  pub pool_size: usize,
  pub command_timeout: Duration,
  pub connect_timeout: Duration,
  /// When Redis cannot be reached within `connect_timeout`, return the store anyway: its
  /// connections keep dialling in the background (the JS side starts with its circuit open).
  pub start_down: bool,
  /// TLS settings for `rediss://` URLs (default: the system's CAs, certificates checked).
  pub tls: Option<TlsOptions>,
}

impl Default for RedisOptions {
  fn default() -> Self {
    RedisOptions {
      url: "redis://127.0.0.1:6379".into(),
      cluster: vec![],
      pool_size: 2,
      command_timeout: Duration::from_millis(2_000),
      connect_timeout: Duration::from_millis(5_000),
      start_down: false,
      tls: None,
    }
  }
}

/// A connected store.
pub struct RedisStore {
  pool: Pool,
  cluster: bool,
  /// Whether every connection was up when `connect` returned (false only with `start_down`).
  started_up: bool,
  command_timeout: Duration,
  connect_timeout: Duration,
  closed: Arc<AtomicBool>,
  /// The connection that listens for concurrent-limiter grants; connected on first use.
  subscriber: SubscriberClient,
  subscribed: tokio::sync::OnceCell<()>,
  wakes: Arc<Wakes>,
  /// Call order of the batches sent through this store.
  pub order: SendOrder,
  /// The server refused a shebang (before Redis 7): scripts go without one from then on.
  legacy_scripts: AtomicBool,
}

/// Keeps calls in the order they were made: each native call takes a ticket on the JS thread,
/// and its task sends its commands (the first poll of the store future, which queues them on
/// the connection) only on its turn. Tasks spawned in call order are not always first polled
/// in that order; without this, two batches of one tick could reach Redis swapped.
#[derive(Default)]
pub struct SendOrder {
  next_ticket: std::sync::atomic::AtomicU64,
  turn: std::sync::atomic::AtomicU64,
  notify: tokio::sync::Notify,
}

/// Ends a turn, also when the future panicked or was dropped before its first poll.
struct Turn<'a>(&'a SendOrder);

impl Drop for Turn<'_> {
  fn drop(&mut self) {
    self.0.turn.fetch_add(1, Ordering::SeqCst);
    self.0.notify.notify_waiters();
  }
}

impl SendOrder {
  /// The next ticket; take it synchronously, in call order.
  pub fn ticket(&self) -> u64 {
    self.next_ticket.fetch_add(1, Ordering::SeqCst)
  }

  /// Runs `fut` once every earlier ticket has sent its commands.
  pub async fn run<F: std::future::Future>(&self, ticket: u64, fut: F) -> F::Output {
    loop {
      let notified = self.notify.notified();
      tokio::pin!(notified);
      notified.as_mut().enable();
      if self.turn.load(Ordering::SeqCst) == ticket {
        break;
      }
      notified.await;
    }
    let turn = Turn(self);
    let mut fut = std::pin::pin!(fut);
    let first = futures::poll!(fut.as_mut());
    drop(turn);
    match first {
      std::task::Poll::Ready(out) => out,
      std::task::Poll::Pending => fut.await,
    }
  }
}

/// Grant messages received and not yet handed to JS.
#[derive(Default)]
struct Wakes {
  queue: parking_lot::Mutex<Vec<String>>,
  notify: tokio::sync::Notify,
}

impl Wakes {
  fn push(&self, message: String) {
    self.queue.lock().push(message);
    self.notify.notify_one();
  }
}

/// Calls per script call: a batch is split in chunks of this many per slot, so one script
/// call never runs for long (the JS layer already sends at most this many per batch).
const CHUNK: usize = 64;

/// Numbers per operation in [`RedisStore::concurrent_batch`]'s result (stats has the most).
pub const CONCURRENT_RESULT_FIELDS: usize = 9;

/// A call's marker in its result: its key holds a value of another type (another writer uses
/// the key prefix), and nothing of the call was applied. See the module docs for its field.
pub const WRONG_TYPE: f64 = -2.0;

/// The message of a call refused for [`WRONG_TYPE`] (never with the key: a name can be a
/// user's data); `what` is the limiter's kind.
pub fn wrong_type_message(what: &str) -> String {
  format!("the key of this {what} holds a value of another type: another writer uses sluice's key prefix")
}

/// The message that tells JS to re-poll every waiter: the subscriber reconnected or fell
/// behind, so a grant may have been missed.
pub const WAKE_RESYNC: &str = "*";

/// `url` with its whole userinfo (user and password, or a lone password) shown as `***`:
/// `redis://***@host:port`. Every message that quotes a URL goes through it.
pub fn redact_url(url: &str) -> String {
  let Some(scheme_end) = url.find("://") else {
    return if url.contains('@') { "***".into() } else { url.to_owned() };
  };
  let rest = &url[scheme_end + 3..];
  // the whole userinfo, up to the last '@' anywhere: a user name may carry a secret too, and a
  // password written unescaped may hold '@', ':', '/', '?' or '#' (a Redis URL has no '@' after
  // its host, so nothing of the host or path is hidden)
  let Some(at) = rest.rfind('@') else {
    return url.to_owned();
  };
  format!("{}***@{}", &url[..scheme_end + 3], &rest[at + 1..])
}

/// `text` with every occurrence of `url`'s secret replaced by `***` (for messages of
/// dependencies that may quote it).
fn redact_in(text: &str, url: &str) -> String {
  let secret = url
    .split("://")
    .nth(1)
    .and_then(|rest| rest.rfind('@').map(|at| &rest[..at]))
    .map(|userinfo| (userinfo, userinfo.split_once(':').map_or(userinfo, |(_, password)| password)));
  match secret {
    Some((userinfo, password)) if !password.is_empty() => text.replace(userinfo, "***").replace(password, "***"),
    Some((userinfo, _)) if !userinfo.is_empty() => text.replace(userinfo, "***"),
    _ => text.to_owned(),
  }
}

fn config_from(options: &RedisOptions) -> Result<FredConfig> {
  let parse = |url: &str| {
    FredConfig::from_url(url)
      .map_err(|e| Error::config(format!("invalid Redis URL {:?}: {}", redact_url(url), redact_in(e.details(), url))))
  };
  if options.cluster.is_empty() {
    return parse(&options.url);
  }
  let mut config = parse(&options.cluster[0])?;
  let mut hosts = vec![];
  for seed in &options.cluster {
    match parse(seed)?.server {
      ServerConfig::Centralized { server } => hosts.push(server),
      _ => return Err(Error::config(format!("cluster seed {seed:?} must be a redis:// URL"))),
    }
  }
  config.server = ServerConfig::Clustered { hosts, policy: Default::default() };
  Ok(config)
}

/// Options of every script call on the pool. fred counts each write of a command as an attempt,
/// the one after a `MOVED` or `ASK` reply too; such a command was not run by the node that
/// redirected it, so it may be written again (a slot moving, a replica just promoted). A
/// command whose connection was lost may have been run: `fail_fast` makes fred fail it (and any
/// command while it reconnects) instead of replaying it, so nothing is ever charged twice.
fn redirectable() -> fred::types::config::Options {
  fred::types::config::Options {
    max_attempts: Some(8),
    max_redirections: Some(8),
    fail_fast: true,
    ..Default::default()
  }
}

/// Maps a fred error onto our kinds.
/// fred's text for an I/O failure is Rust debug output (`Os { code: 111, kind:
/// ConnectionRefused, message: "Connection refused" }`): the sentence inside it, when there is
/// one, with the OS code (`Connection refused (os error 111)`); any other text as it is.
pub fn readable(details: &str) -> String {
  let Some(start) = details.find("Os { code: ") else {
    return details.to_owned();
  };
  let rest = &details[start + "Os { code: ".len()..];
  let code: String = rest.chars().take_while(|c| c.is_ascii_digit()).collect();
  let message = rest.find("message: \"").map(|m| &rest[m + "message: \"".len()..]).and_then(|m| m.split('"').next());
  let end = details[start..].find('}').map_or(details.len(), |e| start + e + 1);
  match message {
    Some(message) if !message.is_empty() => {
      format!("{}{message} (os error {code}){}", &details[..start], &details[end..])
    }
    _ => details.to_owned(),
  }
}

/// Whether nothing listens at any of `servers` (every connection attempt refused at once),
/// within `within`: a store that may start down need not wait out its connect timeout then.
async fn all_refused(servers: &[(String, u16)], within: Duration) -> bool {
  if servers.is_empty() {
    return false;
  }
  for (host, port) in servers {
    match tokio::time::timeout(within, tokio::net::TcpStream::connect((host.as_str(), *port))).await {
      Ok(Err(e)) if e.kind() == std::io::ErrorKind::ConnectionRefused => {}
      _ => return false,
    }
  }
  true
}

fn store_error(e: fred::error::Error) -> Error {
  use fred::error::ErrorKind as K;
  let details = readable(e.details());
  let details = details.as_str();
  let kind = match e.kind() {
    K::Timeout => ErrorKind::Timeout,
    K::Config | K::Url => ErrorKind::InvalidConfig,
    // Protocol: bytes that are not a reply (fred drops the connection and makes a new one)
    K::IO | K::Canceled | K::Cluster | K::Routing | K::Backpressure | K::Auth | K::Sentinel | K::Tls | K::Protocol => {
      ErrorKind::StoreUnavailable
    }
    // maxmemory reached under noeviction: the write was refused, nothing changed
    _ if details.starts_with("OOM") => ErrorKind::StoreOom,
    // fred answers a command it cannot route while reconnecting with an `Unknown` error
    // (and gives up on a command redirected too often while the cluster changes its topology)
    _ if [
      "LOADING",
      "BUSY",
      "MASTERDOWN",
      "READONLY",
      "TRYAGAIN",
      "CLUSTERDOWN",
      "Failed to route command",
      "Too many failed write attempts",
    ]
    .iter()
    .any(|p| details.starts_with(p)) =>
    {
      ErrorKind::StoreUnavailable
    }
    _ => ErrorKind::Script,
  };
  Error::new(kind, format!("redis: {details}"))
}

impl RedisStore {
  /// Connects every pool connection (and, on a cluster, learns the slot map) before
  /// returning, within `connect_timeout`.
  pub async fn connect(options: RedisOptions) -> Result<RedisStore> {
    if !(1..=64).contains(&options.pool_size) {
      return Err(Error::config("poolSize must be an integer in [1, 64]"));
    }
    let mut config = config_from(&options)?;
    if let Some(tls) = &options.tls {
      if config.tls.is_none() {
        return Err(Error::config("tls options need rediss:// URLs"));
      }
      config.tls = Some(fred::types::config::TlsConfig::from(tls::client_config(tls)?));
    }
    // start_down: a first connection that fails is retried by the reconnect policy
    config.fail_fast = !options.start_down;
    let cluster = config.server.is_clustered();
    let servers: Vec<(String, u16)> = config.server.hosts().iter().map(|s| (s.host.to_string(), s.port)).collect();
    let mut builder = Builder::from_config(config);
    builder
      .with_connection_config(|c| {
        c.connection_timeout = options.connect_timeout;
        c.internal_command_timeout = options.connect_timeout;
        c.max_command_attempts = 1;
        c.tcp.nodelay = Some(true);
        // a connection whose oldest command has waited twice its deadline is dropped and made
        // again: a server stuck mid-reply (a huge bulk announced and never sent) would
        // otherwise time out every later command on that connection
        c.unresponsive.max_timeout = Some(options.command_timeout * 2);
        c.unresponsive.interval = (options.command_timeout / 2).max(Duration::from_millis(10));
      })
      .with_performance_config(|p| {
        p.default_command_timeout = options.command_timeout;
        p.broadcast_channel_capacity = 4096;
      })
      .set_policy(ReconnectPolicy::new_linear(0, 1_000, 50));
    let pool = builder.build_pool(options.pool_size).map_err(store_error)?;
    let subscriber = builder.build_subscriber_client().map_err(store_error)?;
    let mut started_up = true;
    let init = tokio::time::timeout(options.connect_timeout, pool.init());
    let outcome = if options.start_down {
      // a store that may start down answers as soon as every server refuses the connection,
      // not after its connect timeout (the pool goes on dialling in the background)
      tokio::pin!(init);
      let refused = async {
        if all_refused(&servers, options.connect_timeout).await {
          return;
        }
        std::future::pending::<()>().await
      };
      tokio::select! {
        outcome = &mut init => Some(outcome),
        _ = refused => None,
      }
    } else {
      Some(init.await)
    };
    match outcome {
      Some(Ok(Ok(_))) => {}
      // the connection tasks go on dialling in the background (fail_fast is off)
      _ if options.start_down => started_up = false,
      None => started_up = false,
      Some(outcome) => {
        let message = match outcome {
          Ok(Err(e)) => format!("cannot connect to Redis: {}", readable(e.details())),
          _ => format!("cannot connect to Redis within {} ms", options.connect_timeout.as_millis()),
        };
        // Stop the reconnection tasks; quitting a client that never connected may not
        // answer, so it is detached.
        tokio::spawn(async move {
          let _ = tokio::time::timeout(Duration::from_secs(1), pool.quit()).await;
        });
        return Err(Error::new(ErrorKind::StoreUnavailable, message));
      }
    }
    let store = RedisStore {
      pool,
      cluster,
      started_up,
      command_timeout: options.command_timeout,
      connect_timeout: options.connect_timeout,
      closed: Arc::new(AtomicBool::new(false)),
      subscriber,
      subscribed: tokio::sync::OnceCell::new(),
      legacy_scripts: AtomicBool::new(false),
      wakes: Arc::default(),
      order: SendOrder::default(),
    };
    store.keep_timer_armed();
    Ok(store)
  }

  /// Every call arms a deadline timer. When the runtime's timer driver has nothing due
  /// sooner, arming one makes it wake itself to re-park with the new deadline, which on a
  /// small VM tripled the latency of a sequential call (237 µs vs 80 µs, measured). A
  /// sentinel timer that always fires before any new deadline removes that wake-up; it costs
  /// a few idle wake-ups per second.
  fn keep_timer_armed(&self) {
    let period = (self.command_timeout / 2).clamp(Duration::from_millis(1), Duration::from_millis(250));
    let closed = self.closed.clone();
    tokio::spawn(async move {
      while !closed.load(Ordering::Relaxed) {
        tokio::time::sleep(period).await;
      }
    });
  }

  pub fn is_cluster(&self) -> bool {
    self.cluster
  }

  /// Whether every connection was up when `connect` returned.
  pub fn started_up(&self) -> bool {
    self.started_up
  }

  pub async fn close(&self) {
    if !self.closed.swap(true, Ordering::SeqCst) {
      self.wakes.push(String::new());
      if self.subscribed.initialized() {
        let _ = tokio::time::timeout(self.command_timeout, self.subscriber.quit()).await;
      }
      let _ = tokio::time::timeout(self.command_timeout, self.pool.quit()).await;
    }
  }

  /// The connection of a pool lane: calls sent on one lane reach Redis in the order they
  /// were made (the JS layer sends each kind's batches on one lane).
  fn client(&self, lane: u32) -> Result<&Client> {
    if self.closed.load(Ordering::Relaxed) {
      return Err(Error::new(ErrorKind::Closed, "the store is closed"));
    }
    let clients = self.pool.clients();
    let mut client = &clients[lane as usize % clients.len()];
    if !client.is_connected() {
      client = self.pool.next_connected();
    }
    if !client.is_connected() {
      return Err(Error::new(ErrorKind::StoreUnavailable, "no connection to Redis is up"));
    }
    Ok(client)
  }

  /// Runs a script; NOSCRIPT is answered by one EVAL on the same node. On the pool, the
  /// deadline is fred's per-command timeout (`command_timeout`, one timer per round trip);
  /// on the direct lane, the JS layer's. Keys and values are refcounted bytes, so the copy
  /// kept for a NOSCRIPT retry is cheap.
  async fn run(&self, lane: &Lane, script: &Script, keys: Vec<Key>, args: Vec<Value>) -> Result<Vec<Value>> {
    let legacy = self.legacy_scripts.load(Ordering::Relaxed);
    match self.run_as(lane, script, legacy, &keys, &args).await {
      // a server before Redis 7 cannot compile the shebang: legacy scripts from now on
      Err(e) if !legacy && script::shebang_refused(&e.message) => {
        self.legacy_scripts.store(true, Ordering::Relaxed);
        self.run_as(lane, script, true, &keys, &args).await
      }
      other => other,
    }
  }

  async fn run_as(
    &self,
    lane: &Lane,
    script: &Script,
    legacy: bool,
    keys: &[Key],
    args: &[Value],
  ) -> Result<Vec<Value>> {
    let lane = match lane {
      Lane::Pool(lane) => *lane,
      Lane::Direct(exchange) => {
        let reply = match exchange.script(script, legacy, keys, args, false).await {
          Err(e) if e.message.starts_with("redis: NOSCRIPT") => exchange.script(script, legacy, keys, args, true).await,
          other => other,
        };
        return match reply? {
          Value::Array(values) => Ok(values),
          Value::Null => Ok(vec![]),
          _ => Err(Error::new(ErrorKind::Script, "malformed script reply")),
        };
      }
    };
    let client = self.client(lane)?.with_options(&redirectable());
    let (sha, lua) = script.pick(legacy);
    // While a slot moves, a script whose keys are split between the two nodes is refused with
    // TRYAGAIN (not run): it is sent again after a short pause, within the call's deadline.
    let deadline = tokio::time::Instant::now() + self.command_timeout;
    let mut pause = Duration::from_millis(2);
    loop {
      let result = match client.evalsha::<Vec<Value>, _, _, _>(sha, keys.to_vec(), args.to_vec()).await {
        Err(e) if e.details().starts_with("NOSCRIPT") => client.eval(lua, keys.to_vec(), args.to_vec()).await,
        other => other,
      };
      match result {
        Err(e) if e.details().starts_with("TRYAGAIN") && tokio::time::Instant::now() + pause < deadline => {
          tokio::time::sleep(pause).await;
          pause = (pause * 2).min(Duration::from_millis(50));
        }
        other => return other.map_err(store_error),
      }
    }
  }

  /// Blocks the pacer of `key` for `duration_us` (`lua/pacer_block.lua`); µs until it ends.
  pub async fn pacer_block(
    &self,
    key: &str,
    params: &crate::core::pacer::Params,
    duration_us: f64,
    now_us: Option<f64>,
    lane: &Lane,
  ) -> Result<f64> {
    let args = vec![
      now_us.map(number).unwrap_or_else(|| Value::String("".into())),
      number(duration_us),
      number(params.qps),
      number(params.max_burst),
      number(params.factor),
    ];
    let reply = self.run(lane, &script::PACER_BLOCK, vec![Key::from(key)], args).await?;
    let left = match reply.as_slice() {
      [left] => left.as_i64().map(|x| x as f64),
      _ => None,
    }
    .ok_or_else(|| Error::new(ErrorKind::Script, "malformed pacer block reply"))?;
    if left == WRONG_TYPE {
      return Err(Error::new(ErrorKind::Script, wrong_type_message("pacer")));
    }
    Ok(left)
  }

  /// Decides a batch; results per member, in member order.
  pub async fn pacer_batch(&self, batch: &PacerBatch, now_us: Option<f64>, lane: &Lane) -> Result<Vec<Decision>> {
    let mut decisions = vec![Decision { delay_us: 0.0, watermark_before: 0.0, admitted: false }; batch.members.len()];
    // Entries grouped by slot (one group on a standalone server), plus cross-slot composites.
    let mut groups: BTreeMap<(u16, usize), Vec<usize>> = BTreeMap::new();
    let mut cross_slot = vec![];
    for (e, entry) in batch.entries.iter().enumerate() {
      if !self.cluster {
        groups.entry((0, e / CHUNK)).or_default().push(e);
        continue;
      }
      let slots: Vec<u16> = batch.members[entry.members.clone()]
        .iter()
        .map(|m| fred::util::redis_keyslot(batch.keys[m.key].as_bytes()))
        .collect();
      if slots.iter().all(|s| *s == slots[0]) {
        groups.entry((slots[0], e / CHUNK)).or_default().push(e);
      } else {
        cross_slot.push(e);
      }
    }
    let calls = groups.values().map(|entries| self.pacer_call(batch, entries, now_us, lane));
    let composites = cross_slot.iter().map(|e| self.cross_slot_entry(batch, *e, now_us, lane));
    let (results, composite_results) =
      futures::future::join(futures::future::join_all(calls), futures::future::join_all(composites)).await;
    for (entries, result) in groups.values().zip(results) {
      let mut it = result?.into_iter();
      for e in entries {
        for m in batch.entries[*e].members.clone() {
          decisions[m] = it.next().ok_or_else(|| Error::new(ErrorKind::Script, "short pacer reply"))?;
        }
      }
    }
    for (e, result) in cross_slot.iter().zip(composite_results) {
      for (m, d) in batch.entries[*e].members.clone().zip(result?) {
        decisions[m] = d;
      }
    }
    Ok(decisions)
  }

  /// Decides a batch of rate-limiter calls; one script call per hash slot.
  pub async fn limit_batch(
    &self,
    batch: &LimitBatch,
    now_us: Option<f64>,
    lane: &Lane,
  ) -> Result<Vec<limit::Decision>> {
    let mut groups: BTreeMap<(u16, usize), Vec<usize>> = BTreeMap::new();
    for (e, entry) in batch.entries.iter().enumerate() {
      let slot = if self.cluster { fred::util::redis_keyslot(batch.keys[entry.key].as_bytes()) } else { 0 };
      groups.entry((slot, e / CHUNK)).or_default().push(e);
    }
    let calls = groups.values().map(|entries| self.limit_call(batch, entries, now_us, lane));
    let results = futures::future::join_all(calls).await;
    let empty = limit::Decision { allowed: false, remaining: 0.0, retry_after_us: 0.0, reset_after_us: 0.0 };
    let mut decisions = vec![empty; batch.entries.len()];
    for (entries, result) in groups.values().zip(results) {
      for (e, d) in entries.iter().zip(result?) {
        decisions[*e] = d;
      }
    }
    Ok(decisions)
  }

  async fn limit_call(
    &self,
    batch: &LimitBatch,
    entries: &[usize],
    now_us: Option<f64>,
    lane: &Lane,
  ) -> Result<Vec<limit::Decision>> {
    let mut keys: Vec<Key> = vec![];
    let mut local: BTreeMap<usize, usize> = BTreeMap::new();
    let mut args: Vec<Value> = Vec::with_capacity(1 + entries.len() * 5);
    args.push(now_us.map(number).unwrap_or_else(|| Value::String("".into())));
    for e in entries {
      let entry = &batch.entries[*e];
      let k = *local.entry(entry.key).or_insert_with(|| {
        keys.push(Key::from(batch.keys[entry.key].as_str()));
        keys.len()
      });
      let max_wait = match entry.action {
        Action::Reset => RESET,
        Action::Block => BLOCK,
        Action::Step(limit::Op::Adjust) => ADJUST,
        Action::Step(limit::Op::Peek) => PEEK,
        Action::Step(limit::Op::Take { max_wait_us }) => max_wait_us,
      };
      args.extend([
        Value::Integer((k * 4 + entry.kind as usize) as i64),
        number(entry.weight),
        number(entry.params.limit),
        number(entry.params.interval_us),
        number(max_wait),
      ]);
    }
    let reply = self.run(lane, &LIMITER, keys, args).await?;
    if reply.len() != entries.len() * LIMIT_RESULT_FIELDS {
      return Err(Error::new(ErrorKind::Script, "malformed limiter reply"));
    }
    // a key of another type: remaining is WRONG_TYPE, passed on as is
    reply
      .chunks(LIMIT_RESULT_FIELDS)
      .map(|f| {
        let int = |i: usize| {
          f[i].as_i64().map(|x| x as f64).ok_or_else(|| Error::new(ErrorKind::Script, "malformed limiter reply"))
        };
        Ok(limit::Decision {
          allowed: int(0)? == 1.0,
          remaining: int(1)?,
          retry_after_us: int(2)?,
          reset_after_us: int(3)?,
        })
      })
      .collect()
  }

  /// One script call for entries that share a slot.
  async fn pacer_call(
    &self,
    batch: &PacerBatch,
    entries: &[usize],
    now_us: Option<f64>,
    lane: &Lane,
  ) -> Result<Vec<Decision>> {
    let mut args = ScriptArgs::new(now_us);
    for e in entries {
      let entry = &batch.entries[*e];
      args.entry(batch, &batch.members[entry.members.clone()], entry.mode, false);
    }
    let (keys, args) = args.finish();
    let reply = self.run(lane, &PACER, keys, args).await?;
    let members: usize = entries.iter().map(|e| batch.entries[*e].members.len()).sum();
    if reply.len() != members * REPLY_FIELDS {
      return Err(Error::new(ErrorKind::Script, "malformed pacer reply"));
    }
    let mut decisions = Vec::with_capacity(members);
    let mut fields = reply.chunks(REPLY_FIELDS);
    for e in entries {
      let entry = &batch.entries[*e];
      let start = decisions.len();
      for _ in entry.members.clone() {
        decisions.push(decision_from(fields.next().unwrap_or_default())?);
      }
      settle_admission(&mut decisions[start..], entry.mode);
    }
    Ok(decisions)
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
        Ok(_) => failure = Some(Error::new(ErrorKind::Script, "malformed pacer reply")),
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
  fn entry(&mut self, batch: &PacerBatch, members: &[super::Member], mode: Mode, report: bool) {
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
  fn member_index(&mut self, key: &str, batch_key: usize, m: &super::Member) -> usize {
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

/// f64 Display is the shortest string that parses back to the same double.
fn number(x: f64) -> Value {
  if x.fract() == 0.0 && x.abs() < 1e15 {
    Value::Integer(x as i64)
  } else {
    Value::String(x.to_string().into())
  }
}

/// Fields per member in the script's reply: delay_us, watermark_before in millionths.
const REPLY_FIELDS: usize = 2;
/// A member's argument packs its key index and parameter set: `key * KEY_SHIFT + set`.
const KEY_SHIFT: usize = 1 << 20;

fn decision_from(fields: &[Value]) -> Result<Decision> {
  let int = |i: usize| {
    fields.get(i).and_then(Value::as_i64).ok_or_else(|| Error::new(ErrorKind::Script, "malformed pacer reply"))
  };
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

/// Convenience for bindings: decide and flatten.
pub async fn pacer_batch_flat(
  store: &RedisStore,
  batch: &PacerBatch,
  now_us: Option<f64>,
  lane: &Lane,
) -> Result<Vec<f64>> {
  Ok(encode_decisions(&store.pacer_batch(batch, now_us, lane).await?))
}

impl RedisStore {
  /// Several concurrent-limiter operations, decided in order: one script call per hash slot
  /// (on a standalone server, one for all), on the connection of `lane`. `ops` = (limiter
  /// key, lease or waiter id, op, [limit, lock_us, wait_us, ttl_ms]); the limiter's keys are
  /// `<key>:h`, `<key>:q`, `<key>:i` and its grant channel `<key>:wake`. Results:
  /// [`CONCURRENT_RESULT_FIELDS`] numbers per operation, zero-padded, and the grants the
  /// batch made (`"<waiter id> <token>"`, also published).
  pub async fn concurrent_batch(
    &self,
    ops: &[(String, String, f64, [f64; 4])],
    now_us: Option<f64>,
    lane: &Lane,
  ) -> Result<(Vec<f64>, Vec<String>)> {
    let mut groups: BTreeMap<(u16, usize), Vec<usize>> = BTreeMap::new();
    for (i, (key, ..)) in ops.iter().enumerate() {
      let slot = if self.cluster { fred::util::redis_keyslot(key.as_bytes()) } else { 0 };
      groups.entry((slot, i / CHUNK)).or_default().push(i);
    }
    let calls = groups.values().map(|members| self.concurrent_call(ops, members, now_us, lane));
    let results = futures::future::join_all(calls).await;
    let mut out = vec![0.0; ops.len() * CONCURRENT_RESULT_FIELDS];
    let mut grants = vec![];
    for (members, result) in groups.values().zip(results) {
      let (replies, granted) = result?;
      for (i, values) in members.iter().zip(replies) {
        let at = i * CONCURRENT_RESULT_FIELDS;
        out[at..at + values.len()].copy_from_slice(&values);
      }
      grants.extend(granted);
    }
    Ok((out, grants))
  }

  async fn concurrent_call(
    &self,
    ops: &[(String, String, f64, [f64; 4])],
    members: &[usize],
    now_us: Option<f64>,
    lane: &Lane,
  ) -> Result<(Vec<Vec<f64>>, Vec<String>)> {
    // limiters and parameter sets are numbered from 1, in order of first use
    fn index_of<T: PartialEq + Copy>(list: &mut Vec<T>, item: T) -> usize {
      match list.iter().position(|x| *x == item) {
        Some(i) => i + 1,
        None => {
          list.push(item);
          list.len()
        }
      }
    }
    let mut limiters: Vec<&str> = vec![];
    let mut sets: Vec<[f64; 4]> = vec![];
    let mut encoded: Vec<Value> = Vec::with_capacity(members.len() * 2);
    for i in members {
      let (key, id, op, nums) = &ops[*i];
      let g = index_of(&mut limiters, key.as_str());
      let set = index_of(&mut sets, *nums);
      encoded.push(Value::Integer(((g * 1024 + set) * 8) as i64 + *op as i64));
      encoded.push(Value::String(id.as_str().into()));
    }
    let keys: Vec<Key> =
      limiters.iter().flat_map(|k| ["h", "q", "i"].map(|part| Key::from(format!("{k}:{part}")))).collect();
    let mut args = vec![now_us.map(number).unwrap_or_else(|| Value::String("".into())), number(limiters.len() as f64)];
    args.extend(limiters.iter().map(|k| Value::String(format!("{k}:wake").into())));
    args.push(number(sets.len() as f64));
    args.extend(sets.iter().flatten().map(|x| number(*x)));
    args.extend(encoded);
    let reply = self.run(lane, &CONCURRENT, keys, args).await?;
    let malformed = || Error::new(ErrorKind::Script, "malformed concurrent reply");
    let mut fields = reply.iter();
    let replies = members
      .iter()
      .map(|i| {
        let width = if ops[*i].2 == 6.0 { 9 } else { 4 };
        (0..width).map(|_| fields.next().and_then(Value::as_i64).map(|x| x as f64).ok_or_else(malformed)).collect()
      })
      .collect::<Result<Vec<Vec<f64>>>>()?;
    let grants = fields.map(|v| v.as_string().ok_or_else(malformed)).collect::<Result<Vec<String>>>()?;
    Ok((replies, grants))
  }

  /// Connects the subscriber on first use: it resubscribes by itself after a reconnect, and
  /// every reconnect or overflow queues [`WAKE_RESYNC`].
  async fn subscriber(&self) -> Result<&SubscriberClient> {
    if self.closed.load(Ordering::Relaxed) {
      return Err(Error::new(ErrorKind::Closed, "the store is closed"));
    }
    self
      .subscribed
      .get_or_try_init(|| async {
        match tokio::time::timeout(self.connect_timeout, self.subscriber.init()).await {
          Ok(Ok(_)) => {}
          Ok(Err(e)) => return Err(store_error(e)),
          Err(_) => return Err(Error::new(ErrorKind::Timeout, "cannot connect the subscriber in time")),
        }
        self.subscriber.manage_subscriptions();
        let (mut messages, mut reconnects) = (self.subscriber.message_rx(), self.subscriber.reconnect_rx());
        let wakes = self.wakes.clone();
        tokio::spawn(async move {
          use tokio::sync::broadcast::error::RecvError;
          loop {
            tokio::select! {
              m = messages.recv() => match m {
                Ok(m) => {
                  if let Some(text) = m.value.as_string() {
                    wakes.push(text)
                  }
                }
                Err(RecvError::Lagged(_)) => wakes.push(WAKE_RESYNC.into()),
                Err(RecvError::Closed) => break,
              },
              r = reconnects.recv() => match r {
                Ok(_) | Err(RecvError::Lagged(_)) => wakes.push(WAKE_RESYNC.into()),
                Err(RecvError::Closed) => break,
              },
            }
          }
        });
        Ok(())
      })
      .await?;
    Ok(&self.subscriber)
  }

  /// Subscribes to a grant channel; resolves once Redis has confirmed.
  pub async fn subscribe(&self, channel: &str) -> Result<()> {
    let subscriber = self.subscriber().await?;
    let confirmed = tokio::time::timeout(self.command_timeout, subscriber.subscribe(channel)).await;
    confirmed.map_err(|_| Error::new(ErrorKind::Timeout, "SUBSCRIBE not confirmed in time"))?.map_err(store_error)
  }

  pub async fn unsubscribe(&self, channel: &str) -> Result<()> {
    let subscriber = self.subscriber().await?;
    let confirmed = tokio::time::timeout(self.command_timeout, subscriber.unsubscribe(channel)).await;
    confirmed.map_err(|_| Error::new(ErrorKind::Timeout, "UNSUBSCRIBE not confirmed in time"))?.map_err(store_error)
  }

  /// The grant messages received since the last call, waiting for at least one. An empty
  /// list means "stop listening" ([`stop_wakes`](Self::stop_wakes) or close).
  pub async fn next_wakes(&self) -> Vec<String> {
    loop {
      let notified = self.wakes.notify.notified();
      {
        let mut queue = self.wakes.queue.lock();
        if !queue.is_empty() {
          let mut out = std::mem::take(&mut *queue);
          out.retain(|m| !m.is_empty());
          return out;
        }
      }
      notified.await;
    }
  }

  /// Ends the pending [`next_wakes`](Self::next_wakes) call with an empty list.
  pub fn stop_wakes(&self) {
    self.wakes.push(String::new());
  }
}

#[cfg(test)]
mod readable_tests {
  use super::readable;

  #[test]
  fn issue_24_io_errors_read_as_sentences() {
    assert_eq!(
      readable(r#"IO Error: Os { code: 111, kind: ConnectionRefused, message: "Connection refused" }"#),
      "IO Error: Connection refused (os error 111)"
    );
    assert_eq!(readable("Request timed out."), "Request timed out.");
    assert_eq!(readable("Os { code: 5 }"), "Os { code: 5 }");
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
    assert!(!wrong_type_message("pacer").contains('{'));
  }

  #[test]
  fn urls_are_shown_without_their_secret() {
    assert_eq!(redact_url("redis://user:secret@host:notaport"), "redis://***@host:notaport");
    assert_eq!(redact_url("rediss://:s3cr3t@127.0.0.1:6380/2"), "rediss://***@127.0.0.1:6380/2");
    assert_eq!(redact_url("redis://onlypass@host"), "redis://***@host");
    assert_eq!(redact_url("redis://u:p@ss@host:1"), "redis://***@host:1");
    assert_eq!(redact_url("redis://host:6379"), "redis://host:6379");
    assert_eq!(redact_url("http://u:pw@x"), "http://***@x");
    assert_eq!(redact_url("u:pw@x"), "***");
    assert_eq!(redact_in("bad pass: secret!", "redis://user:secret@host"), "bad pass: ***!");
    // issue 24: a password holding '@' is masked whole, not from its last '@'
    assert_eq!(redact_url("redis://:S3cr@tP4ss@host:6379/0"), "redis://***@host:6379/0");
    assert_eq!(redact_url("redis://:pa/ss@host"), "redis://***@host");
    assert_eq!(redact_url("redis://u:p?a#s/s@host:1/2"), "redis://***@host:1/2");
    assert_eq!(redact_in("bad pa/ss", "redis://:pa/ss@host"), "bad ***");
    assert_eq!(redact_in("auth :S3cr@tP4ss failed", "redis://:S3cr@tP4ss@host"), "auth *** failed");
    for url in ["redis://user:secret@host:notaport", "redis://user:secret@:6379", "redis://user:secret@host:99999"] {
      let options = RedisOptions { url: url.into(), ..RedisOptions::default() };
      let e = config_from(&options).unwrap_err();
      assert_eq!(e.kind, ErrorKind::InvalidConfig);
      assert!(!e.message.contains("secret"), "{}", e.message);
    }
  }
}
