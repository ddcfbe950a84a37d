//! The direct lane: a store call driven on the JS thread, its script calls written to and
//! read from a socket the JS layer owns (`lib/store/direct.js`), so a decision costs no thread
//! hand-off (JS -> tokio -> JS woke two threads per call; a socket read on the JS thread
//! wakes one, as for any JS Redis client).
//!
//! The kinds' store calls are the same on both lanes: they call `RedisStore::run` with a
//! [`Lane`].
//! On [`Lane::Direct`], `run` encodes its command into the [`Exchange`] and waits for the
//! reply; a [`DirectTask`] polls the whole call by hand (no runtime, no waker), hands the
//! encoded commands to JS, and is polled again with the replies JS framed. Used on a
//! standalone server only: a cluster needs the pool's slot routing.

use super::script::Script;
use crate::error::{Error, ErrorKind, Result};
use crate::store::kinds::Reply;
use fred::bytes::Bytes;
use fred::bytes_utils::Str;
use fred::prelude::{Key, Value};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

/// Where a store call sends its script calls.
pub enum Lane {
  /// A connection of the fred pool (`lane % pool size`), on the tokio runtime.
  Pool(u32),
  /// The JS thread's socket, through this exchange.
  Direct(Arc<Exchange>),
}

/// Commands written by a call and the replies fed back, in order.
#[derive(Default)]
pub struct Exchange {
  state: parking_lot::Mutex<ExchangeState>,
}

#[derive(Default)]
struct ExchangeState {
  /// Commands encoded and not yet handed to JS.
  out: Vec<u8>,
  /// How many commands `out` holds.
  out_count: usize,
  /// Commands issued so far (the next command's number).
  issued: usize,
  /// Replies by command number; taken by the waiting future.
  replies: Vec<Option<Result<Value>>>,
  /// Commands handed to JS and not answered yet, oldest first.
  awaiting: std::collections::VecDeque<usize>,
}

impl Exchange {
  /// Sends one script call (EVALSHA, or EVAL after NOSCRIPT) and waits for its reply.
  pub async fn script(&self, script: &Script, legacy: bool, keys: &[Key], args: &[Value], full: bool) -> Result<Value> {
    let n = {
      let mut s = self.state.lock();
      let n = s.issued;
      s.issued += 1;
      s.replies.push(None);
      let command = if full { "EVAL" } else { "EVALSHA" };
      let (sha, lua) = script.pick(legacy);
      let body: &[u8] = if full { lua.as_bytes() } else { sha.as_bytes() };
      encode_command(&mut s.out, command, body, keys, args)?;
      s.out_count += 1;
      n
    };
    Awaited { exchange: self, n }.await
  }
}

struct Awaited<'a> {
  exchange: &'a Exchange,
  n: usize,
}

impl Future for Awaited<'_> {
  type Output = Result<Value>;

  fn poll(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Result<Value>> {
    match self.exchange.state.lock().replies[self.n].take() {
      Some(reply) => Poll::Ready(reply),
      None => Poll::Pending,
    }
  }
}

/// `*<n>\r\n` then each argument as a bulk string.
fn encode_command(out: &mut Vec<u8>, command: &str, body: &[u8], keys: &[Key], args: &[Value]) -> Result<()> {
  fn bulk(out: &mut Vec<u8>, bytes: &[u8]) {
    out.push(b'$');
    out.extend_from_slice(itoa(bytes.len() as i64).as_bytes());
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(bytes);
    out.extend_from_slice(b"\r\n");
  }
  out.push(b'*');
  out.extend_from_slice(itoa((3 + keys.len() + args.len()) as i64).as_bytes());
  out.extend_from_slice(b"\r\n");
  bulk(out, command.as_bytes());
  bulk(out, body);
  bulk(out, itoa(keys.len() as i64).as_bytes());
  for key in keys {
    bulk(out, key.as_bytes());
  }
  for arg in args {
    match arg {
      Value::Integer(i) => bulk(out, itoa(*i).as_bytes()),
      Value::String(s) => bulk(out, s.as_bytes()),
      Value::Bytes(b) => bulk(out, b),
      _ => return Err(Error::new(ErrorKind::Internal, "unsupported script argument")),
    }
  }
  Ok(())
}

