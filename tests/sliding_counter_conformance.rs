//! Conformance of the approximate sliding window (sliding counter): random sequences decided
//! by the Rust model (the memory store) and by `lua/sliding_counter.lua` on a real Redis, with
//! the same clock; every flat answer must be identical. Calls go through the kind registry's
//! generic trait, as the bindings make them, on both lanes of a standalone server and on the
//! cluster (several keys, so several slots per batch).
//!
//! Needs `SLUICE_REDIS_URL` and `SLUICE_REDIS_CLUSTER`, which `npm test` sets.

use sluice::store::kinds::sliding_counter::SlidingCounter;
use sluice::store::kinds::Kind;
use sluice::store::memory::MemoryStore;
use sluice::store::redis::{RedisOptions, RedisStore};
use std::time::Duration;

mod common;
use common::{env, on_lane, Rng, Wire};

fn options() -> RedisOptions {
  RedisOptions { command_timeout: Duration::from_secs(5), ..RedisOptions::default() }
}

async fn conform(options: RedisOptions, label: &str) {
  let mut wire = options.cluster.is_empty().then(|| Wire::connect(&options.url));
  let store = RedisStore::connect(options).await.expect("connect");
  let run = format!("scconf{}", std::process::id());
  let (mut decisions, mut refused) = (0, 0);
  for seed in 1..=40u64 {
    let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let model = MemoryStore::new();
    let keys: Vec<(String, Vec<f64>)> = (0..3)
      .map(|k| {
        let count = 1 + rng.below(3) as usize;
        let windows = (0..count)
          .flat_map(|_| [rng.pick(&[1.0, 2.0, 3.0, 5.0, 10.0, 50.0]), rng.pick(&[1000.0, 250_000.0, 1e6, 3e6, 7e6])])
          .collect();
        (format!("{run}:sliding-counter:{{{label}{seed}-{k}}}"), windows)
      })
      .collect();
    let mut now: f64 = 1_800_000_000_000_000.0 + (seed as f64) * 1e9;
    for step in 0..150 {
      match rng.below(10) {
        0 => {}
        1 => now -= rng.below(50_000) as f64,
        2 => now += rng.below(4_000_000) as f64,
        3 | 4 => now += rng.pick(&[1000.0, 250_000.0, 1e6, 3e6]),
        _ => now += rng.below(120_000) as f64 + rng.below(1000) as f64,
      }
      let mut batch_keys = vec![];
      let mut nums = vec![];
      for _ in 0..1 + rng.below(6) {
        let (key, windows) = &keys[rng.below(keys.len() as u64) as usize];
        let smallest = windows.chunks(2).map(|w| w[0]).fold(f64::MAX, f64::min);
        // take, peek, reset, block, adjust (refunds mostly)
        let op = rng.pick(&[0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 2.0, 3.0, 4.0]);
        let op = if (op == 2.0 || op == 3.0) && rng.below(4) != 0 { 0.0 } else { op };
        let weight = match op {
          3.0 => rng.pick(&[1.0, 500_000.0, 2e6]),
          4.0 => -rng.pick(&[1.0, 2.0, 5.0]) + if rng.below(5) == 0 { 6.0 } else { 0.0 },
          _ => rng.pick(&[0.0, 1.0, 1.0, 1.0, 2.0, 3.0]).min(smallest),
        };
        batch_keys.push(key.clone());
        nums.extend([op, weight, (windows.len() / 2) as f64]);
        nums.extend(windows);
      }
      let call = SlidingCounter::decode(&sluice::codec::encode(&batch_keys), &nums).expect("valid call");
      let expected = SlidingCounter::memory(&model, &call, now).expect("model");
      let actual = on_lane(&mut wire, step, |lane| {
        let (store, call) = (&store, &call);
        async move { SlidingCounter::redis(store, call, Some(now), &lane).await }
      })
      .await
      .expect("redis decision");
      assert_eq!(expected, actual, "{label} seed {seed} step {step}\ncall {call:?}");
      decisions += batch_keys.len();
      // the first call's answer: refusals must be part of what is compared
      refused += usize::from(expected.numbers[0] == 0.0);
    }
  }
  assert!(decisions > 15_000 && refused > 1000, "only {decisions} decisions ({refused} refused) compared");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sliding_counter_lua_matches_the_model_on_standalone() {
  conform(RedisOptions { url: env("SLUICE_REDIS_URL"), ..options() }, "s").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sliding_counter_lua_matches_the_model_on_cluster() {
  conform(
    RedisOptions { cluster: env("SLUICE_REDIS_CLUSTER").split(',').map(str::to_owned).collect(), ..options() },
    "c",
  )
  .await;
}
