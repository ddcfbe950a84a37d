//! The embedded store's napi functions: its handle and io buffer, key interning and sweeping,
//! and one entry per way of calling a kind: `memoryCall` (a call in the kind's encoding) and
//! `memoryStep` (one call on an interned key, through the io buffer).
//!
//! Plain functions on an `External` handle: on this machine a napi class method costs ~260 ns
//! per call, a function with an External ~130 ns, and the memory store's whole decision is
//! cheaper than either. Results that hold several numbers are a JS array, not a Float64Array
//! over a Rust Vec: such an external buffer is freed by a finalizer that Node runs only when
//! the event loop turns, so a loop of synchronous calls that never yields (a batch job) grew
//! by ~400 B per call without bound.

use super::{js, js_error, Code};
use crate::error::{Error, ErrorKind};
use crate::store::kinds::{self, memory_now, Registered, Reply, Visit};
use crate::store::memory::MemoryStore;
use crate::store::validate_key;
use napi::bindgen_prelude::*;
use napi_derive::napi;

/// The embedded store, with the JS `Float64Array` its steps exchange numbers through: given
/// once here, so a step converts two arguments instead of three (the typed array alone cost
/// 40-90 ns per call).
pub struct MemoryHandle {
  pub(super) store: MemoryStore,
  io: parking_lot::Mutex<Float64Array>,
}

/// The handle as JS types it.
pub type Handle = External<MemoryHandle>;

/// Creates the embedded store's engine (synchronous: no tokio hop). `io` (6 numbers) carries
/// the numbers of every `memoryStep` both ways.
#[napi(catch_unwind, ts_return_type = "ExternalObject<'MemoryStore'>")]
pub fn memory_store_new(io: Float64Array) -> Result<External<MemoryHandle>, Code> {
  if io.len() < 6 {
    return Err(js_error(Error::new(ErrorKind::Internal, "io buffer too small")));
  }
  Ok(External::new(MemoryHandle { store: MemoryStore::new(), io: parking_lot::Mutex::new(io) }))
}

/// Interns a key of the embedded store: the id to pass to `memoryStep`, valid until a
/// `memorySweep` that returns true.
#[napi(catch_unwind)]
pub fn memory_intern(
  #[napi(ts_arg_type = "ExternalObject<'MemoryStore'>")] handle: &Handle,
  key: String,
) -> Result<u32, Code> {
  js(validate_key(&key))?;
  u32::try_from(handle.store.intern(&key)).map_err(|_| js_error(Error::new(ErrorKind::Internal, "too many keys")))
}

/// One call of kind `kind` on the embedded store, on an interned key, through the store's `io`
/// buffer (two arguments to convert instead of nine): in, the kind's numbers with `nowUs`
/// (-1 = the system clock) in slot 5; out, its result from slot 0 (see the kind's file;
/// pacer and limit have this path).
#[napi(catch_unwind)]
pub fn memory_step(
  #[napi(ts_arg_type = "ExternalObject<'MemoryStore'>")] handle: &Handle,
  kind: u32,
  id: u32,
) -> Result<(), Code> {
  step(handle, kind, id)
}

/// `memoryStep`, also for the legacy per-kind entries.
pub(super) fn step(handle: &MemoryHandle, kind: u32, id: u32) -> Result<(), Code> {
  struct Step<'a>(&'a MemoryStore, usize, &'a mut [f64]);
  impl Visit for Step<'_> {
    type Out = crate::error::Result<()>;
    fn visit<K: Registered>(self) -> Self::Out {
      K::memory_io(self.0, self.1, self.2)
    }
  }
  let mut io = handle.io.lock();
  // SAFETY: this call is synchronous on the JS thread, so no JS code runs, and none can touch
  // the buffer, while it is read and written here; the reference held by the Float64Array
  // keeps the buffer alive for as long as the handle lives.
  let io = unsafe { io.as_mut() };
  js(kinds::visit(kind, Step(&handle.store, id as usize, io)).and_then(|r| r))
}

/// A call of kind `K` on the embedded store: decoded, then run at `now_us` (-1 = the system
/// clock).
pub(super) fn call_of<K: Registered>(
  store: &MemoryStore,
  text: &str,
  nums: &[f64],
  now_us: f64,
) -> Result<Reply, Code> {
  let call = js(K::decode(text, nums))?;
  js(K::memory(store, &call, js(memory_now(now_us))?))
}

/// The answer of a call whose kind answers strings too.
#[napi(object, object_from_js = false)]
pub struct MemoryReply {
  pub values: Vec<f64>,
  /// Strings, in lib/base/codec.js' encoding (for concurrent: the grants made, `"<waiter id>
  /// <token>"`).
  pub text: String,
}

/// A call of kind `kind` on the embedded store: `text` (strings, encoded by lib/base/codec.js)
/// and `nums` (read, not kept: no reference is made to it) in the kind's call layout (see its file under `src/store/kinds/`), at `nowUs`
/// (-1 = the system clock). Answers the kind's flat results; with the strings it answers,
/// for a kind that answers strings.
#[napi(catch_unwind)]
pub fn memory_call(
  #[napi(ts_arg_type = "ExternalObject<'MemoryStore'>")] handle: &Handle,
  kind: u32,
  text: String,
  nums: Float64ArraySlice,
  now_us: f64,
) -> Result<Either<Vec<f64>, MemoryReply>, Code> {
  struct Call<'a>(&'a MemoryStore, &'a str, &'a [f64], f64);
  impl Visit for Call<'_> {
    type Out = Result<Reply, Code>;
    fn visit<K: Registered>(self) -> Self::Out {
      call_of::<K>(self.0, self.1, self.2, self.3)
    }
  }
  let reply = js(kinds::visit(kind, Call(&handle.store, &text, &nums, now_us)))??;
  Ok(match reply.text {
    None => Either::A(reply.numbers),
    Some(text) => Either::B(MemoryReply { values: reply.numbers, text }),
  })
}

/// Drops expired keys of the embedded store once enough have accumulated; true = ids were
/// freed and every id handed out before is invalid.
#[napi(catch_unwind)]
pub fn memory_sweep(
  #[napi(ts_arg_type = "ExternalObject<'MemoryStore'>")] handle: &Handle,
  now_us: f64,
) -> Result<bool, Code> {
  Ok(handle.store.sweep(js(memory_now(now_us))?))
}
