//! Conformance of the limiter family: random sequences decided by the Rust model (the memory
//! store) and by the Lua scripts on a real Redis, with the same clock; every answer must be
//! identical. `lua/limit.lua` (bucket, window, leaky/points: takes, reservations, peeks,
//! adjustments, resets, blocks, all-or-nothing groups, backoff counts, throttles) and `lua/concurrent.lua` (acquire, release, extend, poll, cancel,
//! stats). Standalone and cluster.
//!
//! Needs `SLUICE_REDIS_URL` and `SLUICE_REDIS_CLUSTER`, which `npm test` sets.

use sluice::core::concurrent::Request;
use sluice::store::kinds::limit::{LimitBatch, ADJUST, BACKOFF, BLOCK, CONTINUE, GROUP, MEMBER, PEEK, RESET, THROTTLE};
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

/// Moves the simulated clock. (Redis expires keys on its own clock; with an explicit clock
/// the scripts add 60 s to every TTL, so a sequence that runs for a few seconds of real time
/// sees the same keys as the model.)
fn step_clock(rng: &mut Rng, now: &mut f64) {
  match rng.below(10) {
    0 => {}
    1 => *now -= rng.below(50_000) as f64, // a clock that steps back
    2 => *now += rng.below(3_000_000) as f64,
    _ => *now += rng.below(150_000) as f64,
  }
}

/// One random batch of limiter calls; each key keeps its kind, limit and interval, as in real
/// use (the memory model expires a key on the simulated clock, Redis on its own: with
/// parameters changing between calls, a key could outlive its TTL on one and not the other).
fn random_batch(rng: &mut Rng, keys: &[(String, f64, f64)]) -> (String, Vec<f64>) {
  let mut batch_keys = vec![];
  let mut args = vec![];
  for _ in 0..1 + rng.below(8) {
    if rng.below(4) == 0 {
      // an all-or-nothing group of 1..4 distinct keys (an HTTP door's windows), one weight
      let weight = rng.pick(&[0.0, 1.0, 1.0, 1.0, 2.0, 3.0, 12.0]);
      let mut members: Vec<usize> = vec![];
      for _ in 0..1 + rng.below(4) {
        let k = rng.below(keys.len() as u64) as usize;
        if !members.contains(&k) {
          members.push(k);
        }
      }
      for (i, k) in members.into_iter().enumerate() {
        let (key, limit, interval_us) = &keys[k];
        batch_keys.push(key.clone());
        args.extend([(k % 3) as f64, weight, *limit, *interval_us, if i == 0 { GROUP } else { MEMBER }]);
      }
      continue;
    }
    let k = rng.below(keys.len() as u64) as usize;
    let (key, limit, interval_us) = &keys[k];
    batch_keys.push(key.clone());
    let mut action = rng.pick(&[0.0, 0.0, 0.0, 0.0, 250_000.0, 2e6, PEEK, ADJUST, RESET, BLOCK]);
    let mut weight = rng.pick(&[0.0, 1.0, 1.0, 1.0, 2.0, 3.0, 5.0, 12.0]);
    if k % 3 == 1 && rng.below(3) == 0 {
      // a window's backoff count (an HTTP door's exponentialBackoff): weight >= 1
      action = rng.pick(&[BACKOFF, BACKOFF, CONTINUE, THROTTLE, THROTTLE]);
      weight = rng.pick(&[1.0, 1.0, 1.0, 2.0]);
    }
    if action == THROTTLE {
      // @nestjs/throttler's count and block: the weight is the block's duration, µs (0: none),
      // chosen without drawing from rng (a draw shifts every later sequence, and some sequences
      // step the clock back into a window the model already expired while Redis keeps it 60 s
      // longer: a difference of the test's two clocks, not of the scripts)
      weight = [0.0, 1000.0, 300_000.0, 2e6][(k + args.len()) % 4];
    }
    if action == BLOCK {
      weight = rng.pick(&[1.0, 1000.0, 300_000.0]); // µs
    }
    if action == ADJUST && rng.below(2) == 0 {
      weight = -weight;
    }
    args.extend([(k % 3) as f64, weight, *limit, *interval_us, action]);
  }
  (sluice::codec::encode(&batch_keys), args)
}

