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

/// An error with its kind and a human-readable message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error {
  pub kind: ErrorKind,
  pub message: String,
}

impl Error {
  pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
    Error { kind, message: message.into() }
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
