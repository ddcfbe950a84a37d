//! The only napi code: converts types and errors, holds store handles. No limiter logic, and
//! nothing per kind: a call names its kind by the code of its registry line
//! (`store::kinds`), and [`kinds`] tells JS every code, name and operation code.
//!
//! These functions and classes are the native layer under `lib/` (the public JS API); users
//! do not call them directly. Errors cross as `Error` whose message starts with the stable code
//! (`ERR_TIMEOUT: ...`); `lib/base/errors.js` turns them into `SluiceError` instances.
//!
//! - [`memory`]: the embedded store (`memoryCall`, the io-buffer fast path `memoryStep`).
//! - [`redis`]: the Redis store (`connectRedis`, `redisCall` on a pool lane, `redisDirect`
//!   on the JS thread's socket, statistics, grant wake-ups).
// napi-derive registers exports only outside `cfg(test)`, so a test build sees them unused.
#![cfg_attr(test, allow(dead_code))]

mod completions;
mod memory;
mod redis;

use crate::error::Error;
use napi::bindgen_prelude::*;
use napi_derive::napi;
use std::collections::HashMap;

fn js_error(e: Error) -> napi::Error {
  napi::Error::new(Status::GenericFailure, e.to_string())
}

/// A crate result as a napi one.
fn js<T>(r: crate::error::Result<T>) -> Result<T> {
  r.map_err(js_error)
}

/// One kind, as `kinds()` describes it.
#[napi(object, object_from_js = false)]
pub struct KindEntry {
  /// The kind's name (its registry line's module).
  pub name: String,
  /// The code to pass as `kind` to `memoryCall`, `memoryStep`, `redisCall`, `redisDirect`.
  pub code: u32,
  /// The numbers its calls carry (operation codes, modes), by name.
  pub ops: HashMap<String, f64>,
}

/// Every kind of the registry: its name, code and operation codes (see each kind's file under
/// `src/store/kinds/` for its call and result layouts).
#[napi(catch_unwind)]
pub fn kinds() -> Vec<KindEntry> {
  crate::store::kinds::table()
    .into_iter()
    .map(|k| KindEntry {
      name: k.name.to_owned(),
      code: k.code,
      ops: k.ops.iter().map(|(name, code)| ((*name).to_owned(), *code)).collect(),
    })
    .collect()
}

/// The marker a call's result carries in the field its kind names when the call's key holds
/// a value of another type (nothing of the call was applied).
#[napi]
pub const WRONG_TYPE: f64 = crate::store::kinds::WRONG_TYPE;

/// One tokio worker: the Redis path is I/O-bound and its batches are already coalesced, and
/// on a small machine every cross-thread hand-off between two workers costs a wake-up.
#[napi_derive::module_init]
fn init_runtime() {
  if let Ok(rt) = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build() {
    napi::bindgen_prelude::create_custom_tokio_runtime(rt);
  }
}
