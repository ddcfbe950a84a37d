//! How results cross back to JS without a per-call object: a Redis store's calls finish on
//! tokio and queue their replies here; one thread-safe function per store (made once, by
//! `redisAttach`) wakes the JS thread, which writes every reply queued meanwhile into the
//! store's own `Float64Array` and calls the store's JS callback once.
//!
//! Per call this replaces napi's `spawn_future` (a deferred promise and a thread-safe function
//! made and released per call) and a result `Float64Array` over a Rust `Vec` (an external
//! buffer freed by a finalizer only when the event loop turns: a loop of calls that never
//! yields grew without bound).
//!
//! Records, from the buffer's start, per finished call: `[slot, status, n, extra]` then, for
//! status 0, its `n` numbers. Status 1: `extra[i]` (the callback's second argument) is the
//! call's result (a number array, or `{ values, text }` for a kind that answers strings, or
//! numbers too many for the buffer, or a [`PartialReply`] `{ values, text, failed, error }`
//! when some of a batch's calls failed); status 2: `extra[i]` is the call's failure, a
//! `NativeError` `{ code, detail, message }`.

use crate::error::Result as CrateResult;
use crate::store::kinds::Reply;
use napi::bindgen_prelude::*;
use napi::sys;
use parking_lot::Mutex;
use std::ptr;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Weak};

/// A call's result as JS settles it when it does not travel inline in the buffer.
#[napi_derive::napi(object, object_from_js = false)]
pub struct TextReply {
  pub values: Vec<f64>,
  /// Strings, in lib/base/codec.js' encoding (for concurrent: the grants made).
  pub text: String,
}

/// A batch's result when some of its calls failed while the others were decided (a cluster
/// master down): `values` (and `text`) are the decided calls' results, in call order, as if
/// the batch had been those calls only.
#[napi_derive::napi(object, object_from_js = false)]
pub struct PartialReply {
  pub values: Vec<f64>,
  pub text: Option<String>,
  /// The failed calls' indices in the batch, ascending.
  pub failed: Vec<u32>,
  /// Their error, as a failed call's.
  pub error: super::NativeError,
}

/// Numbers, numbers and strings, a partial result, or (the direct lane) a failure.
pub type Settled = Either4<Vec<f64>, TextReply, PartialReply, super::NativeError>;

/// `reply` as a value JS settles with (not inline).
pub fn settled(reply: Reply) -> Settled {
  match (reply.failed, reply.text) {
    (Some(f), text) => {
      Either4::C(PartialReply { values: reply.numbers, text, failed: f.calls, error: super::NativeError::of(&f.error) })
    }
    (None, None) => Either4::A(reply.numbers),
    (None, Some(text)) => Either4::B(TextReply { values: reply.numbers, text }),
  }
}

/// A reference to the store's result buffer (a JS `Float64Array`), read on the JS thread only.
struct OutRef(sys::napi_ref);

/// The pool lane's finished calls, and how JS hears of them.
pub struct Completions {
  queue: Mutex<Vec<(u32, CrateResult<Reply>)>>,
  scheduled: AtomicBool,
  tsfn: sys::napi_threadsafe_function,
  out: Mutex<OutRef>,
  /// Calls sent and not yet delivered (JS thread): the function keeps the process alive only
  /// while there are some.
  outstanding: AtomicU32,
  /// The function was released (the store closed): nothing calls it any more.
  released: AtomicBool,
}

// SAFETY: `tsfn` is thread-safe by N-API's contract; `out` is dereferenced on the JS thread
// only (in `deliver` and `write_out`, both called from JS or from the function's JS callback).
unsafe impl Send for Completions {}
unsafe impl Sync for Completions {}

fn check(status: sys::napi_status, what: &str) -> Result<()> {
  if status == sys::Status::napi_ok {
    Ok(())
  } else {
    Err(napi::Error::new(Status::GenericFailure, format!("{what} failed ({status})")))
  }
}

