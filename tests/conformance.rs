//! Conformance: random sequences of pacer batches decided by the Rust model (the memory
//! store) and by `lua/pacer.lua` on a real Redis, with the same clock; every decision must be
//! identical (delay, admitted, watermark to the millionth), and so must give-backs
//! (`lua/pacer_give.lua`), which the later decisions then read. Standalone and cluster.
//!
//! Needs `SLUICE_REDIS_URL` and `SLUICE_REDIS_CLUSTER` (comma-separated seeds), which
//! `npm test` sets after starting its servers.

use sluice::core::pacer::{Decision, Mode, Params};
use sluice::store::kinds::pacer::PacerBatch;
use sluice::store::memory::MemoryStore;
use sluice::store::redis::{RedisOptions, RedisStore};
use std::time::Duration;

mod common;
use common::{env, on_lane, Rng, Wire};

/// One random batch in the JS flat encoding.
fn random_batch(rng: &mut Rng, keys: &[String]) -> (String, Vec<f64>) {
  let mut batch_keys = vec![];
  let mut args = vec![];
  for _ in 0..1 + rng.below(6) {
    let members = if rng.below(4) == 0 { 2 + rng.below(2) } else { 1 };
    args.push(members as f64);
    args.push(rng.below(2) as f64);
    for _ in 0..members {
      batch_keys.push(keys[rng.below(keys.len() as u64) as usize].clone());
      args.push(rng.pick(&[0.0, 0.5, 1.0, 1.0, 1.0, 2.0, 3.7, 10.0, 1e9]));
      args.push(rng.pick(&[1e-6, 0.3, 1.0, 3.0, 10.0, 33.3, 100.0, 1000.0, 1e9]));
      args.push(rng.pick(&[0.0, 0.0, 1.0, 2.5, 5.0, 20.0]));
      args.push(rng.pick(&[0.1, 0.5, 0.5, 1.0, 1.0]));
    }
  }
  (sluice::codec::encode(&batch_keys), args)
}

fn same(a: &Decision, b: &Decision) -> bool {
  a.delay_us == b.delay_us
    && a.admitted == b.admitted
    && (a.watermark_before * 1e6 + 0.5).floor() == (b.watermark_before * 1e6).round()
}

async fn conform(options: RedisOptions, label: &str) {
  // on a standalone server, every other step runs on the direct lane (see common::Wire)
  let mut wire = options.cluster.is_empty().then(|| Wire::connect(&options.url));
  let store = RedisStore::connect(options).await.expect("connect");
  let run = format!("conf{}", std::process::id());
  let (mut decisions, mut given) = (0, 0);
  for seed in 1..=40u64 {
    let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let model = MemoryStore::new();
    // one hash tag per sequence: on a cluster every key of a sequence shares a slot
    let keys: Vec<String> = (0..4).map(|k| format!("{run}:pacer:{{{label}{seed}}}:{k}")).collect();
    let mut now: f64 = 1_800_000_000_000_000.0 + (seed as f64) * 1e9;
    for step in 0..120 {
      match rng.below(10) {
        0 => {}
        1 => now -= rng.below(50_000) as f64, // a clock that steps back
        2 => now += rng.below(3_000_000) as f64,
        _ => now += rng.below(120_000) as f64,
      }
      let (batch_keys, args) = random_batch(&mut rng, &keys);
      let batch = PacerBatch::decode(&batch_keys, &args).expect("valid batch");
      let expected = model.pacer_batch(&batch, now);
      let actual = on_lane(&mut wire, step, |lane| {
        let (store, batch) = (&store, &batch);
        async move { Ok(store.pacer_batch(batch, Some(now), &lane).await?.all()?.concat()) }
      })
      .await
      .expect("redis decision");
      assert_eq!(expected.len(), actual.len());
      for (i, (e, a)) in expected.iter().zip(&actual).enumerate() {
        assert!(same(e, a), "{label} seed {seed} step {step} member {i}: model {e:?} != lua {a:?}\nbatch {batch:?}");
      }
      decisions += expected.len();
      if rng.below(4) == 0 {
        // a caller gives back what it took (lua/pacer_give.lua against pacer::give)
        let key = &keys[rng.below(keys.len() as u64) as usize];
        let weight = rng.pick(&[0.5, 1.0, 1.0, 3.7, 1e9]);
        // the slot's start as a caller estimates it: often the last one's, sometimes not
        let start_in = rng.pick(&[0.0, 0.0, 100.0, 99_000.0, 1e6, 3e6]);
        let qps = rng.pick(&[0.3, 1.0, 10.0, 33.3, 1000.0]);
        let p = Params { qps, max_burst: rng.pick(&[0.0, 2.5, 5.0]), factor: rng.pick(&[0.5, 1.0]), mode: Mode::Pace };
        let expected = model.pacer_give(key, &p, weight, start_in, now);
        let actual = on_lane(&mut wire, step, |lane| {
          let (store, p) = (&store, &p);
          async move { store.pacer_give(key, p, weight, start_in, Some(now), &lane).await }
        })
        .await
        .expect("redis give-back");
        assert_eq!(expected, actual, "{label} seed {seed} step {step}: give-back of {weight} on {key}");
        given += 1;
      }
    }
  }
  assert!(decisions > 10_000 && given > 1000, "only {decisions} decisions and {given} give-backs compared");
  store.close().await;
}

fn options() -> RedisOptions {
  RedisOptions { command_timeout: Duration::from_secs(5), ..RedisOptions::default() }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lua_matches_the_model_on_standalone() {
  conform(RedisOptions { url: env("SLUICE_REDIS_URL"), ..options() }, "s").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lua_matches_the_model_on_cluster() {
  let cluster = env("SLUICE_REDIS_CLUSTER").split(',').map(str::to_owned).collect();
  conform(RedisOptions { cluster, ..options() }, "c").await;
}
