//! The script registry: each Lua file embedded once, with its SHA1 for EVALSHA.

use std::sync::LazyLock;

/// A Lua script and its SHA1.
pub struct Script {
  pub lua: &'static str,
  pub sha: String,
  /// The same script with a Redis 7 shebang (`#!lua`, no flags): Redis refuses it whole, before
  /// it runs, when `maxmemory` is reached under `noeviction`. Without it (a "legacy" script),
  /// Redis checks memory only at the script's first write, and a script whose first write
  /// frees memory (a pruning ZREMRANGEBYSCORE) may then go on writing past `maxmemory`.
  pub flagged: String,
  pub flagged_sha: String,
}

impl Script {
  fn new(lua: &'static str) -> Script {
    let flagged = format!("#!lua\n{lua}");
    Script { lua, sha: fred::util::sha1_hash(lua), flagged_sha: fred::util::sha1_hash(&flagged), flagged }
  }

  /// `(sha, body)`: the flagged script, or the legacy one for a server before Redis 7.
  pub fn pick(&self, legacy: bool) -> (&str, &str) {
    if legacy {
      (&self.sha, self.lua)
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

pub static PACER: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("../../../lua/pacer.lua")));
pub static PACER_UNDO: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("../../../lua/pacer_undo.lua")));
pub static LIMITER: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("../../../lua/limiter.lua")));
pub static CONCURRENT: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("../../../lua/concurrent.lua")));
pub static SLIDING: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("../../../lua/sliding.lua")));
pub static QUOTA: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("../../../lua/quota.lua")));
pub static FAIR: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("../../../lua/fair.lua")));
pub static PACER_BLOCK: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("../../../lua/pacer_block.lua")));
pub static STATS: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("../../../lua/stats.lua")));