fn itoa(i: i64) -> String {
  i.to_string()
}

/// Nesting allowed in a reply: our scripts return flat arrays, so anything deeper is
/// malformed (and a reply nested without bound must never exhaust the stack).
const MAX_DEPTH: usize = 4;

/// Parses one RESP2 reply at `at`; returns it (an error reply as `Err`) and the offset after it.
fn parse(buf: &[u8], at: usize, depth: usize) -> std::result::Result<(Result<Value>, usize), Error> {
  let malformed = || Error::new(ErrorKind::StoreUnavailable, "malformed reply from Redis (protocol error)");
  let eol = buf[at..].windows(2).position(|w| w == b"\r\n").map(|p| at + p).ok_or_else(malformed)?;
  let line = buf.get(at + 1..eol).ok_or_else(malformed)?;
  let number = || std::str::from_utf8(line).ok().and_then(|s| s.parse::<i64>().ok()).ok_or_else(malformed);
  let next = eol + 2;
  match buf.get(at) {
    Some(b'+') => Ok((Ok(string(Bytes::copy_from_slice(line))), next)),
    Some(b'-') => Ok((Err(reply_error(&String::from_utf8_lossy(line))), next)),
    Some(b':') => Ok((Ok(Value::Integer(number()?)), next)),
    Some(b'$') => {
      let len = number()?;
      if len < 0 {
        return Ok((Ok(Value::Null), next));
      }
      let end = next.checked_add(len as usize).filter(|e| e + 2 <= buf.len()).ok_or_else(malformed)?;
      Ok((Ok(string(Bytes::copy_from_slice(&buf[next..end]))), end + 2))
    }
    Some(b'*') => {
      let len = number()?;
      if len < 0 {
        return Ok((Ok(Value::Null), next));
      }
      if depth >= MAX_DEPTH || len as usize > buf.len() {
        return Err(malformed());
      }
      let mut items = Vec::with_capacity(len as usize);
      let mut at = next;
      let mut failed = None;
      for _ in 0..len {
        let (item, after) = parse(buf, at, depth + 1)?;
        at = after;
        match item {
          Ok(v) => items.push(v),
          Err(e) => failed = failed.or(Some(e)),
        }
      }
      Ok((failed.map_or(Ok(Value::Array(items)), Err), at))
    }
    _ => Err(malformed()),
  }
}

fn string(bytes: Bytes) -> Value {
  match Str::from_inner(bytes) {
    Ok(s) => Value::String(s),
    Err(e) => Value::Bytes(e.into_inner()),
  }
}

/// An error reply, sorted as the pool path sorts it (`connect::classify`).
pub fn reply_error(details: &str) -> Error {
  super::connect::classify(None, details)
}

type Call<'a, T> = Pin<Box<dyn Future<Output = Result<T>> + Send + 'a>>;

/// One store call on the direct lane, polled by hand.
pub struct DirectTask<'a, T = Reply> {
  exchange: Arc<Exchange>,
  call: Option<Call<'a, T>>,
}

/// What the caller does next for a task.
pub enum Step<T = Reply> {
  /// Write these bytes (`count` commands), then feed back their `count` replies.
  Send(Vec<u8>, usize),
  Done(Result<T>),
}

impl<'a, T> DirectTask<'a, T> {
  /// `call` gets the lane its script calls must use.
  pub fn new<F>(call: impl FnOnce(Lane) -> F) -> DirectTask<'a, T>
  where
    F: Future<Output = Result<T>> + Send + 'a,
  {
    let exchange = Arc::new(Exchange::default());
    DirectTask { call: Some(Box::pin(call(Lane::Direct(exchange.clone())))), exchange }
  }

