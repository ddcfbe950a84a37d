//! Grant wake-ups of concurrent limiters: the store's subscriber connection (made on first
//! use), the channels it listens to, and the queue of messages handed to JS.

use super::connect::store_error;
use super::RedisStore;
use crate::error::{Error, ErrorKind, Result};
use fred::clients::SubscriberClient;
use fred::prelude::*;
use std::sync::atomic::Ordering;

/// Grant messages received and not yet handed to JS.
#[derive(Default)]
pub(super) struct Wakes {
  queue: parking_lot::Mutex<Vec<String>>,
  notify: tokio::sync::Notify,
}

/// Messages held for JS at most: past it, the queue is one [`WAKE_RESYNC`] (every waiter
/// re-polls, the rules re-read their version): a JS thread that stopped draining cannot grow it.
const MAX_QUEUED: usize = 10_000;

impl Wakes {
  pub(super) fn push(&self, message: String) {
    {
      let mut queue = self.queue.lock();
      if queue.len() >= MAX_QUEUED {
        queue.clear();
        queue.push(WAKE_RESYNC.into());
      }
      queue.push(message);
    }
    self.notify.notify_one();
  }
}

/// The message that tells JS to re-poll every waiter: the subscriber reconnected or fell
/// behind, so a grant may have been missed.
pub const WAKE_RESYNC: &str = "*";

impl RedisStore {
  /// Connects the subscriber on first use: it resubscribes by itself after a reconnect, and
  /// every reconnect or overflow queues [`WAKE_RESYNC`].
  async fn subscriber(&self) -> Result<&SubscriberClient> {
    if self.closed.load(Ordering::Relaxed) {
      return Err(Error::new(ErrorKind::Closed, "the store is closed"));
    }
    self
      .subscribed
      .get_or_try_init(|| async {
        match tokio::time::timeout(self.connect_timeout, self.subscriber.init()).await {
          Ok(Ok(_)) => {}
          Ok(Err(e)) => return Err(store_error(e)),
          Err(_) => return Err(Error::new(ErrorKind::Timeout, "cannot connect the subscriber in time")),
        }
        self.subscriber.manage_subscriptions();
        let (mut messages, mut reconnects) = (self.subscriber.message_rx(), self.subscriber.reconnect_rx());
        let wakes = self.wakes.clone();
        tokio::spawn(async move {
          use tokio::sync::broadcast::error::RecvError;
          loop {
            tokio::select! {
              m = messages.recv() => match m {
                Ok(m) => {
                  if let Some(text) = m.value.as_string() {
                    wakes.push(text)
                  }
                }
                Err(RecvError::Lagged(_)) => wakes.push(WAKE_RESYNC.into()),
                Err(RecvError::Closed) => break,
              },
              r = reconnects.recv() => match r {
                Ok(_) | Err(RecvError::Lagged(_)) => wakes.push(WAKE_RESYNC.into()),
                Err(RecvError::Closed) => break,
              },
            }
          }
        });
        Ok(())
      })
      .await?;
    Ok(&self.subscriber)
  }

  /// Subscribes to a grant channel; resolves once Redis has confirmed.
  pub async fn subscribe(&self, channel: &str) -> Result<()> {
    let subscriber = self.subscriber().await?;
    let confirmed = tokio::time::timeout(self.command_timeout, subscriber.subscribe(channel)).await;
    confirmed.map_err(|_| Error::new(ErrorKind::Timeout, "SUBSCRIBE not confirmed in time"))?.map_err(store_error)
  }

  pub async fn unsubscribe(&self, channel: &str) -> Result<()> {
    let subscriber = self.subscriber().await?;
    let confirmed = tokio::time::timeout(self.command_timeout, subscriber.unsubscribe(channel)).await;
    confirmed.map_err(|_| Error::new(ErrorKind::Timeout, "UNSUBSCRIBE not confirmed in time"))?.map_err(store_error)
  }

  /// The grant messages received since the last call, waiting for at least one. An empty
  /// list means "stop listening" ([`stop_wakes`](Self::stop_wakes) or close).
  pub async fn next_wakes(&self) -> Vec<String> {
    loop {
      let notified = self.wakes.notify.notified();
      {
        let mut queue = self.wakes.queue.lock();
        if !queue.is_empty() {
          let mut out = std::mem::take(&mut *queue);
          out.retain(|m| !m.is_empty());
          return out;
        }
      }
      notified.await;
    }
  }

  /// The messages received since the last call, at once (none: empty), without waiting: what
  /// JS drains on a timer that keeps no process alive (the store's rules), while
  /// [`next_wakes`](Self::next_wakes) waits only while a waiter does.
  pub fn take_wakes(&self) -> Vec<String> {
    let mut out = std::mem::take(&mut *self.wakes.queue.lock());
    out.retain(|m| !m.is_empty());
    out
  }

  /// Ends the pending [`next_wakes`](Self::next_wakes) call with an empty list.
  pub fn stop_wakes(&self) {
    self.wakes.push(String::new());
  }
}
