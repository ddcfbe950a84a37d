//! The adaptive rate's cycles (see the module docs of `super`): what a throttled answer with no
//! stated limit reads from the cycle it ends, the fit of two cycles (a token bucket serves
//! `b + r f` in a cycle of `f` seconds of calls, a fixed window about the same whatever `f`),
//! and the queue's rate history (the rate the refused call's slot was handed out at). The rule
//! is bench/adaptive-model.js's `State` with the switches BENCHMARKS.md (issue 36 item 4) names;
//! `lua/adaptive.lua` mirrors it step for step.

use super::{Params, State, BLIND, PLATEAU_US, SECOND_US};

/// Cycles kept for the fit.
pub const CYCLES: usize = 4;
/// Entries of the queue's rate history.
pub const SENDQ: usize = 16;
/// The history takes at most one entry per this span (the last one's rate is updated meanwhile), µs.
pub const SENDQ_DT_US: f64 = 100_000.0;
/// How long the history reaches back, µs (older entries go, but the two latest stay).
pub const SENDQ_KEEP_US: f64 = 3.0 * SECOND_US;
/// Doubles in a record: the 17 scalars, the cycles with their count and the history with its.
pub const RECORD: usize = 17 + 2 * CYCLES + 1 + 2 * SENDQ + 1;
/// Two cycles fit when their lengths differ by this share of the longer one...
const FIT_GAP: f64 = 0.25;
/// ... or by this many calls' worth at the pair's mean rate.
const FIT_GAP_CALLS: f64 = 50.0;
/// A fitted rate under this share of the pair's mean rate reads as a fixed window.
const FIT_WINDOW: f64 = 0.2;
/// A cycle whose rate climbed by this factor over its start's (a second of calls or more) was
/// refused just past the limit: the rate the refused call's slot was handed out at bounds it.
const CLIMBED: f64 = 1.1;
/// ... taken at most this many times what was served over the last second.
const HI_SERVED: f64 = 1.2;

/// What two cycles say of the upstream.
enum Fit {
  /// Nothing: no pair apart enough, or a burst below zero.
  None,
  /// A fixed window: what a cycle serves does not grow with its length.
  Window,
  /// A bucket with this burst (at least 0).
  Bucket(f64),
}

impl State {
  /// The rate the slot that starts at `t_us` was handed out at.
  pub(super) fn send_rate(&self, t_us: f64) -> f64 {
    let n = self.sendq_n as usize;
    for i in (0..n).rev() {
      if self.sendq[2 * i] <= t_us {
        return self.sendq[2 * i + 1];
      }
    }
    self.sendq[1]
  }

  /// Records that slots from `t_us` on are spaced at the rate now (after a pace).
  pub(super) fn hand_out(&mut self, t_us: f64, now_us: f64) {
    let mut n = self.sendq_n as usize;
    if n == 0 {
      // (a record made by hand: every record starts with its first entry)
      (self.sendq[0], self.sendq[1], self.sendq_n) = (t_us, self.rate, 1.0);
      return;
    }
    let (last_t, last_r) = (self.sendq[2 * n - 2], self.sendq[2 * n - 1]);
    if last_r != self.rate {
      if n > 1 && t_us - last_t < SENDQ_DT_US {
        self.sendq[2 * n - 1] = self.rate;
      } else {
        if n == SENDQ {
          // full: the oldest goes (the times only grow, so this is the same as after the push)
          self.sendq.copy_within(2.., 0);
          n -= 1;
        }
        self.sendq[2 * n] = t_us.max(last_t);
        self.sendq[2 * n + 1] = self.rate;
        n += 1;
      }
    }
    while n > 2 && self.sendq[2] < now_us - SENDQ_KEEP_US {
      self.sendq.copy_within(2.., 0);
      n -= 1;
    }
    self.sendq_n = n as f64;
  }

  /// Keeps a cycle of `s` successes over `f_us` of calls (the last `CYCLES`).
  fn push_cycle(&mut self, s: f64, f_us: f64) {
    let mut n = self.cyc_n as usize;
    if n == CYCLES {
      self.cyc.copy_within(2.., 0);
      n -= 1;
    }
    self.cyc[2 * n] = s;
    self.cyc[2 * n + 1] = f_us;
    self.cyc_n = (n + 1) as f64;
  }

