//! Concurrent limiter: a distributed semaphore of `limit` slots with leases, fencing tokens,
//! a first-come first-served wait queue and reclaim of crashed holders (Sidekiq Enterprise's
//! `concurrent`, without its polling or blocking connections).
//!
//! State of one limiter ([`Semaphore`]):
//! - holders: lease id, fencing token, when the lease expires (µs) and when it was taken;
//! - the wait queue, in arrival order: waiter id, its deadline, when it arrived, and the lock
//!   time it asked for;
//! - `seq`, the last fencing token handed out (tokens strictly increase per limiter, for as
//!   long as the limiter's keys live: `ttlMs` after the last operation), `qseq` the last queue
//!   position, and the statistics.
//!
//! Every operation first reclaims expired leases (a holder that crashed or overran loses its
//! slot once `lockTimeoutMs` has passed: counted as reclaimed and as an overage), then hands
//! free slots to the head of the queue (waiters past their deadline are dropped). Those
//! hand-overs are the [`Reply::grants`]: the store tells the waiting process (memory: in
//! process; Redis: a PUBLISH on the limiter's channel), so a release wakes the next waiter
//! at once, with no polling. A newcomer never overtakes a waiter: it gets a slot at once only
//! when nobody is queued.
//!
//! `limit`, `lock_us` and the wait are arguments of each call, not stored state (as in
//! Sidekiq: two instances may use different timeouts). Times are integer µs.
//! Mirrored by `lua/concurrent.lua`.

use std::collections::VecDeque;

#[derive(Clone, Debug, PartialEq)]
pub struct Holder {
  pub id: String,
  pub token: f64,
  pub expires_us: f64,
  pub acquired_us: f64,
  /// Handed over from the queue (the waiter learns its token from the grant and refers to
  /// the lease by id); otherwise taken at once (the caller refers to it by [`Holder::lease`]).
  pub granted: bool,
}

impl Holder {
  /// How a lease taken at once is named in release and extend: `<id>|<token>|<acquired_us>`
  /// (integers), which the caller builds from its acquire reply.
  pub fn lease(&self) -> String {
    format!("{}|{}|{}", self.id, self.token, self.acquired_us)
  }
}

#[derive(Clone, Debug, PartialEq)]
pub struct Waiter {
  pub id: String,
  pub deadline_us: f64,
  pub enqueued_us: f64,
  pub lock_us: f64,
}

/// Counters since the limiter's keys were created.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Stats {
  /// Leases handed out.
  pub held: f64,
  /// Total time leases were held (until release, or until expiry when reclaimed), µs.
  pub held_us: f64,
  /// Leases taken without waiting.
  pub immediate: f64,
  /// Leases taken after waiting in the queue.
  pub waited: f64,
  /// Total time those waited, µs.
  pub wait_us: f64,
  /// Leases held past their expiry (released late, or reclaimed).
  pub overages: f64,
  /// Expired leases taken back.
  pub reclaimed: f64,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct Semaphore {
  pub holders: Vec<Holder>,
  pub queue: VecDeque<Waiter>,
  pub seq: f64,
  pub stats: Stats,
}

/// One operation on a limiter, for lease or waiter `id`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Request {
  /// Take a slot now; or, if `wait_us > 0` and none is free (or others wait), join the queue
  /// until `now + wait_us`.
  Acquire { limit: f64, lock_us: f64, wait_us: f64 },
  /// Give the lease back (`id` = the lease's name, see [`Holder::lease`]).
  Release { limit: f64 },
  /// Push the lease's expiry to `now + lock_us`, if it has not expired (`id` as for release).
  Extend { lock_us: f64 },
  /// A waiter asks where it stands (after a missed wake-up, or when a lease may have expired).
  Poll { limit: f64 },
  /// A waiter gives up; if it was granted a slot in the meantime, it gets the token.
  Cancel { limit: f64 },
  /// Read the statistics (writes nothing).
  Stats,
}

/// Status codes of [`Reply::values`]`[0]` for acquire, poll and cancel.
pub const ACQUIRED: f64 = 1.0;
pub const QUEUED: f64 = 0.0;
pub const NOT_WAITING: f64 = -1.0;

/// The answer to one operation.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Reply {
  /// Acquire / poll / cancel: `[status, token (0 if none), earliest lease expiry µs (0 when
  /// acquired, or if none is held), now µs]` (the store's time, so a waiter can time its next
  /// poll). Release: `[1 if the lease was valid, 0, 0]`. Extend: `[1 if extended, 0, 0]`.
  /// Stats: held, held_us, immediate, waited, wait_us, overages, reclaimed, current holders,
  /// waiters.
  pub values: Vec<f64>,
  /// Slots handed to queued waiters by this operation: (waiter id, token).
  pub grants: Vec<(String, f64)>,
  /// Whether the state changed (the store then refreshes its TTL).
  pub changed: bool,
}

impl Semaphore {
  /// When the first lease expires (µs), 0 if none is held.
  fn earliest_expiry(&self) -> f64 {
    self.holders.iter().map(|h| h.expires_us).reduce(f64::min).unwrap_or(0.0)
  }

