//! The kind registry: every kind of limiter the stores run, one line each, and the [`Kind`]
//! trait that says everything a store or the bindings need of one.
//!
//! A kind is described once, in its own file (or directory) here: how its calls are decoded
//! and validated from the two things that cross from JS (a list of strings in the encoding of
//! [`crate::codec`], and a slice of numbers), its Lua script(s), key layout, script arguments
//! and reply decoding, its step on the memory store, how its results are flattened, and its
//! operation codes. The core step functions stay in `crate::core`.
//!
//! The registry line (the `registry!` invocation at the bottom) declares each kind's module
//! and gives the kind its numeric code and name, and generates what is generic over the kinds: the memory store's per-key
//! [`Held`] state (one variant per kind), the dispatch from a code to the kind ([`visit`]),
//! and the table exported to JS ([`table`]). Nothing outside this module matches on kinds.

use crate::error::{Error, Result};
use crate::store::memory::{system_now_us, MemoryStore};
use crate::store::redis::{Lane, RedisStore};
use std::future::Future;

/// What one store call answers: flat numbers (the kind's result layout), and, for kinds that
/// answer strings too, those strings in the encoding of [`crate::codec`] (`None` otherwise).
/// On Redis, when some of a batch's calls failed while the others were decided (their hash
/// slots' master down), `failed` lists them: `numbers` and `text` then hold the decided calls'
/// results only, in call order, as if the batch had been those calls.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Reply {
  pub numbers: Vec<f64>,
  pub text: Option<String>,
  pub failed: Option<Failed>,
}

/// The calls of a batch that failed while the others were decided: their indices (ascending)
/// and the first error.
#[derive(Clone, Debug, PartialEq)]
pub struct Failed {
  pub calls: Vec<u32>,
  pub error: Error,
}

impl Reply {
  pub fn numbers(numbers: Vec<f64>) -> Reply {
    Reply { numbers, text: None, failed: None }
  }

  /// Per call its numbers and the strings it answers, as one reply: the numbers in call order,
  /// the strings too, in the encoding of [`crate::codec`].
  pub fn with_text(parts: impl IntoIterator<Item = (Vec<f64>, Vec<String>)>) -> Reply {
    let (mut numbers, mut text) = (vec![], vec![]);
    for (n, t) in parts {
      numbers.extend(n);
      text.extend(t);
    }
    Reply { numbers, text: Some(crate::codec::encode(&text)), failed: None }
  }
}

/// A kind of limiter, as the stores and the bindings see it. Implemented once per kind, in
/// its file; its code and name come from its registry line ([`Registered`]).
pub trait Kind: Sized + Send + Sync + 'static {
  /// A decoded, validated store call (usually a batch of the kind's calls).
  type Call: Send + Sync + 'static;
  /// What one key holds in the memory store (kinds called by key: fresh = `Default`). Every
  /// key is as large as the largest kind's state, so a state over 24 bytes is boxed.
  type State: Send + 'static;
  /// Operation codes and other numbers the JS layer writes into a call, by name (exported to
  /// JS by the bindings' `kinds()`; the Lua headers cite them).
  const OPS: &'static [(&'static str, f64)];
  /// The kind's result layout, named once: its groups of fields, each a name and its fields
  /// in order (snake_case, as the Lua headers' `Returns` write them where the script answers
  /// the same layout). A call's result is made of these groups as the kind's file says (a group
  /// may repeat: per window, member, dimension or tenant). Exported to JS by the bindings'
  /// `kinds()`, where the names are resolved to offsets once, at load.
  const RESULTS: &'static [(&'static str, &'static [&'static str])];

  /// Decodes and validates a call: `text` = strings in the encoding of [`crate::codec`],
  /// `nums` = numbers, both in the kind's layout (see its file). Nothing invalid gets past.
  fn decode(text: &str, nums: &[f64]) -> Result<Self::Call>;

  /// Runs a call on the memory store at `now_us`, atomically.
  fn memory(store: &MemoryStore, call: &Self::Call, now_us: f64) -> Result<Reply>;

  /// Runs a call on Redis, its script calls on `lane`; `now_us` = `None` for Redis' clock.
  fn redis<'a>(
    store: &'a RedisStore,
    call: &'a Self::Call,
    now_us: Option<f64>,
    lane: &'a Lane,
  ) -> impl Future<Output = Result<Reply>> + Send + 'a;

  /// The memory store's synchronous fast path for one call on an interned key, through the
  /// store's `io` buffer (in: the kind's numbers; out: its result, from `io[0]`). Kinds
  /// without one refuse.
  fn memory_io(store: &MemoryStore, id: usize, io: &mut [f64]) -> Result<()> {
    let _ = (store, id, io);
    Err(Error::argument("this kind has no io-buffer step"))
  }
}

/// A kind with its registry line: code, name, and its variant of [`Held`]. Generated.
pub trait Registered: Kind {
  const CODE: u32;
  const NAME: &'static str;
  /// The kind's state, if `held` is this kind's.
  fn state(held: &mut Held) -> Option<&mut Self::State>;
  /// `state` as a [`Held`].
  fn hold(state: Self::State) -> Held;
}

/// Something generic over a kind, run by [`visit`] for the kind of a code.
pub trait Visit {
  type Out;
  fn visit<K: Registered>(self) -> Self::Out;
}

/// One kind's entry in the table exported to JS.
#[derive(Clone, Debug, PartialEq)]
pub struct KindInfo {
  pub code: u32,
  pub name: &'static str,
  pub ops: &'static [(&'static str, f64)],
  pub results: &'static [(&'static str, &'static [&'static str])],
}