impl Completions {
  /// Makes the store's thread-safe function over `callback` (`(records, extra) => void`),
  /// writing results into `out`.
  pub fn new(env: &Env, callback: sys::napi_value, out: sys::napi_value) -> Result<Arc<Self>> {
    let raw = env.raw();
    let mut out_ref = ptr::null_mut();
    check(unsafe { sys::napi_create_reference(raw, out, 1, &mut out_ref) }, "reference")?;
    let label = "sluice.completions";
    let mut name = ptr::null_mut();
    check(
      unsafe { sys::napi_create_string_utf8(raw, label.as_ptr().cast(), label.len() as isize, &mut name) },
      "name",
    )?;
    let made = Arc::new_cyclic(|weak: &Weak<Completions>| {
      let context = Box::into_raw(Box::new(weak.clone())).cast::<std::ffi::c_void>();
      let mut tsfn = ptr::null_mut();
      let status = unsafe {
        sys::napi_create_threadsafe_function(
          raw,
          callback,
          ptr::null_mut(),
          name,
          0,
          1,
          context,
          Some(finalize),
          context,
          Some(call_js),
          &mut tsfn,
        )
      };
      if status != sys::Status::napi_ok {
        drop(unsafe { Box::from_raw(context.cast::<Weak<Completions>>()) });
      }
      Completions {
        queue: Mutex::new(Vec::new()),
        scheduled: AtomicBool::new(false),
        tsfn,
        out: Mutex::new(OutRef(out_ref)),
        outstanding: AtomicU32::new(0),
        released: AtomicBool::new(false),
      }
    });
    if made.tsfn.is_null() {
      return Err(napi::Error::new(Status::GenericFailure, "cannot make the completion function"));
    }
    // idle: keeps no process alive until a call is sent
    check(unsafe { sys::napi_unref_threadsafe_function(raw, made.tsfn) }, "unref")?;
    Ok(made)
  }

  /// Replaces the result buffer (JS grows it).
  pub fn set_out(&self, env: &Env, out: sys::napi_value) -> Result<()> {
    let mut new_ref = ptr::null_mut();
    check(unsafe { sys::napi_create_reference(env.raw(), out, 1, &mut new_ref) }, "reference")?;
    let old = std::mem::replace(&mut *self.out.lock(), OutRef(new_ref));
    unsafe { sys::napi_delete_reference(env.raw(), old.0) };
    Ok(())
  }

  /// A call was sent (JS thread): the process stays alive until its result is delivered.
  pub fn sent(&self, env: &Env) -> Result<()> {
    if self.outstanding.fetch_add(1, Ordering::Relaxed) == 0 {
      check(unsafe { sys::napi_ref_threadsafe_function(env.raw(), self.tsfn) }, "ref")?;
    }
    Ok(())
  }

  /// The store closed, every call it sent settled: the function is released at once. An
  /// unreferenced function left to the environment's teardown kept Node 24 from exiting
  /// (a process that closed its RedisStore never ended there; Node 20 and 22 exited).
  pub fn release(&self) {
    if !self.released.swap(true, Ordering::AcqRel) {
      unsafe { sys::napi_release_threadsafe_function(self.tsfn, sys::ThreadsafeFunctionReleaseMode::release) };
    }
  }

  /// A call finished (any thread): queued, and the JS thread woken unless it already is.
  pub fn complete(&self, slot: u32, result: CrateResult<Reply>) {
    if self.released.load(Ordering::Acquire) {
      return;
    }
    self.queue.lock().push((slot, result));
    if !self.scheduled.swap(true, Ordering::AcqRel) {
      unsafe {
        sys::napi_call_threadsafe_function(self.tsfn, ptr::null_mut(), sys::ThreadsafeFunctionCallMode::nonblocking)
      };
    }
  }

  /// The result buffer's numbers (JS thread only; valid until JS runs again).
  ///
  /// # Safety
  /// Call on the JS thread, and drop the slice before any JS code runs.
  pub unsafe fn out_slice<'a>(&self, env: sys::napi_env) -> Result<&'a mut [f64]> {
    let mut value = ptr::null_mut();
    check(unsafe { sys::napi_get_reference_value(env, self.out.lock().0, &mut value) }, "buffer")?;
    let (mut kind, mut length, mut data, mut buffer, mut offset) = (0, 0, ptr::null_mut(), ptr::null_mut(), 0);
    check(
      unsafe { sys::napi_get_typedarray_info(env, value, &mut kind, &mut length, &mut data, &mut buffer, &mut offset) },
      "buffer info",
    )?;
    if kind != TypedArrayType::Float64 as i32 || data.is_null() {
      return Err(napi::Error::new(Status::InvalidArg, "the result buffer must be a Float64Array"));
    }
    Ok(unsafe { std::slice::from_raw_parts_mut(data.cast::<f64>(), length) })
  }

