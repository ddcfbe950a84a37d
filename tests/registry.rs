//! The kind registry's generic entries (what `memoryCall`, `redisCall` and `redisDirect` run):
//! every kind's call, in the layout JS sends (`text` in the codec's encoding, numbers), decoded
//! through `visit` by its code and decided by the memory store and by Redis with the same
//! clock; the answers (numbers and strings) must be identical. Standalone (pool and direct
//! lanes) and cluster.
//!
//! Needs `SLUICE_REDIS_URL` and `SLUICE_REDIS_CLUSTER`, which `npm test` sets.

use sluice::codec::encode;
use sluice::store::kinds::{self, table, Kind, Registered, Reply, Visit};
use sluice::store::memory::MemoryStore;
use sluice::store::redis::{Lane, RedisOptions, RedisStore};
use std::time::Duration;

mod common;
use common::{env, on_lane, Wire};

/// Decodes a call of the kind numbered `code` and runs it on both stores.
struct Both<'a> {
  model: &'a MemoryStore,
  store: &'a RedisStore,
  text: &'a str,
  nums: &'a [f64],
  now: f64,
}

type Pair = (Reply, Box<dyn FnOnce(&RedisStore, Lane) -> futures::future::BoxFuture<'_, sluice::Result<Reply>> + Send>);

impl Visit for Both<'_> {
  type Out = Pair;
  fn visit<K: Registered>(self) -> Pair {
    let call = K::decode(self.text, self.nums).unwrap_or_else(|e| panic!("{}: {e}", K::NAME));
    let expected = K::memory(self.model, &call, self.now).expect("memory");
    let now = self.now;
    let _ = self.store;
    (expected, Box::new(move |store, lane| Box::pin(async move { K::redis(store, &call, Some(now), &lane).await })))
  }
}

fn code(name: &str) -> u32 {
  table().into_iter().find(|k| k.name == name).map(|k| k.code).expect("a registered kind")
}

fn op(name: &str, op: &str) -> f64 {
  let kind = table().into_iter().find(|k| k.name == name).expect("a registered kind");
  kind.ops.iter().find(|(n, _)| *n == op).map(|(_, c)| *c).expect("an operation code")
}

