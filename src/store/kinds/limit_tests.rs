//! Tests of the limit kind's batch encoding, groups and tallies (`super`: src/store/kinds/limit.rs).
use super::*;
use crate::error::ErrorKind;

#[test]
fn decodes_mixed_kinds_and_actions() {
  let args =
    [0.0, 1.0, 5.0, 1e6, 0.0, 2.0, -3.0, 10.0, 1e6, ADJUST, 1.0, 0.0, 2.0, 1e6, RESET, 2.0, 1.0, 10.0, 1e6, 5e5];
  let b = LimitBatch::decode("1:a1:b1:c1:b", &args).unwrap();
  assert_eq!(b.keys, ["a", "b", "c"]);
  assert_eq!(b.entries[1].action, Action::Step(Op::Adjust));
  assert_eq!(b.entries[2].action, Action::Step(Op::Reset));
  assert_eq!(b.entries[3].key, 1);
  assert_eq!(b.entries[3].action, Action::Step(Op::Take { max_wait_us: 5e5 }));
  assert_eq!([BUCKET, WINDOW, LEAKY], [0.0, 1.0, 2.0]);
}

#[test]
fn rejects_bad_numbers_and_shapes() {
  for args in [
    [3.0, 1.0, 5.0, 1e6, 0.0],
    [0.0, 1.5, 5.0, 1e6, 0.0],
    [0.0, -1.0, 5.0, 1e6, 0.0],
    [0.0, 1.0, 0.0, 1e6, 0.0],
    [0.0, 1.0, 2.5, 1e6, 0.0],
    [0.0, 1.0, 5.0, 0.0, 0.0],
    [0.0, 1.0, 5.0, f64::NAN, 0.0],
    [0.0, 1.0, 5.0, 1e6, -11.0], // -5 to -10: GROUP, MEMBER, BACKOFF, CONTINUE, TALLY, THROTTLE
    [0.0, 1.0, 5.0, 1e6, THROTTLE], // a bucket's
    [2.0, 1.0, 5.0, 1e6, THROTTLE], // a leaky bucket's
    [1.0, -1.0, 5.0, 1e6, THROTTLE], // a negative block
    [1.0, 1.5, 5.0, 1e6, THROTTLE], // not whole µs
    [1.0, 1e16, 5.0, 1e6, THROTTLE], // past 10 years
    [0.0, 1.0, 5.0, 1e6, TALLY], // a bucket's
    [0.0, 1.0, 5.0, 1e6, BACKOFF], // a bucket's
    [2.0, 1.0, 5.0, 1e6, BACKOFF], // a leaky bucket's
    [1.0, 0.0, 5.0, 1e6, BACKOFF], // weight 0
    [0.0, 1.0, 5.0, 1e6, CONTINUE], // a bucket's
    [0.0, 0.0, 5.0, 1e6, BLOCK],
    [0.0, 1.5, 5.0, 1e6, BLOCK],
    [0.0, 1e16, 5.0, 1e6, BLOCK],
    [0.0, 1.0, 5.0, 1e6, f64::INFINITY],
    [0.0, 2e9, 5.0, 1e6, 0.0],
  ] {
    assert_eq!(LimitBatch::decode("1:a", &args).unwrap_err().kind, ErrorKind::InvalidArgument, "{args:?}");
  }
  assert!(LimitBatch::decode("1:a1:b", &[0.0, 1.0, 5.0, 1e6, 0.0]).is_err());
  assert!(LimitBatch::decode("1:a", &[0.0, 1.0, 5.0, 1e6]).is_err());
}

#[test]
fn groups_are_checked_when_decoded() {
  let g = |w: f64, code: f64| [0.0, w, 5.0, 1e6, code];
  let ok = LimitBatch::decode("1:a1:b1:a", &[g(1.0, GROUP), g(1.0, MEMBER), g(1.0, GROUP)].concat()).unwrap();
  assert_eq!(units(&ok).collect::<Vec<_>>(), [0..2, 2..3]);
  let t = [1.0, 1.0, 5.0, 1e6, TALLY];
  let tallied = LimitBatch::decode("1:a1:t1:a1:b1:u", &[g(1.0, 0.0), t, g(1.0, GROUP), g(1.0, MEMBER), t].concat());
  assert_eq!(units(&tallied.unwrap()).collect::<Vec<_>>(), [0..2, 2..5]);
  for (keys, args) in [
    ("1:a", g(1.0, MEMBER).to_vec()),
    ("1:a1:b", [g(1.0, GROUP), g(2.0, MEMBER)].concat()),
    ("1:a1:a", [g(1.0, GROUP), g(1.0, MEMBER)].concat()),
    ("1:a1:b", [g(1.0, 0.0), g(1.0, MEMBER)].concat()),
    // a tally: a window's, after a take or a group, on a key of its own
    ("1:t", [1.0, 1.0, 5.0, 1e6, TALLY].to_vec()),
    ("1:a1:t", [g(1.0, RESET), [1.0, 1.0, 5.0, 1e6, TALLY]].concat()),
    ("1:a1:a", [g(1.0, 0.0), [1.0, 1.0, 5.0, 1e6, TALLY]].concat()),
    ("1:a1:t1:u", [g(1.0, 0.0), [1.0, 1.0, 5.0, 1e6, TALLY], [1.0, 1.0, 5.0, 1e6, TALLY]].concat()),
  ] {
    assert_eq!(LimitBatch::decode(keys, &args).unwrap_err().kind, ErrorKind::InvalidArgument, "{args:?}");
  }
}