  /// Writes the queued results and calls JS (JS thread, from the function's callback).
  fn deliver(&self, env: sys::napi_env, callback: sys::napi_value) -> Result<()> {
    let done = std::mem::take(&mut *self.queue.lock());
    if done.is_empty() {
      return Ok(());
    }
    let left = self.outstanding.fetch_sub(done.len() as u32, Ordering::Relaxed) - done.len() as u32;
    let mut extra: Vec<sys::napi_value> = Vec::new();
    let mut at = 0usize;
    let mut records = 0u32;
    for (slot, result) in done {
      let out = unsafe { self.out_slice(env)? };
      let (status, n, value) = match result {
        Ok(reply) if reply.text.is_none() && reply.failed.is_none() && reply.numbers.len() + 4 <= out.len() => {
          if at + 4 + reply.numbers.len() > out.len() {
            call(env, callback, records, &mut extra)?;
            (at, records) = (0, 0);
          }
          out[at + 4..at + 4 + reply.numbers.len()].copy_from_slice(&reply.numbers);
          (0.0, reply.numbers.len(), None)
        }
        Ok(reply) => (1.0, 0, Some(unsafe { Settled::to_napi_value(env, settled(reply))? })),
        Err(e) => (2.0, 0, Some(unsafe { super::NativeError::to_napi_value(env, super::NativeError::of(&e))? })),
      };
      if value.is_some() && at + 4 > out.len() {
        call(env, callback, records, &mut extra)?;
        (at, records) = (0, 0);
      }
      let index = match value {
        Some(v) => {
          extra.push(v);
          extra.len() - 1
        }
        None => 0,
      };
      let out = unsafe { self.out_slice(env)? };
      out[at..at + 4].copy_from_slice(&[slot as f64, status, n as f64, index as f64]);
      at += 4 + n;
      records += 1;
    }
    call(env, callback, records, &mut extra)?;
    if left == 0 {
      check(unsafe { sys::napi_unref_threadsafe_function(env, self.tsfn) }, "unref")?;
    }
    Ok(())
  }
}

/// Calls the store's callback with `records` records in the buffer and `extra`.
fn call(env: sys::napi_env, callback: sys::napi_value, records: u32, extra: &mut Vec<sys::napi_value>) -> Result<()> {
  if records == 0 {
    return Ok(());
  }
  let mut args = [ptr::null_mut(); 2];
  check(unsafe { sys::napi_create_uint32(env, records, &mut args[0]) }, "count")?;
  if extra.is_empty() {
    check(unsafe { sys::napi_get_undefined(env, &mut args[1]) }, "undefined")?;
  } else {
    check(unsafe { sys::napi_create_array_with_length(env, extra.len(), &mut args[1]) }, "array")?;
    for (i, v) in extra.iter().enumerate() {
      check(unsafe { sys::napi_set_element(env, args[1], i as u32, *v) }, "element")?;
    }
    extra.clear();
  }
  let mut recv = ptr::null_mut();
  check(unsafe { sys::napi_get_undefined(env, &mut recv) }, "undefined")?;
  let mut result = ptr::null_mut();
  check(unsafe { sys::napi_call_function(env, recv, callback, 2, args.as_ptr(), &mut result) }, "callback")
}

unsafe extern "C" fn call_js(
  env: sys::napi_env,
  callback: sys::napi_value,
  context: *mut std::ffi::c_void,
  _data: *mut std::ffi::c_void,
) {
  if env.is_null() || context.is_null() {
    return;
  }
  let weak = unsafe { &*context.cast::<Weak<Completions>>() };
  let Some(completions) = weak.upgrade() else { return };
  completions.scheduled.store(false, Ordering::Release);
  if let Err(e) = completions.deliver(env, callback) {
    let message = std::ffi::CString::new(e.reason).unwrap_or_default();
    unsafe { sys::napi_throw_error(env, ptr::null(), message.as_ptr()) };
  }
}

unsafe extern "C" fn finalize(_env: sys::napi_env, data: *mut std::ffi::c_void, _hint: *mut std::ffi::c_void) {
  if !data.is_null() {
    drop(unsafe { Box::from_raw(data.cast::<Weak<Completions>>()) });
  }
}

impl Drop for Completions {
  fn drop(&mut self) {
    // nothing can call the function any more: every call held this
    self.release();
  }
}