/// Every kind's calls, `(kind, text parts, numbers)`, on keys under `tag`.
fn calls(tag: &str) -> Vec<(&'static str, Vec<String>, Vec<f64>)> {
  let key = |k: &str| format!("{tag}:{k}:{{{tag}}}");
  let (pace, rate_limit, block) = (op("pacer", "pace"), op("pacer", "rateLimit"), op("pacer", "block"));
  let mut out = vec![];
  // acquires use fresh ids, as the JS layer does
  for round in 0..3 {
    // a single call, then a composite (charged all or none in rate-limit mode)
    out.push(("pacer", vec![key("p1")], vec![1.0, rate_limit, 1.0, 10.0, 2.0, 1.0]));
    out.push((
      "pacer",
      vec![key("p1"), key("p2"), key("p1")],
      vec![1.0, pace, 1.0, 10.0, 0.0, 1.0, 2.0, rate_limit, 1.0, 5.0, 1.0, 1.0, 1.0, 5.0, 1.0, 1.0],
    ));
    let (bucket, leaky, peek) = (op("limit", "bucket"), op("limit", "leaky"), op("limit", "peek"));
    out.push((
      "limit",
      vec![key("l1"), key("l2"), key("l1")],
      vec![bucket, 1.0, 2.0, 1e6, 0.0, leaky, 2.0, 3.0, 1e6, 5e5, bucket, 1.0, 2.0, 1e6, peek],
    ));
    let (take, speek) = (op("sliding", "take"), op("sliding", "peek"));
    out.push((
      "sliding",
      vec![key("s1"), key("s1")],
      vec![take, 1.0, 2.0, 2.0, 1e6, 5.0, 6e7, speek, 1.0, 1.0, 2.0, 1e6],
    ));
    let (ctake, cpeek, cadjust) =
      (op("sliding_counter", "take"), op("sliding_counter", "peek"), op("sliding_counter", "adjust"));
    out.push((
      "sliding_counter",
      vec![key("sc1"), key("sc1"), key("sc1")],
      vec![ctake, 1.0, 2.0, 2.0, 1e6, 5.0, 6e7, cpeek, 1.0, 1.0, 2.0, 1e6, cadjust, -1.0, 1.0, 2.0, 1e6],
    ));
    // two quota calls of one tick, each with its own counters
    let (check_and_use, check) = (op("quota", "checkAndUse"), op("quota", "check"));
    let body = [1.0, 10.0, 5.0, 1.0, 2.0, 1.0, 0.0, 5.0];
    let mut nums = vec![body.len() as f64, check_and_use, 1_800_000_000.0];
    nums.extend(body);
    nums.extend([body.len() as f64, check, 1_800_000_000.0]);
    nums.extend(body);
    out.push(("quota", vec![key("q1"), key("q2")], nums));
    let (exact, approximate) = (op("fair", "exact"), op("fair", "approximate"));
    out.push((
      "fair",
      vec![key("f1"), format!("job-{round}"), key("f2"), format!("job-{round}")],
      vec![exact, 1.0, 1000.0, 0.0, approximate, 1.0, 60_000.0, 6_000.0],
    ));
    // adaptive: pace (successes reported), a throttled report with a block and a learned rate,
    // then a pace refused past max_wait_us
    let (apace, areport) = (op("adaptive", "pace"), op("adaptive", "report"));
    let params = [100.0, 1.0, 50.0, 0.0, 0.01, 0.1, 2.0];
    let mut nums = vec![];
    for (op, weight, ok, max_wait, throttled, block, learned, ttl) in [
      (apace, 1.0, 0.0, -1.0, 0.0, 0.0, 0.0, 0.0),
      (apace, 1.0, 3.0, -1.0, 0.0, 0.0, 0.0, 0.0),
      (areport, 0.0, 0.0, -1.0, 1.0, 2e6, 40.5, 6e7),
      (apace, 1.0, 1.0, 1e6, 0.0, 0.0, 0.0, 0.0),
    ] {
      nums.extend([op, weight, ok, max_wait, throttled, block, learned, ttl]);
      nums.extend(params);
      nums.push(if ok > 0.0 { 40_000.0 } else { 0.0 }); // sent_ago_us
    }
    out.push(("adaptive", vec![key("a1"), key("a1"), key("a1"), key("a2")], nums));
    let (acquire, stats) = (op("concurrent", "acquire"), op("concurrent", "stats"));
    out.push((
      "concurrent",
      vec![key("c1"), format!("w{round}-1"), key("c1"), format!("w{round}-2"), key("c1"), format!("w{round}-3")],
      vec![acquire, 1.0, 1e6, 0.0, 60_000.0, acquire, 1.0, 1e6, 5e5, 60_000.0, stats, 1.0, 1e6, 0.0, 60_000.0],
    ));
    // a budget: reserve two, settle one, cancel the other twice, one through a tenant, stats
    let (reserve, settle, cancel, bstats, reserve_as) = (
      op("budget", "reserve"),
      op("budget", "settle"),
      op("budget", "cancel"),
      op("budget", "stats"),
      op("budget", "reserveAs"),
    );
    // n, share, max, ahead (tenant ops only), then per dimension limit, interval, burst,
    // max_debt, amount
    let dims =
      |a: f64, b: f64, share: f64| vec![2.0, share, 1e6, 1e6, 10.0, 1e6, 0.0, 10.0, a, 100.0, 6e7, 5.0, 105.0, b];
    let mut nums = vec![];
    for (op, a, b) in [
      (reserve, 1.0, 60.0),
      (reserve, 2.0, 45.0),
      (settle, 1.0, 90.0),
      (cancel, 0.0, 0.0),
      (cancel, 0.0, 0.0),
      (reserve_as, 1.0, 5.0),
    ] {
      nums.extend([op, 6e8, 1e7]);
      nums.extend(dims(a, b, if op == reserve_as { 5e5 } else { 0.0 }));
    }
    nums.extend([bstats, 1.0, 0.0]);
    nums.extend(dims(0.0, 0.0, 0.0));
    let calls = [
      (format!("a{round}"), ""),
      (format!("b{round}"), ""),
      (format!("a{round}"), ""),
      (format!("b{round}"), ""),
      (format!("b{round}"), ""),
      (format!("t{round}"), "tenant\n1"),
      (String::new(), ""),
    ];
    out.push(("budget", calls.into_iter().flat_map(|(id, t)| [key("b1"), id, t.to_owned()]).collect(), nums));
  }
  out.push(("pacer", vec![key("p2")], vec![1.0, block, 3e6, 10.0, 2.0, 1.0]));
  out.push(("pacer", vec![key("p2")], vec![1.0, rate_limit, 1.0, 10.0, 2.0, 1.0]));
  out
}

async fn conform(options: RedisOptions, label: &str) {
  let mut wire = options.cluster.is_empty().then(|| Wire::connect(&options.url));
  let store = RedisStore::connect(options).await.expect("connect");
  let model = MemoryStore::new();
  let tag = format!("reg{}{label}", std::process::id());
  let mut now = 1_800_000_000_000_000.0;
  let mut seen = std::collections::BTreeSet::new();
  for (step, (kind, parts, nums)) in calls(&tag).into_iter().enumerate() {
    now += 1000.0;
    let text = encode(&parts);
    let (expected, run) =
      kinds::visit(code(kind), Both { model: &model, store: &store, text: &text, nums: &nums, now })
        .expect("a registered code");
    let actual = on_lane(&mut wire, step, |lane| run(&store, lane)).await.expect("redis reply");
    assert_eq!(expected, actual, "{label} step {step}: {kind} {parts:?} {nums:?}");
    seen.insert(kind);
  }
  assert_eq!(seen.len(), table().len(), "every kind was called");
  store.close().await;
}

fn options() -> RedisOptions {
  RedisOptions { command_timeout: Duration::from_secs(5), ..RedisOptions::default() }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_kind_through_the_registry_on_standalone() {
  conform(RedisOptions { url: env("SLUICE_REDIS_URL"), ..options() }, "s").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_kind_through_the_registry_on_cluster() {
  let cluster = env("SLUICE_REDIS_CLUSTER").split(',').map(str::to_owned).collect();
  conform(RedisOptions { cluster, ..options() }, "c").await;
}

#[test]
fn codes_name_their_kinds() {
  struct Name;
  impl Visit for Name {
    type Out = &'static str;
    fn visit<K: Registered>(self) -> &'static str {
      K::NAME
    }
  }
  for entry in table() {
    assert_eq!(kinds::visit(entry.code, Name).unwrap(), entry.name);
  }
  let _: fn(&str, &[f64]) -> sluice::Result<<kinds::pacer::Pacer as Kind>::Call> = kinds::pacer::Pacer::decode;
}