  /// The latest kept cycle whose length is apart enough from `f_us` with this one (`s`).
  fn fit(&self, s: f64, f_us: f64) -> Fit {
    let n = self.cyc_n as usize;
    for i in (0..n).rev() {
      let (cs, cf) = (self.cyc[2 * i], self.cyc[2 * i + 1]);
      let mean = (s + cs) / (f_us + cf) * SECOND_US;
      let apart = (f_us - cf).abs() >= FIT_GAP * f_us.max(cf);
      if !apart && (f_us - cf).abs() / SECOND_US * mean < FIT_GAP_CALLS {
        continue;
      }
      let r = (s - cs) / (f_us - cf) * SECOND_US;
      if r < FIT_WINDOW * mean {
        return Fit::Window;
      }
      let b = s - r * f_us / SECOND_US;
      if b < -0.1 * s {
        return Fit::None;
      }
      return Fit::Bucket(b.max(0.0));
    }
    Fit::None
  }

  /// A throttled answer outside a back-off period with no stated limit: the cycle it ends
  /// (successes `cok` of calls sent since `cs_us`, the refused call sent `t_ago_us` ago, -1:
  /// now) sets the rate (see the module docs of `super`); `served`: the last second's count.
  /// The next cycle starts now. Answers the plateau, µs.
  pub(super) fn end_cycle(&mut self, p: &Params, served: f64, t_ago_us: f64, now_us: f64) -> f64 {
    let send_t = if t_ago_us >= 0.0 { now_us - t_ago_us } else { now_us };
    let s = self.cok;
    let mut plateau = 0.0;
    if self.be < 0.0 {
      // a fresh record's first refusal: what was served before it is the burst, about; cut to
      // the geometric middle (at least by half, at most by BLIND), and climb fast from there
      self.be = s;
      self.push_cycle(s, (send_t - self.cs_us).max(0.0));
      self.mark = 0.0;
      self.rate = (served * self.rate).sqrt().max(self.rate / BLIND).min(self.rate * 0.5);
    } else {
      let block_t = (self.hold_until_us - self.cs_us).max(0.0);
      let f = send_t - self.hold_until_us.max(self.cs_us);
      // what the cycle served over its whole length (the block as nothing served)
      let lower = s / (block_t + f.max(0.0)).max(1.0) * SECOND_US;
      // over its calls, less the burst
      let mut corrected = if f > 0.0 { (s - self.be) / f * SECOND_US } else { 0.0 };
      let mut window = false;
      if f > 0.0 {
        match self.fit(s, f) {
          Fit::Window => {
            self.bucket_fit = 0.0;
            window = true;
            corrected = 0.0;
          }
          Fit::Bucket(b) => {
            // the fit only lowers the burst (a cycle that climbed from below the limit served
            // less than b + r f: its fitted r reads low)
            self.bucket_fit = 1.0;
            self.be = self.be.min(b);
            corrected = (s - self.be) / f * SECOND_US;
          }
          Fit::None => {}
        }
        self.push_cycle(s, f);
      }
      // the refused call bounds a bucket's rate within [(S - b) / f, (S + 1 - b) / f]
      if f > 0.0 && !window && corrected > 0.0 {
        corrected += 1.0 / f * SECOND_US;
      }
      let short = f < (0.2 * SECOND_US).max(4.0 * SECOND_US / self.rate);
      // the last second's count; a bucket serves its burst on top of a second's rate
      let mut last = served;
      if !window && self.bucket_fit == 1.0 {
        last = (last - self.be).max(0.0);
      }
      // refused after a climb: just past the limit, the rate the refused call's slot had
      let climbed = f >= SECOND_US && self.rate >= CLIMBED * self.r0;
      let hi = if climbed && !window { self.send_rate(send_t).min(HI_SERVED * served) } else { 0.0 };
      let estimate = if short { self.rate } else { lower.max(corrected).max(last).max(hi) };
      self.mark = self.rate.min(estimate);
      self.rate = self.mark * (1.0 - p.decrease);
      plateau = PLATEAU_US;
      if short && served * BLIND < self.mark {
        // too short to measure, and under 1 / BLIND of the rate served over the last second
        // (a burst, the rest refused: far over the limit): the geometric middle, as a fresh
        // record's first refusal (a start 100 x over the limit would come down by `decrease`
        // a block)
        self.mark = 0.0;
        self.rate = (served * estimate).sqrt().max(estimate / BLIND).min(estimate * 0.5);
        plateau = 0.0;
      }
    }
    self.cs_us = now_us;
    self.cok = 0.0;
    self.r0 = self.rate;
    plateau
  }
}
