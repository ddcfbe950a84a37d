//! Conformance of the adaptive rate (sluice/fetch's per-key record): random sequences of paces
//! (weights, successes reported, max waits, probes of weight 0) and reports (throttled answers,
//! blocks, learned rates, successes), with settings that change between calls as a door's `limits(key)`
//! may, decided by the Rust model (the memory store) and by `lua/adaptive.lua` on a real Redis,
//! with the same clock; every flat answer must be identical. Calls go through the kind
//! registry's generic trait, as the bindings make them, on both lanes of a standalone server
//! and on the cluster (several keys, so several slots per batch).
//!
//! Needs `SLUICE_REDIS_URL` and `SLUICE_REDIS_CLUSTER`, which `npm test` sets.

use sluice::store::kinds::adaptive::{Adaptive, GIVE, PACE, REPORT};
use sluice::store::kinds::Kind;
use sluice::store::memory::MemoryStore;
use sluice::store::redis::{RedisOptions, RedisStore};
use std::time::Duration;

mod common;
use common::{env, on_lane, Rng, Wire};

fn options() -> RedisOptions {
  RedisOptions { command_timeout: Duration::from_secs(5), ..RedisOptions::default() }
}

/** A key's settings: `[max_qps, min_qps, start_qps, inc_abs, inc_rel, decrease, burst]`. */
fn settings(rng: &mut Rng) -> [f64; 7] {
  let max = rng.pick(&[2.0, 10.0, 50.0, 100.0, 1000.0, 1e9]);
  let min = (max * rng.pick(&[0.001, 0.01, 0.1, 1.0])).max(1e-3).min(max);
  let start = min + (max - min) * rng.pick(&[0.0, 0.5, 1.0]);
  let inc_abs = rng.pick(&[0.0, 0.0, 0.5, 3.0]);
  let inc_rel = rng.pick(&[0.0, 0.002, 0.01, 0.25]);
  let decrease = rng.pick(&[0.05, 0.1, 0.5, 0.9]);
  let burst = rng.pick(&[0.0, 0.0, 1.0, 5.0]);
  [max, min, start, inc_abs, inc_rel, decrease, burst]
}

async fn conform(options: RedisOptions, label: &str) {
  let mut wire = options.cluster.is_empty().then(|| Wire::connect(&options.url));
  let store = RedisStore::connect(options).await.expect("connect");
  let run = format!("adconf{}", std::process::id());
  let (mut calls, mut refused, mut decreased, mut waited, mut given) = (0, 0, 0, 0, 0);
  for seed in 1..=40u64 {
    let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let model = MemoryStore::new();
    let mut keys: Vec<(String, [f64; 7])> =
      (0..3).map(|k| (format!("{run}:adaptive:v2:{{{label}{seed}-{k}}}"), settings(&mut rng))).collect();
    let mut now: f64 = 1_800_000_000_000_000.0 + (seed as f64) * 1e9;
    for step in 0..150 {
      match rng.below(10) {
        0 => {}
        1 => now -= rng.below(50_000) as f64,
        2 => now += rng.below(3_000_000) as f64,
        3 => now += rng.pick(&[1e6, 2e6, 61e6]),
        _ => now += rng.below(40_000) as f64 + rng.below(1000) as f64 / 7.0,
      }
      if rng.below(40) == 0 {
        let k = rng.below(3) as usize;
        keys[k].1 = settings(&mut rng); // a door with other settings for the key
      }
      let mut batch_keys = vec![];
      let mut nums = vec![];
      for _ in 0..1 + rng.below(6) {
        let (key, p) = &keys[rng.below(keys.len() as u64) as usize];
        batch_keys.push(key.clone());
        if rng.below(8) == 0 {
          // a slot given back (its width, µs)
          let weight = rng.pick(&[1.0, 1.0, 2.0]);
          let start_in = rng.pick(&[0.0, 500.0, 20_000.0, 980_000.0]);
          nums.extend([GIVE, weight, 0.0, start_in, 0.0, 0.0, 0.0, 0.0]);
        } else if rng.below(4) == 0 {
          // report: throttled or not, a block, a learned rate
          let throttled = rng.pick(&[0.0, 1.0, 1.0]);
          let block = rng.pick(&[0.0, 0.0, 1e6, 1_500_000.0, 2e6, 30e6]);
          let learned = if rng.below(3) == 0 { rng.pick(&[0.5, 4.9, 49.0, 980.0]) } else { 0.0 };
          let ttl = if learned > 0.0 { rng.pick(&[1e6, 60e6]) } else { 0.0 };
          let ok = rng.pick(&[0.0, 0.0, 1.0, 7.0]);
          // a throttled answer: how long ago its call was sent (the end of a cycle), or unknown
          let sent_ago = if throttled > 0.0 { rng.pick(&[-1.0, 0.0, 5_000.0, 300_000.0, 1_200_000.0]) } else { -1.0 };
          nums.extend([REPORT, 0.0, ok, sent_ago, throttled, block, learned, ttl]);
        } else {
          // pace: weight (0: a probe), successes since the last call, a max wait or none
          let weight = rng.pick(&[0.0, 1.0, 1.0, 1.0, 2.0]);
          let ok = rng.pick(&[0.0, 0.0, 1.0, 3.0, 20.0]);
          let max_wait = rng.pick(&[-1.0, -1.0, 0.0, 5_000.0, 200_000.0]);
          nums.extend([PACE, weight, ok, max_wait, 0.0, 0.0, 0.0, 0.0]);
        }
        nums.extend(p);
        // how long ago the latest call whose success is told was sent (late answers)
        nums.push(if nums[nums.len() - 13] > 0.0 { rng.pick(&[0.0, 2_000.0, 300_000.0, 1_500_000.0]) } else { 0.0 });
      }
      let call = Adaptive::decode(&sluice::codec::encode(&batch_keys), &nums).expect("valid call");
      let expected = Adaptive::memory(&model, &call, now).expect("model");
      let actual = on_lane(&mut wire, step, |lane| {
        let (store, call) = (&store, &call);
        async move { Adaptive::redis(store, call, Some(now), &lane).await }
      })
      .await
      .expect("redis decision");
      assert_eq!(expected, actual, "{label} seed {seed} step {step}\ncall {call:?}");
      for (i, c) in call.iter().enumerate() {
        let out = &expected.numbers[3 * i..3 * i + 3];
        calls += 1;
        if c.op == PACE {
          refused += usize::from(out[2] == 0.0);
          waited += usize::from(out[0] > 0.0);
        } else if c.op == GIVE {
          given += 1;
        } else {
          decreased += usize::from(out[2] == 1.0);
        }
      }
    }
  }
  // what is compared must include every branch: refusals, waits, decreases
  assert!(
    calls > 15_000 && refused > 500 && waited > 2000 && decreased > 300 && given > 1000,
    "only {calls} calls ({refused} refused, {waited} waited, {decreased} decreased, {given} given back) compared"
  );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn adaptive_lua_matches_the_model_on_standalone() {
  conform(RedisOptions { url: env("SLUICE_REDIS_URL"), ..options() }, "s").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn adaptive_lua_matches_the_model_on_cluster() {
  conform(
    RedisOptions { cluster: env("SLUICE_REDIS_CLUSTER").split(',').map(str::to_owned).collect(), ..options() },
    "c",
  )
  .await;
}
