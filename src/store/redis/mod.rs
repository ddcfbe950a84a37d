//! The Redis store: one fred pool (standalone or Redis Cluster), scripts by EVALSHA. This
//! module holds the store's handle; what a kind sends and decodes is in its file under
//! `store::kinds`, and runs through [`calls`] (slot grouping) and [`script`] (the runner).
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
//!   applies nothing of it, and answers [`WRONG_TYPE`](crate::store::kinds::WRONG_TYPE) in a
//!   field that is never negative otherwise (each kind's file names it); the other calls of
//!   its script call are decided as usual. The value goes to JS unchanged, in the call's flat
//!   result, where that call alone rejects with `ERR_SCRIPT`.

pub mod calls;
mod connect;
mod direct;
mod eviction;
mod order;
mod rules;
pub mod script;
mod stats;
mod tls;
mod wakes;

pub use connect::{readable, redact_url, RedisOptions, SentinelOptions};
pub use direct::{reply_end, DirectTask, Lane, Step};
pub use order::SendOrder;
pub use rules::decode_rules;
pub use stats::{decode_stats, StatsOp};
pub use tls::TlsOptions;
pub use wakes::WAKE_RESYNC;

use fred::clients::SubscriberClient;
use fred::prelude::*;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

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
  wakes: Arc<wakes::Wakes>,
  /// Call order of the batches sent through this store.
  pub order: SendOrder,
  /// The server refused a shebang (before Redis 7): scripts go without one from then on.
  legacy_scripts: AtomicBool,
}

impl RedisStore {
  pub fn is_cluster(&self) -> bool {
    self.cluster
  }

  /// Whether every connection was up when `connect` returned.
  pub fn started_up(&self) -> bool {
    self.started_up
  }
}
