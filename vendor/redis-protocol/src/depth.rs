//! A cap on how deeply aggregate frames (arrays, maps, sets, pushes, attributes) may nest.
//!
//! Patched in by sluice: the decoders recurse once per level, so a reply of `*1\r\n` repeated
//! a few thousand times (8 KB) overflowed the stack of the thread decoding it. As hiredis and
//! libvalkey do, a frame nested deeper than `MAX_DEPTH` is a protocol error. The decoders are
//! synchronous, so the current depth lives in a thread-local counter.

use crate::error::RedisParseError;

/// The deepest nesting accepted. hiredis and libvalkey accept 1024; the decoders here recurse
/// through several functions per level, which costs a few hundred bytes of stack per level in a
/// release build but up to ~20 KB in a debug one (RESP3: 127 levels overflowed a 2 MiB thread),
/// and no reply to the commands sluice sends nests deeper than 3. 32 levels fit a 2 MiB worker
/// stack in any build, with room to spare.
pub const MAX_DEPTH: usize = 32;

#[cfg(feature = "std")]
std::thread_local! {
  static DEPTH: core::cell::Cell<usize> = const { core::cell::Cell::new(0) };
}

/// One level of nesting entered; leaves it when dropped.
pub(crate) struct Level(());

#[cfg(feature = "std")]
impl Drop for Level {
  fn drop(&mut self) {
    DEPTH.with(|d| d.set(d.get().saturating_sub(1)));
  }
}

/// Enters one more level of nesting, or fails with a protocol error beyond `MAX_DEPTH`.
pub(crate) fn enter<I>() -> Result<Level, nom::Err<RedisParseError<I>>> {
  #[cfg(feature = "std")]
  {
    let deeper = DEPTH.with(|d| {
      let depth = d.get();
      if depth >= MAX_DEPTH {
        false
      } else {
        d.set(depth + 1);
        true
      }
    });
    if !deeper {
      return Err(RedisParseError::new_custom("parse_frame", "Max nesting depth exceeded.").into_nom_error());
    }
  }
  Ok(Level(()))
}
