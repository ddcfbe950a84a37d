//! The one error type of the crate: a kind (mapped 1:1 onto the JS `code`) and a message.

use std::fmt;

/// Closed list of failure kinds. Each maps onto a stable JS error `code` (README, "Errors").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ErrorKind {
  /// Invalid options given to a constructor or factory: `ERR_INVALID_CONFIG`.
  InvalidConfig,
  /// Invalid per-call argument: `ERR_INVALID_ARGUMENT`.
  InvalidArgument,
  /// The store cannot be reached or answered with a connection failure: `ERR_STORE_UNAVAILABLE`.
  StoreUnavailable,
  /// The store did not answer within the deadline: `ERR_TIMEOUT`.
  Timeout,
  /// The store is out of memory and refuses writes (`maxmemory`, policy `noeviction`):
  /// `ERR_STORE_OOM`. Nothing was written; the decision was not made.
  StoreOom,
  /// A script failed inside Redis (wrong key type, bad reply): `ERR_SCRIPT`.
  Script,
  /// The store was closed: `ERR_CLOSED`.
  Closed,
  /// A bug: `ERR_INTERNAL`.
  Internal,
}

impl ErrorKind {
  /// The stable JS `code` of this kind.
  pub fn code(self) -> &'static str {
    match self {
      ErrorKind::InvalidConfig => "ERR_INVALID_CONFIG",
      ErrorKind::InvalidArgument => "ERR_INVALID_ARGUMENT",
      ErrorKind::StoreUnavailable => "ERR_STORE_UNAVAILABLE",
      ErrorKind::Timeout => "ERR_TIMEOUT",
      ErrorKind::StoreOom => "ERR_STORE_OOM",
      ErrorKind::Script => "ERR_SCRIPT",
      ErrorKind::Closed => "ERR_CLOSED",
      ErrorKind::Internal => "ERR_INTERNAL",
    }
  }
}

/// What a store failure was, sorted once, here (`crate::store::redis::connect::classify`), and
/// carried to JS as a field (`detail`), never read back from the message: the circuit breaker
/// decides by it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Detail {
  /// Not a store failure, or nothing more to say.
  #[default]
  None,
  /// One cluster node is unreachable (its connection reset or closed, its slots' owner not
  /// routable): only its calls fail, the other masters' go on.
  NodeDown,
  /// The cluster changes its topology under the call (redirected too often, a slot being
  /// migrated: `TRYAGAIN`): this call fails, the store is not down.
  TopologyChange,
  /// The store is unreachable or unusable as a whole (connection refused, loading, a
  /// timeout): the circuit opens.
  Outage,
}

impl Detail {
  /// Its name in JS (`SluiceError.detail`); empty for `None`.
  pub fn name(self) -> &'static str {
    match self {
      Detail::None => "",
      Detail::NodeDown => "node-down",
      Detail::TopologyChange => "topology-change",
      Detail::Outage => "outage",
    }
  }
}

/// An error with its kind, what it was (store failures) and a human-readable message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error {
  pub kind: ErrorKind,
  pub detail: Detail,
  pub message: String,
}

impl Error {
  /// An error of `kind`; a store failure (unavailable, timeout) is an outage unless sorted
  /// finer (see [`Error::store`]).
  pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
    let detail = match kind {
      ErrorKind::StoreUnavailable | ErrorKind::Timeout => Detail::Outage,
      _ => Detail::None,
    };
    Error { kind, detail, message: message.into() }
  }
  /// A store failure of `kind` sorted as `detail`.
  pub fn store(kind: ErrorKind, detail: Detail, message: impl Into<String>) -> Self {
    Error { kind, detail, message: message.into() }
  }
  pub fn config(message: impl Into<String>) -> Self {
    Error::new(ErrorKind::InvalidConfig, message)
  }
  pub fn argument(message: impl Into<String>) -> Self {
    Error::new(ErrorKind::InvalidArgument, message)
  }
}

impl fmt::Display for Error {
  fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    write!(f, "{}: {}", self.kind.code(), self.message)
  }
}

impl std::error::Error for Error {}

pub type Result<T> = std::result::Result<T, Error>;