  /// Feeds the replies of the commands last handed out (`None` on the first step), then
  /// runs the call until it needs more replies or is done.
  pub fn step(&mut self, replies: Option<&[u8]>) -> Step<T> {
    if let Some(buf) = replies {
      if let Err(e) = self.feed(buf) {
        self.call = None;
        return Step::Done(Err(e));
      }
    }
    let Some(call) = self.call.as_mut() else {
      return Step::Done(Err(Error::new(ErrorKind::Internal, "direct call already finished")));
    };
    match call.as_mut().poll(&mut Context::from_waker(futures::task::noop_waker_ref())) {
      Poll::Ready(out) => {
        self.call = None;
        Step::Done(out)
      }
      Poll::Pending => {
        let mut s = self.exchange.state.lock();
        if s.out_count == 0 && s.awaiting.is_empty() {
          drop(s);
          self.call = None;
          return Step::Done(Err(Error::new(ErrorKind::Internal, "direct call stalled")));
        }
        let count = s.out_count;
        let (first, issued) = (s.issued - count, s.issued);
        s.awaiting.extend(first..issued);
        s.out_count = 0;
        Step::Send(std::mem::take(&mut s.out), count)
      }
    }
  }

  fn feed(&self, buf: &[u8]) -> Result<()> {
    let mut s = self.exchange.state.lock();
    let mut at = 0;
    while at < buf.len() {
      let n = s.awaiting.pop_front().ok_or_else(|| Error::new(ErrorKind::Script, "unexpected reply from Redis"))?;
      let (reply, after) = parse(buf, at, 0)?;
      s.replies[n] = Some(reply);
      at = after;
    }
    if !s.awaiting.is_empty() {
      return Err(Error::new(ErrorKind::Script, "missing reply from Redis"));
    }
    Ok(())
  }
}

/// The offset after `count` whole replies from `at`, or `None` when `buf` holds fewer (or a
/// malformed one). For drivers of [`DirectTask`] other than the JS layer (the Rust tests).
pub fn reply_end(buf: &[u8], mut at: usize, count: usize) -> Option<usize> {
  for _ in 0..count {
    at = parse(buf, at, 0).ok()?.1;
  }
  Some(at)
}

#[cfg(test)]
mod tests {
  use super::*;

  #[test]
  fn parses_flat_arrays_errors_and_nulls() {
    let (v, end) = parse(b"*3\r\n:1\r\n$2\r\nab\r\n$-1\r\n", 0, 0).unwrap();
    assert_eq!(end, 21);
    let items = match v.unwrap() {
      Value::Array(items) => items,
      other => panic!("{other:?}"),
    };
    assert_eq!(items[0].as_i64(), Some(1));
    assert_eq!(items[1].as_string().as_deref(), Some("ab"));
    assert!(matches!(items[2], Value::Null));
    let (v, _) = parse(b"-NOSCRIPT No matching script\r\n", 0, 0).unwrap();
    assert_eq!(v.unwrap_err().kind, ErrorKind::Script);
    let (v, _) = parse(b"-BUSY Redis is busy\r\n", 0, 0).unwrap();
    assert_eq!(v.unwrap_err().kind, ErrorKind::StoreUnavailable);
  }

  #[test]
  fn refuses_deep_nesting_without_recursing_far() {
    let deep = "*1\r\n".repeat(2_000) + ":1\r\n";
    assert!(parse(deep.as_bytes(), 0, 0).is_err());
    assert!(parse(b"*2\r\n:1\r\n", 0, 0).is_err(), "truncated");
    assert!(parse(b"$5\r\nab\r\n", 0, 0).is_err(), "short bulk");
    assert!(parse(b"?\r\n", 0, 0).is_err());
  }

  #[test]
  fn encodes_evalsha_with_keys_and_args() {
    let mut out = vec![];
    let args = [Value::Integer(-3), Value::String("x".into())];
    encode_command(&mut out, "EVALSHA", b"abc", &[Key::from("k")], &args).unwrap();
    assert_eq!(out, b"*6\r\n$7\r\nEVALSHA\r\n$3\r\nabc\r\n$1\r\n1\r\n$1\r\nk\r\n$2\r\n-3\r\n$1\r\nx\r\n");
  }
}
