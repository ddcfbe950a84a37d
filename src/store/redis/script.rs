//! The script registry: each Lua file embedded once, with its SHA1 for EVALSHA.

use std::sync::LazyLock;

/// A Lua script and its SHA1.
pub struct Script {
  pub lua: &'static str,
  pub sha: String,
}

impl Script {
  fn new(lua: &'static str) -> Script {
    Script { lua, sha: fred::util::sha1_hash(lua) }
  }
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
