//! Send order: calls made on the JS thread reach Redis in the order they were made, whatever
//! order their tasks are first polled in.

use std::sync::atomic::{AtomicU64, Ordering};

/// Keeps calls in the order they were made: each native call takes a ticket on the JS thread,
/// and its task sends its commands (the first poll of the store future, which queues them on
/// the connection) only on its turn. Tasks spawned in call order are not always first polled
/// in that order; without this, two batches of one tick could reach Redis swapped.
#[derive(Default)]
pub struct SendOrder {
  next_ticket: AtomicU64,
  turn: AtomicU64,
  notify: tokio::sync::Notify,
}

/// Ends a turn, also when the future panicked or was dropped before its first poll.
struct Turn<'a>(&'a SendOrder);

impl Drop for Turn<'_> {
  fn drop(&mut self) {
    self.0.turn.fetch_add(1, Ordering::SeqCst);
    self.0.notify.notify_waiters();
  }
}

impl SendOrder {
  /// The next ticket; take it synchronously, in call order.
  pub fn ticket(&self) -> u64 {
    self.next_ticket.fetch_add(1, Ordering::SeqCst)
  }

  /// Runs `fut` once every earlier ticket has sent its commands.
  pub async fn run<F: std::future::Future>(&self, ticket: u64, fut: F) -> F::Output {
    loop {
      let notified = self.notify.notified();
      tokio::pin!(notified);
      notified.as_mut().enable();
      if self.turn.load(Ordering::SeqCst) == ticket {
        break;
      }
      notified.await;
    }
    let turn = Turn(self);
    let mut fut = std::pin::pin!(fut);
    let first = futures::poll!(fut.as_mut());
    drop(turn);
    match first {
      std::task::Poll::Ready(out) => out,
      std::task::Poll::Pending => fut.await,
    }
  }
}
