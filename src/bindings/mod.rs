//! The only napi code: converts types and errors, holds store handles. No limiter logic, and
//! nothing per kind: a call names its kind by the code of its registry line
//! (`store::kinds`), and [`kinds`] tells JS every code, name and operation code.
//!
//! These functions and classes are the native layer under `lib/` (the public JS API); users
//! do not call them directly. Errors cross as fields, never as a message to parse: a thrown
//! error carries its stable code as its `code` property ([`Code`]); a store failure, which
//! comes back as a value (a call's result, a promise's), is a [`NativeError`] `{ code, detail,
//! message }`, its `detail` sorted once in Rust (`crate::error::Detail`).
//! `lib/base/errors.js`'s `fromNative` turns both into `SluiceError` instances.
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

/// The stable code a thrown error carries as its `code` property (napi sets it from the
/// error's status): `ERR_INVALID_ARGUMENT`, ... (`crate::error::ErrorKind::code`).
pub struct Code(pub &'static str);

impl AsRef<str> for Code {
  fn as_ref(&self) -> &str {
    self.0
  }
}

/// What the synchronous functions answer: an error is thrown with its stable `code`.
pub type Thrown<T> = std::result::Result<T, napi::Error<Code>>;

fn js_error(e: Error) -> napi::Error<Code> {
  napi::Error::new(Code(e.kind.code()), e.message)
}

/// A crate result as a napi one.
fn js<T>(r: crate::error::Result<T>) -> Thrown<T> {
  r.map_err(js_error)
}

/// A failure of napi itself (making a value or a reference) as an internal error.
fn napi_failure(e: napi::Error) -> napi::Error<Code> {
  napi::Error::new(Code("ERR_INTERNAL"), e.reason.clone())
}

/// A store failure as a value: its stable code, what it was (`node-down`, `topology-change`,
/// `outage`, or empty) and its message.
#[napi(object, object_from_js = false)]
pub struct NativeError {
  pub code: String,
  pub detail: String,
  pub message: String,
}

impl NativeError {
  pub fn of(e: &Error) -> NativeError {
    NativeError { code: e.kind.code().to_owned(), detail: e.detail.name().to_owned(), message: e.message.clone() }
  }
}

/// A result that resolves either way: the value, or the failure as a [`NativeError`] (an
/// async function's promise rejects only on a failure of napi itself).
fn resolved<T>(r: crate::error::Result<T>) -> napi::Result<Either<T, NativeError>> {
  Ok(match r {
    Ok(v) => Either::A(v),
    Err(e) => Either::B(NativeError::of(&e)),
  })
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
  /// Its result layout: each group of fields (by the group's name) and their names, in order.
  pub results: HashMap<String, Vec<String>>,
}

/// Every kind of the registry: its name, code, operation codes and result layout (see each kind's file under
/// `src/store/kinds/` for its call and result layouts).
#[napi(catch_unwind)]
pub fn kinds() -> Vec<KindEntry> {
  crate::store::kinds::table()
    .into_iter()
    .map(|k| KindEntry {
      name: k.name.to_owned(),
      code: k.code,
      ops: k.ops.iter().map(|(name, code)| ((*name).to_owned(), *code)).collect(),
      results: k
        .results
        .iter()
        .map(|(group, fields)| ((*group).to_owned(), fields.iter().map(|f| (*f).to_owned()).collect()))
        .collect(),
    })
    .collect()
}

/// Largest limit, weight, count or rate (`crate::core::bounds`): JS refuses more before a call.
#[napi]
pub const MAX_LIMIT: f64 = crate::core::bounds::MAX_LIMIT;
/// Longest interval, window, block, wait or TTL, µs (10 years).
#[napi]
pub const MAX_INTERVAL_US: f64 = crate::core::bounds::MAX_INTERVAL_US;
/// Most windows one limiter (or one door's key) counts at once.
#[napi]
pub const MAX_WINDOWS: u32 = crate::core::bounds::MAX_WINDOWS as u32;

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
