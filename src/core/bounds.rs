//! The bounds every value from outside is checked against, defined once (the bindings export
//! them to JS, `lib/store/bounds.js`, so that JS refuses the same values before anything
//! reaches a store).

/// Largest limit, weight, count or rate (qps): counters stay exact integers in a double, and
/// µs arithmetic on a weight stays exact.
pub const MAX_LIMIT: f64 = 1e9;
/// Longest interval, window, block, wait or TTL, µs (10 years).
pub const MAX_INTERVAL_US: f64 = 315_360_000_000_000.0;
/// The same, ms.
pub const MAX_INTERVAL_MS: f64 = MAX_INTERVAL_US / 1000.0;
/// The same, seconds.
pub const MAX_INTERVAL_S: f64 = MAX_INTERVAL_US / 1_000_000.0;
/// Most windows one limiter (or one door's key) counts at once.
pub const MAX_WINDOWS: usize = 16;

#[cfg(test)]
mod tests {
  use super::*;

  #[test]
  fn ten_years_in_every_unit() {
    assert_eq!(MAX_INTERVAL_S, 10.0 * 365.0 * 86_400.0);
    assert_eq!(MAX_INTERVAL_MS, 315_360_000_000.0);
  }
}