#[test]
fn a_group_charges_all_or_nothing() {
  let store = MemoryStore::new();
  // a fixed window of 2 per second and one of 3 per minute, one weight
  let call = |code: f64| [0.0, 1.0, 2.0, 1e6, code, 0.0, 1.0, 3.0, 6e7, MEMBER];
  let group = |now: f64| {
    let b = LimitBatch::decode("1:s1:m", &call(GROUP)).unwrap();
    store.limit_batch(&b, now)
  };
  let t = 1_700_000_000e6;
  assert!(group(t).iter().all(|d| d.allowed));
  assert!(group(t + 1.0).iter().all(|d| d.allowed));
  // the second window is full: refused, the minute charged nothing (it reports its room)
  let refused = group(t + 2.0);
  assert_eq!(refused.iter().map(|d| d.allowed).collect::<Vec<_>>(), [false, true]);
  assert_eq!((refused[0].remaining, refused[1].remaining, refused[1].retry_after_us), (0.0, 1.0, 0.0));
  assert_eq!(refused[0].retry_after_us, 1e6 - 2.0);
  let next = group(t + 1e6);
  assert!(next.iter().all(|d| d.allowed));
  assert_eq!(next[1].remaining, 0.0, "the minute holds exactly the admitted three");
  let full = group(t + 1e6 + 1.0);
  assert_eq!(full.iter().map(|d| (d.allowed, d.remaining)).collect::<Vec<_>>(), [(true, 1.0), (false, 0.0)]);
}

#[test]
fn a_tally_counts_the_refusals_of_the_call_before_it() {
  let store = MemoryStore::new();
  // a window of 2 per second, its refusals tallied in a window of 10 s (limit 1e9)
  let args = [1.0, 1.0, 2.0, 1e6, 0.0, 1.0, 1.0, 1e9, 1e7, TALLY];
  let call = |now: f64| store.limit_batch(&LimitBatch::decode("1:k1:t", &args).unwrap(), now);
  let t = 1_700_000_000e6;
  for i in 0..2 {
    let d = call(t + i as f64);
    assert!(d[0].allowed);
    assert_eq!(d[1].remaining, 1e9, "an admitted call is not tallied");
  }
  for n in 1..=3 {
    let d = call(t + 10.0 + n as f64);
    assert!(!d[0].allowed);
    assert_eq!(1e9 - d[1].remaining, n as f64, "refusal {n} tallied");
  }
  // the door's window opens again: admitted, the tally kept
  let d = call(t + 1e6 + 20.0);
  assert!(d[0].allowed);
  assert_eq!(1e9 - d[1].remaining, 3.0);
  // a group: tallied when any member refuses
  let g = [0.0, 1.0, 1.0, 1e6, GROUP, 1.0, 1.0, 5.0, 1e6, MEMBER, 1.0, 1.0, 1e9, 1e7, TALLY];
  let group = |now: f64| store.limit_batch(&LimitBatch::decode("1:g1:h1:u", &g).unwrap(), now);
  assert_eq!(1e9 - group(t)[2].remaining, 0.0);
  let refused = group(t + 1.0);
  assert!(!refused[0].allowed && refused[1].allowed);
  assert_eq!(1e9 - refused[2].remaining, 1.0);
}

#[test]
fn a_throttle_is_a_windows_with_its_block_as_weight() {
  let b = LimitBatch::decode("1:a", &[WINDOW, 5e6, 3.0, 1e6, THROTTLE]).unwrap();
  assert_eq!(b.entries[0].action, Action::Step(Op::Throttle { block_us: 5e6 }));
  let zero = LimitBatch::decode("1:a", &[WINDOW, 0.0, 3.0, 1e6, THROTTLE]).unwrap();
  assert_eq!(zero.entries[0].action, Action::Step(Op::Throttle { block_us: 0.0 }));
}
