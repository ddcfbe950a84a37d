//! What the conformance tests share: the servers' addresses and a reproducible generator.
#![allow(dead_code)]

pub fn env(name: &str) -> String {
  std::env::var(name).unwrap_or_else(|_| panic!("{name} is not set: run the suite with `npm test`"))
}

/// xorshift64*: deterministic sequences, reproducible from the seed in a failure message.
pub struct Rng(pub u64);

impl Rng {
  pub fn next(&mut self) -> u64 {
    self.0 ^= self.0 >> 12;
    self.0 ^= self.0 << 25;
    self.0 ^= self.0 >> 27;
    self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
  }
  pub fn below(&mut self, n: u64) -> u64 {
    self.next() % n
  }
  pub fn pick(&mut self, options: &[f64]) -> f64 {
    options[self.below(options.len() as u64) as usize]
  }
}

/// A direct-lane driver for the tests: a plain blocking socket to a standalone Redis that
/// runs store calls the way `lib/store/direct.js` does (write the task's commands, read their
/// replies, feed them back), so the conformance suites check both lanes.
pub struct Wire(std::net::TcpStream);

impl Wire {
  pub fn connect(url: &str) -> Wire {
    let addr = url.trim_start_matches("redis://").trim_end_matches('/');
    let stream = std::net::TcpStream::connect(addr).expect("connect the direct lane");
    stream.set_nodelay(true).expect("nodelay");
    Wire(stream)
  }

  pub fn run<'a, T, F>(&mut self, call: impl FnOnce(sluice::store::redis::Lane) -> F) -> sluice::error::Result<T>
  where
    F: std::future::Future<Output = sluice::error::Result<T>> + Send + 'a,
  {
    use sluice::store::redis::{reply_end, DirectTask, Step};
    use std::io::{Read, Write};
    let mut task = DirectTask::new(call);
    let mut replies: Option<Vec<u8>> = None;
    loop {
      match task.step(replies.as_deref()) {
        Step::Done(out) => return out,
        Step::Send(out, count) => {
          self.0.write_all(&out).expect("write");
          let mut buf = vec![];
          let mut chunk = [0u8; 65536];
          while reply_end(&buf, 0, count) != Some(buf.len()) {
            let n = self.0.read(&mut chunk).expect("read");
            assert!(n > 0, "Redis closed the direct lane");
            buf.extend_from_slice(&chunk[..n]);
          }
          replies = Some(buf);
        }
      }
    }
  }
}

/// Runs a store call on the direct lane on odd steps when there is one (a standalone
/// server), else on pool lane `step`.
pub async fn on_lane<'a, T, F>(
  wire: &mut Option<Wire>,
  step: usize,
  call: impl FnOnce(sluice::store::redis::Lane) -> F,
) -> sluice::error::Result<T>
where
  F: std::future::Future<Output = sluice::error::Result<T>> + Send + 'a,
{
  match wire {
    Some(wire) if step % 2 == 1 => wire.run(call),
    _ => call(sluice::store::redis::Lane::Pool(step as u32)).await,
  }
}