  /// The holder a caller names: a lease (`id|token|acquired_us`) for a lease taken at once,
  /// the id for one handed over from the queue.
  fn holder(&self, name: &str) -> Option<usize> {
    if name.contains('|') {
      self.holders.iter().position(|h| !h.granted && h.lease() == name)
    } else {
      self.holders.iter().position(|h| h.granted && h.id == name)
    }
  }

  fn take(&mut self, id: &str, lock_us: f64, now_us: f64, granted: bool) -> f64 {
    self.seq += 1.0;
    self.stats.held += 1.0;
    self.holders.push(Holder {
      id: id.to_owned(),
      token: self.seq,
      expires_us: now_us + lock_us,
      acquired_us: now_us,
      granted,
    });
    self.seq
  }

  /// Takes back expired leases; true if any.
  fn reclaim(&mut self, now_us: f64) -> bool {
    let before = self.holders.len();
    let stats = &mut self.stats;
    self.holders.retain(|h| {
      let live = h.expires_us > now_us;
      if !live {
        stats.reclaimed += 1.0;
        stats.overages += 1.0;
        stats.held_us += h.expires_us - h.acquired_us;
      }
      live
    });
    self.holders.len() != before
  }

  /// Hands free slots to the queue's head, dropping waiters past their deadline.
  fn grant(&mut self, limit: f64, now_us: f64, grants: &mut Vec<(String, f64)>) -> bool {
    let mut changed = false;
    while (self.holders.len() as f64) < limit {
      let Some(w) = self.queue.pop_front() else { break };
      changed = true;
      if w.deadline_us < now_us {
        continue;
      }
      let token = self.take(&w.id, w.lock_us, now_us, true);
      self.stats.waited += 1.0;
      self.stats.wait_us += now_us - w.enqueued_us;
      grants.push((w.id, token));
    }
    changed
  }

  fn status(&self, id: &str, now_us: f64) -> Vec<f64> {
    if let Some(i) = self.holder(id) {
      vec![ACQUIRED, self.holders[i].token, 0.0, now_us]
    } else if self.queue.iter().any(|w| w.id == id) {
      vec![QUEUED, 0.0, self.earliest_expiry(), now_us]
    } else {
      vec![NOT_WAITING, 0.0, self.earliest_expiry(), now_us]
    }
  }

  /// Applies one operation.
  pub fn apply(&mut self, id: &str, request: Request, now_us: f64) -> Reply {
    let mut grants = vec![];
    if let Request::Stats = request {
      let live = self.holders.iter().filter(|h| h.expires_us > now_us).count() as f64;
      let s = self.stats;
      let values = vec![
        s.held,
        s.held_us,
        s.immediate,
        s.waited,
        s.wait_us,
        s.overages,
        s.reclaimed,
        live,
        self.queue.len() as f64,
      ];
      return Reply { values, grants, changed: false };
    }
    let mut changed = self.reclaim(now_us);
    let values = match request {
      Request::Acquire { limit, lock_us, wait_us } => {
        changed |= self.grant(limit, now_us, &mut grants);
        if (self.holders.len() as f64) < limit && self.queue.is_empty() {
          let token = self.take(id, lock_us, now_us, false);
          self.stats.immediate += 1.0;
          changed = true;
          vec![ACQUIRED, token, 0.0, now_us]
        } else if wait_us > 0.0 {
          self.queue.push_back(Waiter {
            id: id.to_owned(),
            deadline_us: now_us + wait_us,
            enqueued_us: now_us,
            lock_us,
          });
          changed = true;
          vec![QUEUED, 0.0, self.earliest_expiry(), now_us]
        } else {
          vec![NOT_WAITING, 0.0, self.earliest_expiry(), now_us]
        }
      }
      Request::Release { limit } => {
        let valid = match self.holder(id) {
          Some(i) => {
            let h = self.holders.remove(i);
            self.stats.held_us += now_us - h.acquired_us;
            changed = true;
            // reclaim ran first, so a lease still here has not expired
            1.0
          }
          None => 0.0,
        };
        changed |= self.grant(limit, now_us, &mut grants);
        vec![valid, 0.0, 0.0]
      }
      Request::Extend { lock_us } => match self.holder(id) {
        Some(i) => {
          self.holders[i].expires_us = now_us + lock_us;
          changed = true;
          vec![1.0, 0.0, 0.0]
        }
        None => vec![0.0, 0.0, 0.0],
      },
      Request::Poll { limit } => {
        changed |= self.grant(limit, now_us, &mut grants);
        self.status(id, now_us)
      }
      Request::Cancel { limit } => {
        if let Some(i) = self.queue.iter().position(|w| w.id == id) {
          self.queue.remove(i);
          changed = true;
        }
        changed |= self.grant(limit, now_us, &mut grants);
        self.status(id, now_us)
      }
      Request::Stats => vec![],
    };
    Reply { values, grants, changed }
  }
}