async fn conform_limits(options: RedisOptions, label: &str) {
  // on a standalone server, every other step runs on the direct lane (see common::Wire)
  let mut wire = options.cluster.is_empty().then(|| Wire::connect(&options.url));
  let store = RedisStore::connect(options).await.expect("connect");
  let run = format!("lconf{}", std::process::id());
  let mut decisions = 0;
  for seed in 1..=40u64 {
    let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let model = MemoryStore::new();
    let keys: Vec<(String, f64, f64)> = (0..6)
      .map(|k| {
        let limit = rng.pick(&[1.0, 2.0, 3.0, 7.0, 10.0, 1000.0]);
        let interval_us = rng.pick(&[1.0, 1000.0, 333_333.0, 1e6, 3e6, 6e7]);
        (format!("{run}:limit:{{{label}{seed}}}:{k}"), limit, interval_us)
      })
      .collect();
    let mut now: f64 = 1_800_000_000_000_000.0 + (seed as f64) * 1e9;
    for step in 0..120 {
      step_clock(&mut rng, &mut now);
      let (batch_keys, args) = random_batch(&mut rng, &keys);
      let batch = LimitBatch::decode(&batch_keys, &args).expect("valid batch");
      let expected = model.limit_batch(&batch, now);
      let actual = on_lane(&mut wire, step, |lane| {
        let (store, batch) = (&store, &batch);
        async move { store.limit_batch(batch, Some(now), &lane).await?.all() }
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

async fn conform_concurrent(options: RedisOptions, label: &str) {
  // on a standalone server, every other step runs on the direct lane (see common::Wire)
  let mut wire = options.cluster.is_empty().then(|| Wire::connect(&options.url));
  let store = RedisStore::connect(options).await.expect("connect");
  let run = format!("cconf{}", std::process::id());
  let mut replies = 0;
  for seed in 1..=30u64 {
    let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let model = MemoryStore::new();
    // two limiters per sequence, sharing a hash tag so a batch can hold both on a cluster
    let keys: Vec<String> = (0..2).map(|k| format!("{run}:concurrent:{{{label}{seed}}}:{k}")).collect();
    let mut ids: Vec<(usize, String)> = vec![];
    // how release and extend name leases: `id|token|acquired` when taken at once, the id when
    // handed over from the queue (learned from the replies, as the JS layer does)
    let mut names: Vec<(usize, String)> = vec![];
    let mut now: f64 = 1_800_000_000_000_000.0 + (seed as f64) * 1e9;
    for step in 0..100 {
      step_clock(&mut rng, &mut now);
      // whole ms, like the lock times: operations often land exactly on an expiry
      now = (now / 1000.0).round() * 1000.0;
      let mut ops = vec![];
      for o in 0..1 + rng.below(4) {
        let limit = if rng.below(10) == 0 { rng.pick(&[1.0, 4.0]) } else { 2.0 };
        let lock_us = rng.pick(&[1000.0, 200_000.0, 500_000.0, 2e6]);
        let wait_us = rng.pick(&[0.0, 0.0, 100_000.0, 1e6, 3e6]);
        let op = if ids.is_empty() { 1.0 } else { rng.pick(&[1.0, 1.0, 1.0, 2.0, 2.0, 3.0, 4.0, 5.0, 6.0]) };
        // acquires use fresh ids (as the JS layer does); poll and cancel a known waiter id;
        // release and extend mostly a lease name, sometimes a bare id (refused unless handed over)
        let (k, id) = if op == 1.0 {
          ids.push((rng.below(2) as usize, format!("{seed}-{step}-{o}")));
          ids[ids.len() - 1].clone()
        } else if (op == 2.0 || op == 3.0) && !names.is_empty() && rng.below(5) != 0 {
          names[rng.below(names.len() as u64) as usize].clone()
        } else {
          ids[rng.below(ids.len() as u64) as usize].clone()
        };
        // a TTL far beyond the simulated span: Redis expires keys on its own clock
        ops.push((keys[k].clone(), id, op, [limit, lock_us, wait_us, 86_400_000.0]));
      }
      let mut expected = vec![];
      let mut expected_grants = vec![];
      for (key, id, op, nums) in &ops {
        let (request, ttl_ms) = sluice::store::kinds::concurrent::decode_concurrent(*op, id, nums).expect("valid op");
        let reply = model.concurrent(key, id, request, ttl_ms, now);
        expected_grants.extend(reply.grants.iter().map(|(id, token)| format!("{id} {token}")));
        let k = keys.iter().position(|x| x == key).unwrap_or(0);
        if *op == 1.0 && reply.values[0] == 1.0 {
          names.push((k, format!("{id}|{}|{}", reply.values[1], reply.values[3])));
        }
        names.extend(reply.grants.iter().map(|(id, _)| (k, id.clone())));
        let mut values = reply.values;
        if request == Request::Stats {
          assert_eq!(values.len(), 9);
        }
        values.resize(9, 0.0);
        expected.extend(values);
      }
      let (actual, grants) = on_lane(&mut wire, step, |lane| {
        let (store, ops) = (&store, &ops);
        async move {
          let decided = store.concurrent_batch(ops, Some(now), &lane).await?.all()?;
          Ok(decided.into_iter().fold((vec![], vec![]), |(mut values, mut grants), (v, g)| {
            values.extend(v);
            grants.extend(g);
            (values, grants)
          }))
        }
      })
      .await
      .expect("redis reply");
      assert_eq!(expected, actual, "{label} seed {seed} step {step}: {ops:?}");
      assert_eq!(expected_grants, grants, "{label} seed {seed} step {step}: grants of {ops:?}");
      replies += ops.len();
    }
  }
  assert!(replies >= 6_000, "only {replies} replies compared");
  store.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn limiter_lua_matches_the_model_on_standalone() {
  conform_limits(RedisOptions { url: env("SLUICE_REDIS_URL"), ..options() }, "s").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn limiter_lua_matches_the_model_on_cluster() {
  conform_limits(cluster_options(), "c").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_lua_matches_the_model_on_standalone() {
  conform_concurrent(RedisOptions { url: env("SLUICE_REDIS_URL"), ..options() }, "s").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_lua_matches_the_model_on_cluster() {
  conform_concurrent(cluster_options(), "c").await;
}
