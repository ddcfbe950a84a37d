//! Stores: where state lives and how a call is run atomically, and the kinds they run.
//!
//! - [`kinds`]: the registry of kinds, each in its own file: how a call is decoded, its
//!   memory step, its Lua script and reply decoding, its result layout and operation codes.
//! - [`memory::MemoryStore`]: the core steps under a lock, in process, with the system clock
//!   or an injected one.
//! - [`redis::RedisStore`]: the Lua mirrors of the steps, by EVALSHA over one fred pool, with
//!   the Redis server clock (`TIME`) unless the caller passes `now`.
//!
//! This file holds the validation every kind shares.

pub mod kinds;
pub mod memory;
pub mod redis;

use crate::error::{Error, Result};

/// Longest accepted full store key, bytes: a 512-character JS key is at most 1,536 bytes
/// once escaped or UTF-8 encoded (3 per character), plus a prefix of up to 128.
pub const MAX_KEY_LEN: usize = 2048;
/// Largest limit or |weight| of a counting limiter, and the longest interval or block, µs
/// (defined in `crate::core::bounds`).
pub use crate::core::bounds::{MAX_INTERVAL_US, MAX_LIMIT};

/// A full store key: non-empty, bounded, no newline.
pub fn validate_key(key: &str) -> Result<()> {
  if key.is_empty() || key.len() > MAX_KEY_LEN || key.contains('\n') {
    return Err(Error::argument(format!("key must be 1..={MAX_KEY_LEN} bytes without newlines")));
  }
  Ok(())
}

/// Whether `x` is a whole number in `[lo, hi]`.
pub fn integer_in(x: f64, lo: f64, hi: f64) -> bool {
  x.is_finite() && x.fract() == 0.0 && x >= lo && x <= hi
}
