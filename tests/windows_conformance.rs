//! Conformance of the sliding-window and quota limiters: random sequences decided by the Rust
//! model (the memory store) and by `lua/sliding.lua` / `lua/quota.lua` on a real Redis, with
//! the same clock and timestamps; every answer must be identical. On the cluster the quota
//! calls span hash slots, so the per-slot phases are checked against the atomic model too.
//!
//! Needs `SLUICE_REDIS_URL` and `SLUICE_REDIS_CLUSTER`, which `npm test` sets.

use sluice::store::kinds::quota::{QuotaCall, QuotaMode, QUOTA_MARGIN_MS};
use sluice::store::kinds::sliding::SlidingBatch;
use sluice::store::memory::MemoryStore;
use sluice::store::redis::{RedisOptions, RedisStore};
use std::time::Duration;

mod common;
use common::{env, on_lane, Rng, Wire};

fn options() -> RedisOptions {
  RedisOptions { command_timeout: Duration::from_secs(5), ..RedisOptions::default() }
}

fn cluster_options() -> RedisOptions {
  RedisOptions { cluster: env("SLUICE_REDIS_CLUSTER").split(',').map(str::to_owned).collect(), ..options() }
}

async fn conform_sliding(options: RedisOptions, label: &str) {
  // on a standalone server, every other step runs on the direct lane (see common::Wire)
  let mut wire = options.cluster.is_empty().then(|| Wire::connect(&options.url));
  let store = RedisStore::connect(options).await.expect("connect");
  let run = format!("sconf{}", std::process::id());
  let mut decisions = 0;
  for seed in 1..=40u64 {
    let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let model = MemoryStore::new();
    // each key keeps its windows, as in real use
    let keys: Vec<(String, Vec<f64>)> = (0..3)
      .map(|k| {
        let count = 1 + rng.below(3) as usize;
        let windows = (0..count)
          .flat_map(|_| [rng.pick(&[1.0, 2.0, 3.0, 5.0, 10.0, 50.0]), rng.pick(&[1000.0, 250_000.0, 1e6, 3e6])])
          .collect();
        (format!("{run}:sliding:{{{label}{seed}}}:{k}"), windows)
      })
      .collect();
    let mut now: f64 = 1_800_000_000_000_000.0 + (seed as f64) * 1e9;
    for step in 0..150 {
      match rng.below(10) {
        0 => {}
        1 => now -= rng.below(50_000) as f64,
        2 => now += rng.below(4_000_000) as f64,
        // exactly an interval: calls land on the window's edge
        3 | 4 => now += rng.pick(&[1000.0, 250_000.0, 1e6, 3e6]),
        _ => now += rng.below(120_000) as f64,
      }
      // whole ms, like the intervals: calls often land exactly an interval after another
      now = (now / 1000.0).round() * 1000.0;
      let mut batch_keys = vec![];
      let mut nums = vec![];
      for _ in 0..1 + rng.below(6) {
        let (key, windows) = &keys[rng.below(keys.len() as u64) as usize];
        let smallest = windows.chunks(2).map(|w| w[0]).fold(f64::MAX, f64::min);
        let op = rng.pick(&[0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 2.0]);
        let op = if op == 2.0 && rng.below(4) != 0 { 0.0 } else { op };
        let weight = rng.pick(&[0.0, 1.0, 1.0, 1.0, 2.0, 3.0]).min(smallest);
        batch_keys.push(key.clone());
        nums.extend([op, weight, (windows.len() / 2) as f64]);
        nums.extend(windows);
      }
      let batch = SlidingBatch::decode(&sluice::codec::encode(&batch_keys), &nums).expect("valid batch");
      let expected = model.sliding_batch(&batch, now);
      let actual = on_lane(&mut wire, step, |lane| {
        let (store, batch) = (&store, &batch);
        async move { store.sliding_batch(batch, Some(now), &lane).await?.all() }
      })
      .await
      .expect("redis decision");
      assert_eq!(expected, actual, "{label} seed {seed} step {step}\nbatch {batch:?}");
      decisions += expected.len();
    }
  }
  assert!(decisions > 15_000, "only {decisions} decisions compared");
  store.close().await;
}

const SHAPES: [(f64, f64); 4] = [(10.0, 1.0), (60.0, 10.0), (60.0, 60.0), (3600.0, 60.0)];

