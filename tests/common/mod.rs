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
