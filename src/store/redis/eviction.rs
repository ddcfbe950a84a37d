//! What the servers do when memory runs out: each master's `maxmemory_policy` (read from
//! `INFO memory`, which managed services and least-privilege ACL users allow where `CONFIG GET`
//! is refused), for the store's warning about evicting servers (lib/store/eviction.js).

use super::connect::store_error;
use super::RedisStore;
use fred::prelude::*;
use fred::types::{ClusterHash, CustomCommand};

/// The `maxmemory_policy` line of an `INFO memory` reply.
pub fn policy_in(info: &str) -> Option<String> {
  info.lines().find_map(|l| l.strip_prefix("maxmemory_policy:")).map(|p| p.trim().to_owned())
}

impl RedisStore {
  /// `(server, policy or why it could not be read)` of every master the store talks to.
  pub async fn eviction_policies(&self) -> Vec<(String, std::result::Result<String, String>)> {
    let info = CustomCommand::new_static("INFO", ClusterHash::Random, false);
    let client = self.pool.next();
    let read = |reply: Result<String, fred::error::Error>| match reply {
      Ok(text) => policy_in(&text).ok_or_else(|| "INFO memory has no maxmemory_policy".to_owned()),
      Err(e) => Err(store_error(e).message),
    };
    if !self.cluster {
      let server = client.active_connections().first().map_or_else(String::new, |s| s.to_string());
      return vec![(server, read(client.custom(info, vec!["memory"]).await))];
    }
    let mut out = vec![];
    for server in client.active_connections() {
      let reply = client.with_cluster_node(&server).custom(info.clone(), vec!["memory"]).await;
      out.push((server.to_string(), read(reply)));
    }
    out
  }
}

#[cfg(test)]
mod tests {
  #[test]
  fn reads_the_policy_line() {
    let info = "# Memory\r\nused_memory:1\r\nmaxmemory_policy:allkeys-lru\r\nother:2\r\n";
    assert_eq!(super::policy_in(info).as_deref(), Some("allkeys-lru"));
    assert_eq!(super::policy_in("# Memory\r\n"), None);
  }
}
