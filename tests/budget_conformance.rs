//! Conformance of the budget: random sequences of reservations, settlements, cancellations
//! (some past the debt cap) and stats, with and without tenants (active shares that now and then sum over 1, borrowing
//! horizons, a tenant id with a newline), decided by the Rust model (the memory store) and by `lua/budget.lua` on a real
//! Redis, with the same clock; every flat answer must be identical. Calls go through the kind
//! registry's generic trait, as the bindings make them, on both lanes of a standalone server
//! and on the cluster (several budgets, so several slots per batch).
//!
//! Needs `SLUICE_REDIS_URL` and `SLUICE_REDIS_CLUSTER`, which `npm test` sets.

use sluice::core::budget::tenants::TOP;
use sluice::store::kinds::budget::{Budget, CANCEL, RESERVE, RESERVE_AS, SETTLE, STATS, STATS_OF};
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
  let run = format!("bgconf{}", std::process::id());
  let (mut decisions, mut refused, mut settled, mut not_open) = (0, 0, 0, 0);
  let (mut as_tenant, mut listed, mut excess) = (0, 0, 0);
  let tenants = ["a", "b", "c\nd", "e:f"];
  for seed in 1..=30u64 {
    let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let model = MemoryStore::new();
    // per budget: key, and its dimensions (limit, interval_us, max_burst, max_debt)
    let budgets: Vec<(String, Vec<[f64; 4]>)> = (0..3)
      .map(|k| {
        let count = 1 + rng.below(4) as usize;
        let dims = (0..count)
          .map(|_| {
            let limit = rng.pick(&[1.0, 3.0, 10.0, 60.0, 1000.0]);
            let burst = rng.pick(&[0.0, 0.0, 1.0, 5.0, 100.0]);
            // the default cap (limit + burst), none, or a small one
            let debt = rng.pick(&[limit + burst, limit + burst, 0.0, 2.0]);
            [limit, rng.pick(&[1000.0, 250_000.0, 1e6, 7e6]), burst, debt]
          })
          .collect();
        (format!("{run}:budget:{{{label}{seed}-{k}}}"), dims)
      })
      .collect();
    let mut made: Vec<(usize, String)> = vec![];
    let mut now: f64 = 1_800_000_000_000_000.0 + (seed as f64) * 1e9;
    for step in 0..150 {
      match rng.below(10) {
        0 => {}
        1 => now -= rng.below(50_000) as f64,
        2 => now += rng.below(4_000_000) as f64,
        _ => now += rng.below(300_000) as f64,
      }
      let mut text = vec![];
      let mut nums = vec![];
      for _ in 0..1 + rng.below(6) {
        let op =
          rng.pick(&[RESERVE, RESERVE, RESERVE_AS, RESERVE_AS, RESERVE_AS, SETTLE, SETTLE, CANCEL, STATS, STATS_OF]);
        let (b, id) = if op == SETTLE || op == CANCEL {
          match made.len() {
            0 => (0, "none".to_owned()),
            n => made[rng.below(n as u64) as usize].clone(),
          }
        } else {
          let b = rng.below(budgets.len() as u64) as usize;
          // now and then an id already used
          let id = if (op == RESERVE || op == RESERVE_AS) && rng.below(20) == 0 && !made.is_empty() {
            made[0].1.clone()
          } else {
            format!("r{step}-{}", text.len())
          };
          (b, id)
        };
        let (key, dims) = &budgets[b];
        let ttl = rng.pick(&[1000.0, 500_000.0, 3e6, 6e8]);
        let max_wait = rng.pick(&[0.0, 100_000.0, 2e6, 1e9]);
        let tenant = if op == RESERVE_AS || op == STATS_OF { tenants[rng.below(4) as usize] } else { "" };
        // shares in ppm: 4 tenants of up to 0.4 each sum over 1 now and then
        let share = rng.pick(&[0.0, 100_000.0, 250_000.0, 400_000.0]);
        let max = (share + rng.pick(&[0.0, 100_000.0, 600_000.0])).max(1.0);
        let ahead = rng.pick(&[0.0, 0.0, 300_000.0, 5e6]);
        nums.extend([op, ttl, max_wait, dims.len() as f64, share, max, ahead]);
        for [limit, interval, burst, debt] in dims {
          let amount = match op {
            RESERVE | RESERVE_AS => {
              (rng.below((limit + burst) as u64 + 1) as f64).min(rng.pick(&[0.0, 1.0, 2.0, 5.0, 1e9]))
            }
            SETTLE => {
              let within = rng.below((2.0 * limit) as u64 + 2) as f64;
              rng.pick(&[within, within, 3.0 * limit + burst, 1e9])
            }
            _ => 0.0,
          };
          nums.extend([*limit, *interval, *burst, *debt, amount]);
        }
        if op == RESERVE || op == RESERVE_AS {
          made.push((b, id.clone()));
        }
        text.push(key.clone());
        text.push(id);
        text.push(tenant.to_owned());
      }
      let call = Budget::decode(&sluice::codec::encode(&text), &nums).expect("valid call");
      let expected = Budget::memory(&model, &call, now).expect("model");
      let actual = on_lane(&mut wire, step, |lane| {
        let (store, call) = (&store, &call);
        async move { Budget::redis(store, call, Some(now), &lane).await }
      })
      .await
      .expect("redis decision");
      assert_eq!(expected, actual, "{label} seed {seed} step {step}\ncall {call:?}");
      let mut at = 0;
      for c in &call {
        let status = expected.numbers[at];
        decisions += 1;
        refused += usize::from((c.op == RESERVE || c.op == RESERVE_AS) && status == 0.0);
        as_tenant += usize::from(c.op == RESERVE_AS && status == 1.0);
        if c.op == STATS && status == 1.0 {
          listed += expected.numbers[at + 5 + 3 * c.dimensions.len() + 1] as usize;
        }
        settled += usize::from(c.op == SETTLE && status == 1.0);
        not_open += usize::from(status == 3.0);
        let n = c.dimensions.len();
        excess +=
          usize::from(c.op == SETTLE && status == 1.0 && (0..n).any(|d| expected.numbers[at + 7 + 3 * d] > 0.0));
        at +=
          5 + 3 * n + if c.tenant.is_some() { 2 + n } else { 0 } + if c.op == STATS { 2 + TOP * (2 + n) } else { 0 };
      }
    }
  }
  assert!(
    decisions > 5_000
      && refused > 500
      && settled > 300
      && not_open > 300
      && as_tenant > 500
      && listed > 100
      && excess > 50,
    "only {decisions} decisions ({refused} refused, {settled} settled, {not_open} not open, {as_tenant} through \
     tenants, {listed} tenants listed by stats, {excess} settled past the cap) compared"
  );
  println!(
    "{label}: {decisions} decisions, {refused} refused, {settled} settled, {not_open} not open, {as_tenant} through \
     tenants, {listed} tenants listed by stats, {excess} past the debt cap"
  );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn budget_lua_matches_the_model_on_standalone() {
  conform(RedisOptions { url: env("SLUICE_REDIS_URL"), ..options() }, "s").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn budget_lua_matches_the_model_on_cluster() {
  conform(
    RedisOptions { cluster: env("SLUICE_REDIS_CLUSTER").split(',').map(str::to_owned).collect(), ..options() },
    "c",
  )
  .await;
}