fn random_call(rng: &mut Rng, run: &str, label: &str, seed: u64) -> (String, Vec<f64>) {
  let mut keys: Vec<String> = vec![];
  let mut shapes = vec![];
  let mut body = vec![];
  let requests = 1 + rng.below(4);
  body.push(requests as f64);
  for _ in 0..requests {
    let quotas = 1 + rng.below(3);
    body.extend([rng.pick(&[0.0, 1.0, 1.0, 2.0, 3.0, 5.0]), quotas as f64]);
    let prefix = ["a", "b", "c"][rng.below(3) as usize];
    for _ in 0..quotas {
      let (window, granularity) = SHAPES[rng.below(SHAPES.len() as u64) as usize];
      let owner = if rng.below(3) == 0 { "global" } else { prefix };
      let key = format!("{run}:quota:{{{label}{seed}{owner}}}:{window}:{granularity}");
      let c = keys.iter().position(|k| *k == key).unwrap_or_else(|| {
        keys.push(key);
        shapes.extend([window, granularity]);
        keys.len() - 1
      });
      body.extend([c as f64, rng.pick(&[1.0, 3.0, 5.0, 10.0, 100.0])]);
    }
  }
  let mut nums = vec![keys.len() as f64];
  nums.extend(shapes);
  nums.extend(body);
  (sluice::codec::encode(&keys), nums)
}

async fn conform_quota(options: RedisOptions, label: &str) {
  // on a standalone server, every other step runs on the direct lane (see common::Wire)
  let mut wire = options.cluster.is_empty().then(|| Wire::connect(&options.url));
  let store = RedisStore::connect(options).await.expect("connect");
  let run = format!("qconf{}", std::process::id());
  let mut grants = 0;
  for seed in 1..=30u64 {
    let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let model = MemoryStore::new();
    let mut t: f64 = 1_800_000_000.0 + (seed as f64) * 100_000.0;
    for step in 0..120 {
      match rng.below(10) {
        0 => t -= rng.below(30) as f64, // an older timestamp
        1 => t += rng.below(4000) as f64,
        _ => t += rng.below(8) as f64,
      }
      // one call, or the calls of one tick (mostly checkAndUse at one timestamp: merged into
      // one script call when they share a slot), answered as if made one after the other
      let count = if rng.below(3) == 0 { 2 + rng.below(5) } else { 1 };
      let mut calls = vec![];
      for _ in 0..count {
        let (keys, nums) = random_call(&mut rng, &run, label, seed);
        let call = QuotaCall::decode(&keys, &nums).expect("valid call");
        let modes = [QuotaMode::Check, QuotaMode::CheckAndUse, QuotaMode::CheckAndUse, QuotaMode::Use];
        let mode = if count > 1 && rng.below(4) != 0 { QuotaMode::CheckAndUse } else { modes[rng.below(4) as usize] };
        let at = if count > 1 && rng.below(5) == 0 { t + 1.0 } else { t };
        calls.push((call, mode, Some(at)));
      }
      // the model never expires a counter (its clock stands still); Redis keeps them for the
      // window + 60 s of real time, far longer than the sequence runs
      let expected: Vec<_> =
        calls.iter().map(|(call, mode, at)| model.quota(call, *mode, at.unwrap_or(t), 0.0)).collect();
      let actual = if count == 1 {
        let (call, mode, _) = &calls[0];
        vec![on_lane(&mut wire, step, |lane| {
          let store = &store;
          let mode = *mode;
          async move { store.quota(call, mode, Some(t), QUOTA_MARGIN_MS, &lane).await }
        })
        .await
        .expect("redis reply")]
      } else {
        on_lane(&mut wire, step, |lane| {
          let (store, calls) = (&store, &calls);
          async move { store.quota_batch(calls, &lane).await?.all() }
        })
        .await
        .expect("redis reply")
      };
      for (i, ((call, mode, at), (t_used, actual))) in calls.iter().zip(actual).enumerate() {
        assert_eq!(Some(t_used), *at);
        let all: Vec<_> = calls.iter().map(|(c, m, a)| (m, a, c.keys.len())).collect();
        assert_eq!(expected[i], actual, "{label} seed {seed} step {step} call {i} {mode:?} at {at:?} of {all:?}\ncall {call:?}\nexpected all {expected:?}\ncalls {calls:?}");
        grants += actual.len();
      }
    }
  }
  assert!(grants > 3_000, "only {grants} grants compared");
  store.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sliding_lua_matches_the_model_on_standalone() {
  conform_sliding(RedisOptions { url: env("SLUICE_REDIS_URL"), ..options() }, "s").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sliding_lua_matches_the_model_on_cluster() {
  conform_sliding(cluster_options(), "c").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quota_lua_matches_the_model_on_standalone() {
  conform_quota(RedisOptions { url: env("SLUICE_REDIS_URL"), ..options() }, "s").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quota_lua_matches_the_model_on_cluster_across_slots() {
  conform_quota(cluster_options(), "c").await;
}
