//! sluice: distributed rate limiting and pacing for Node.js, with a Rust core.
//!
//! Layers, one way: `bindings` (napi, behind the default `napi` feature) -> `store` (memory or
//! Redis) -> `core` (pure step functions). See ARCHITECTURE.md at the repository's root.
#![deny(clippy::all)]

pub mod codec;
pub mod core;
pub mod error;
pub mod store;

#[cfg(feature = "napi")]
mod bindings;

pub use error::{Error, ErrorKind, Result};
