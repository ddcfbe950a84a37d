//! Running a Lua script: each script embedded once, as build.rs expanded it (its
//! `-- @include` lines replaced by the snippets of `lua/includes/`), with its SHA1 (each kind's
//! file names its own), sent by EVALSHA on a lane (a pool connection or the direct socket), NOSCRIPT answered
//! by one EVAL, TRYAGAIN retried within the deadline, and a server before Redis 7 given the
//! scripts without their shebang.

use super::connect::{redirectable, store_error};
use super::{Lane, RedisStore};
use crate::error::{Error, ErrorKind, Result};
use fred::prelude::*;
use std::sync::atomic::Ordering;
use std::time::Duration;

/// The text of `lua/<name>.lua` as build.rs expanded it (every `-- @include <snippet>` line
/// replaced by `lua/includes/<snippet>.lua`): the text sent to Redis, so its SHA1 is the
/// expanded script's.
macro_rules! lua_script {
  ($name:literal) => {
    include_str!(concat!(env!("OUT_DIR"), "/lua/", $name, ".lua"))
  };
}
pub(crate) use lua_script;

/// A Lua script and its SHA1.
pub struct Script {
  pub lua: String,
  pub sha: String,
  /// The same script with a Redis 7 shebang (`#!lua`, no flags): Redis refuses it whole, before
  /// it runs, when `maxmemory` is reached under `noeviction`. Without it (a "legacy" script),
  /// Redis checks memory only at the script's first write, and a script whose first write
  /// frees memory (a pruning ZREMRANGEBYSCORE) may then go on writing past `maxmemory`.
  pub flagged: String,
  pub flagged_sha: String,
}

impl Script {
  /// `lua` (a script as `lua_script!` embeds it), with its SHA1s computed once.
  pub fn new(lua: &str) -> Script {
    let flagged = format!("#!lua\n{lua}");
    let lua = lua.to_owned();
    Script { sha: fred::util::sha1_hash(&lua), lua, flagged_sha: fred::util::sha1_hash(&flagged), flagged }
  }

  /// `(sha, body)`: the flagged script, or the legacy one for a server before Redis 7.
  pub fn pick(&self, legacy: bool) -> (&str, &str) {
    if legacy {
      (&self.sha, &self.lua)
    } else {
      (&self.flagged_sha, &self.flagged)
    }
  }
}

/// Whether `details` (an error reply to EVAL) says the server cannot compile a shebang line: a
/// server before Redis 7, which then gets the legacy scripts.
pub fn shebang_refused(details: &str) -> bool {
  details.contains("Error compiling script") && details.contains("'#'")
}

impl RedisStore {
  /// Runs a script; NOSCRIPT is answered by one EVAL on the same node. On the pool, the
  /// deadline is fred's per-command timeout (`command_timeout`, one timer per round trip);
  /// on the direct lane, the JS layer's. Keys and values are refcounted bytes, so the copy
  /// kept for a NOSCRIPT retry is cheap.
  pub(crate) async fn run(&self, lane: &Lane, script: &Script, keys: Vec<Key>, args: Vec<Value>) -> Result<Vec<Value>> {
    let legacy = self.legacy_scripts.load(Ordering::Relaxed);
    match self.run_as(lane, script, legacy, &keys, &args).await {
      // a server before Redis 7 cannot compile the shebang: legacy scripts from now on
      Err(e) if !legacy && shebang_refused(&e.message) => {
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
        other => return other.map_err(|e| self.at_node(store_error(e), &client, keys)),
      }
    }
  }

  /// On a cluster, a store failure (unreachable, timed out) names the node that owns the
  /// call's slot, as the client last knew the slot map (`(Redis at cluster node host:port)`):
  /// the seeds the store was given (which the JS layer names otherwise) may all be up. Never
  /// a key: only the slot's owner.
  fn at_node(&self, mut e: Error, client: &Client, keys: &[Key]) -> Error {
    if !self.cluster || !matches!(e.kind, ErrorKind::StoreUnavailable | ErrorKind::Timeout) {
      return e;
    }
    let Some(key) = keys.first() else { return e };
    let slot = fred::util::redis_keyslot(key.as_bytes());
    let owner =
      client.cached_cluster_state().and_then(|s| s.get_server(slot).map(|s| format!("{}:{}", s.host, s.port)));
    if let Some(owner) = owner {
      e.message = format!("{} (Redis at cluster node {})", e.message, node_address(&owner));
    }
    e
  }
}

/// `host:port` as shown in an error: an IPv6 host in brackets, as a URL writes it.
fn node_address(host_port: &str) -> String {
  match host_port.rsplit_once(':') {
    Some((host, port)) if host.contains(':') && !host.starts_with('[') => format!("[{host}]:{port}"),
    _ => host_port.to_owned(),
  }
}

#[cfg(test)]
mod tests {
  use super::node_address;

  #[test]
  fn a_node_is_shown_as_a_url_writes_it() {
    assert_eq!(node_address("127.0.0.1:7001"), "127.0.0.1:7001");
    assert_eq!(node_address("::1:7001"), "[::1]:7001");
    assert_eq!(node_address("[::1]:7001"), "[::1]:7001");
    assert_eq!(node_address("cache.internal:6379"), "cache.internal:6379");
  }
}