/// A call's marker in its result: its key holds a value of another type (another writer uses
/// the key prefix), and nothing of the call was applied. Each kind's file says which field
/// carries it (a field that is never negative otherwise).
pub const WRONG_TYPE: f64 = -2.0;

/// Decodes a batch of calls of varying width from `text` (strings in the encoding of
/// [`crate::codec`]) and `nums`: `one` decodes the call at the start of the numbers left,
/// taking its strings from the parts (see [`next_part`]), and answers it with how many
/// numbers it took. Every number and every string must be taken, and there must be a call;
/// `what` names the kind in the errors.
pub fn decode_calls<'t, C>(
  text: &'t str,
  nums: &[f64],
  what: &str,
  mut one: impl FnMut(&mut crate::codec::Parts<'t>, &[f64]) -> Result<(C, usize)>,
) -> Result<Vec<C>> {
  let mut parts = crate::codec::parts(text);
  let (mut calls, mut at) = (vec![], 0);
  while at < nums.len() {
    let (call, used) = one(&mut parts, &nums[at..])?;
    calls.push(call);
    at += used.max(1);
  }
  if parts.next().is_some() || calls.is_empty() {
    return Err(Error::argument(format!("malformed {what} batch: keys and calls do not match")));
  }
  Ok(calls)
}

/// The next string of a call in a batch of `what`'s, or an argument error.
pub fn next_part<'t>(parts: &mut crate::codec::Parts<'t>, what: &str) -> Result<&'t str> {
  parts.next().ok_or_else(|| Error::argument(format!("malformed {what} batch: missing key")))?
}

/// A time from JS, µs: negative for the store's clock (`None`), else whole µs.
pub fn explicit_now(now_us: f64) -> Result<Option<f64>> {
  if now_us < 0.0 {
    return Ok(None);
  }
  if now_us.is_finite() && now_us.fract() == 0.0 && now_us < 9e15 {
    Ok(Some(now_us))
  } else {
    Err(Error::argument(format!("clock time must be whole microseconds, got {now_us}")))
  }
}

/// The memory store's clock for a time from JS: the time given, or the system clock.
pub fn memory_now(now_us: f64) -> Result<f64> {
  Ok(explicit_now(now_us)?.unwrap_or_else(system_now_us))
}

macro_rules! registry {
  ($($code:literal $module:ident::$kind:ident,)*) => {
    $(pub mod $module;)*

    /// What a key of the memory store holds: nothing yet, or one kind's state.
    #[derive(Default)]
    pub enum Held {
      #[default]
      Empty,
      $($kind(<$module::$kind as Kind>::State),)*
    }

    $(impl Registered for $module::$kind {
      const CODE: u32 = $code;
      const NAME: &'static str = stringify!($module);
      fn state(held: &mut Held) -> Option<&mut Self::State> {
        match held {
          Held::$kind(state) => Some(state),
          _ => None,
        }
      }
      fn hold(state: Self::State) -> Held {
        Held::$kind(state)
      }
    })*

    /// Runs `v` for the kind numbered `code`.
    pub fn visit<V: Visit>(code: u32, v: V) -> Result<V::Out> {
      match code {
        $($code => Ok(v.visit::<$module::$kind>()),)*
        _ => Err(Error::argument(format!("unknown kind {code}"))),
      }
    }

    /// Every kind: code, name, operation codes and result layout.
    pub fn table() -> Vec<KindInfo> {
      vec![$(KindInfo { code: $code, name: stringify!($module), ops: <$module::$kind as Kind>::OPS, results: <$module::$kind as Kind>::RESULTS },)*]
    }
  };
}

// The registry: one line per kind, `<code> <module>::<type>`: the kind's file (or directory)
// `<module>`, its name, and the type implementing `Kind` there. Codes are never reused.
registry! {
  0 pacer::Pacer,
  1 limit::Limit,
  2 sliding::Sliding,
  3 quota::Quota,
  4 fair::Fair,
  5 concurrent::Concurrent,
  6 sliding_counter::SlidingCounter,
  7 adaptive::Adaptive,
  8 budget::Budget,
}

#[cfg(test)]
mod headers;

#[cfg(test)]
mod tests {
  use super::*;

  #[test]
  fn codes_and_names_are_distinct() {
    let t = table();
    for (i, a) in t.iter().enumerate() {
      for b in &t[i + 1..] {
        assert!(a.code != b.code && a.name != b.name, "{a:?} {b:?}");
      }
      for (j, (name, _)) in a.ops.iter().enumerate() {
        assert!(a.ops[j + 1..].iter().all(|(other, _)| other != name), "{} repeats op {name}", a.name);
      }
      assert!(!a.results.is_empty(), "{} names no result fields", a.name);
      for (j, (group, fields)) in a.results.iter().enumerate() {
        assert!(a.results[j + 1..].iter().all(|(other, _)| other != group), "{} repeats group {group}", a.name);
        assert!(!fields.is_empty(), "{}: group {group} is empty", a.name);
        for (k, f) in fields.iter().enumerate() {
          // `size` is what JS names a group's width
          assert!(*f != "size" && !fields[k + 1..].contains(f), "{}: group {group} field {f}", a.name);
          assert!(f.chars().all(|c| c.is_ascii_lowercase() || c == '_'), "{}: {f} is not snake_case", a.name);
        }
      }
    }
    struct Name;
    impl Visit for Name {
      type Out = &'static str;
      fn visit<K: Registered>(self) -> &'static str {
        K::NAME
      }
    }
    assert_eq!(visit(4, Name).unwrap(), "fair");
    assert!(visit(99, Name).is_err());
  }
}
