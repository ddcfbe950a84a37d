//! Fuzzing the reply decoding path (issue 15): whatever bytes a server sends, the decoders fred
//! uses (redis-protocol, patched with a nesting cap: vendor/redis-protocol/src/depth.rs) answer
//! a frame, "need more bytes" or an error; they never panic, never recurse without bound, and
//! never allocate ahead of the bytes they hold. Run for a fixed number of cases (proptest).

use fred::bytes::BytesMut;
use proptest::prelude::*;
use redis_protocol::depth::MAX_DEPTH;
use redis_protocol::{resp2, resp3};

/// Every decoder fred may use on `bytes`: the RESP2 one, RESP3 complete and streaming.
fn decode_all(bytes: &[u8]) {
  let _ = resp2::decode::decode(bytes);
  let _ = resp2::decode::decode_bytes_mut(&mut BytesMut::from(bytes));
  let _ = resp3::decode::complete::decode(bytes);
  let _ = resp3::decode::streaming::decode_bytes_mut(&mut BytesMut::from(bytes));
}

/// Runs `f` on a thread with tokio's default worker stack (2 MiB), where fred decodes replies.
fn on_worker_stack<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
  std::thread::Builder::new().stack_size(2 << 20).spawn(f).unwrap().join().expect("the decoder thread died")
}

fn nested(prefix: &str, depth: usize) -> Vec<u8> {
  let mut out = prefix.repeat(depth).into_bytes();
  out.extend_from_slice(b":1\r\n");
  out
}

#[test]
fn nesting_is_capped_as_a_protocol_error_not_a_stack_overflow() {
  on_worker_stack(|| {
    // the deepest accepted reply decodes on a worker's stack
    let ok = nested("*1\r\n", MAX_DEPTH - 1);
    assert!(matches!(resp2::decode::decode(&ok), Ok(Some(_))));
    assert!(matches!(resp3::decode::complete::decode(&ok), Ok(Some(_))));
    // one level more, the 8 KB reply of the report, and far deeper ones are errors
    for depth in [MAX_DEPTH, 2_000, 100_000, 1_000_000] {
      for prefix in ["*1\r\n", "%1\r\n:1\r\n", "~1\r\n", ">1\r\n", "|1\r\n:1\r\n:1\r\n"] {
        let deep = nested(prefix, depth);
        assert!(resp3::decode::complete::decode(&deep).is_err(), "{prefix:?} x {depth}");
        assert!(resp3::decode::streaming::decode_bytes_mut(&mut BytesMut::from(&deep[..])).is_err());
      }
      let deep = nested("*1\r\n", depth);
      assert!(resp2::decode::decode(&deep).is_err(), "*1 x {depth}");
      assert!(resp2::decode::decode_bytes_mut(&mut BytesMut::from(&deep[..])).is_err());
    }
    // the depth counter is left at zero after an error: a normal reply decodes next
    assert!(matches!(resp2::decode::decode(b"*2\r\n:1\r\n$1\r\nx\r\n"), Ok(Some(_))));
  });
}

#[test]
fn declared_lengths_do_not_allocate_ahead_of_the_bytes() {
  // a 2 GB bulk string and a 2-billion-element array, announced and not sent: "need more bytes"
  for reply in [&b"$2147483647\r\nabc"[..], b"*2147483647\r\n:1\r\n:2\r\n", b"*9223372036854775807\r\n"] {
    assert!(matches!(resp2::decode::decode(reply), Ok(None) | Err(_)), "{reply:?}");
    assert!(matches!(resp3::decode::complete::decode(reply), Ok(None) | Err(_)));
  }
}

fn frame_strategy() -> impl Strategy<Value = Vec<u8>> {
  let leaf = prop_oneof![
    "[a-zA-Z0-9 ]{0,12}".prop_map(|s| format!("+{s}\r\n").into_bytes()),
    "[a-zA-Z0-9 ]{0,12}".prop_map(|s| format!("-ERR {s}\r\n").into_bytes()),
    any::<i64>().prop_map(|i| format!(":{i}\r\n").into_bytes()),
    proptest::collection::vec(any::<u8>(), 0..24).prop_map(|b| {
      let mut out = format!("${}\r\n", b.len()).into_bytes();
      out.extend_from_slice(&b);
      out.extend_from_slice(b"\r\n");
      out
    }),
    Just(b"$-1\r\n".to_vec()),
    Just(b"*-1\r\n".to_vec()),
  ];
  leaf.prop_recursive(8, 64, 6, |inner| {
    proptest::collection::vec(inner, 0..6).prop_map(|items| {
      let mut out = format!("*{}\r\n", items.len()).into_bytes();
      for item in items {
        out.extend_from_slice(&item);
      }
      out
    })
  })
}

proptest! {
  #![proptest_config(ProptestConfig { cases: 2_000, ..ProptestConfig::default() })]

  /// Random bytes: a frame, "need more", or an error; never a panic.
  #[test]
  fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
    decode_all(&bytes);
  }

  /// Random bytes behind a valid type byte (the decoder gets past the first branch).
  #[test]
  fn random_bodies_never_panic(kind in prop::sample::select(b"+-:$*%~>|_#,(=!".to_vec()), body in proptest::collection::vec(any::<u8>(), 0..128)) {
    let mut bytes = vec![kind];
    bytes.extend_from_slice(&body);
    decode_all(&bytes);
  }

  /// Valid replies decode whole; every truncation of one is "need more bytes", never an error.
  #[test]
  fn valid_replies_decode_and_truncations_wait(frame in frame_strategy()) {
    let (decoded, used) = resp2::decode::decode(&frame).unwrap().unwrap();
    prop_assert_eq!(used, frame.len());
    drop(decoded);
    for cut in 0..frame.len() {
      prop_assert!(matches!(resp2::decode::decode(&frame[..cut]), Ok(None)), "cut at {}", cut);
    }
  }

  /// Valid replies with bytes flipped: never a panic.
  #[test]
  fn corrupted_replies_never_panic(frame in frame_strategy(), flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..4)) {
    let mut bytes = frame;
    for (at, byte) in flips {
      let i = at.index(bytes.len());
      bytes[i] = byte;
    }
    decode_all(&bytes);
  }
}
