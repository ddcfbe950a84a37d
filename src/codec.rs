//! The one encoding of a list of strings that crosses from Node in a single string
//! (`lib/base/codec.js` writes it): each part as `<length>:<part>`, concatenated, where `<length>`
//! is the part's length in UTF-16 code units, in decimal. No byte of a part is ever read as
//! structure: a name may hold newlines, colons, digits, braces or any control byte, and it
//! stays one part.
//!
//! Why UTF-16 units: they are what `String.prototype.length` gives for free in JS, and Node's
//! conversion to UTF-8 keeps them (a lone surrogate, one unit, arrives as U+FFFD, also one
//! unit). Parts that are ASCII, the usual case, are sliced without walking their characters.
//!
//! An empty string is an empty list. Anything else that is not exactly a sequence of parts
//! (a missing colon, a length with a sign, leading zeros or more than 9 digits, a length past
//! the end or inside a surrogate pair) is an argument error: the caller is not sluice's JS.
#![forbid(unsafe_code)]

use crate::error::{Error, Result};

/// Longest length accepted, in UTF-16 units (well above any key or argument sluice sends).
const MAX_PART: usize = 999_999_999;

/// The parts of `text`, in order, each borrowed from it.
pub fn parts(text: &str) -> Parts<'_> {
  Parts { text, at: 0 }
}

/// Every part of `text`, or the first decoding error.
pub fn decode(text: &str) -> Result<Vec<&str>> {
  parts(text).collect()
}

/// `parts` as strings in the encoding (the Rust side of `lib/base/codec.js`' `encodeParts`; for
/// tests and for replies that go back the same way).
pub fn encode<S: AsRef<str>>(parts: &[S]) -> String {
  let mut out = String::new();
  for p in parts {
    let p = p.as_ref();
    out.push_str(&p.encode_utf16().count().to_string());
    out.push(':');
    out.push_str(p);
  }
  out
}

/// An iterator over the parts of an encoded list (see the module doc).
pub struct Parts<'a> {
  text: &'a str,
  at: usize,
}

fn malformed() -> Error {
  Error::argument("malformed encoded list (expected <length>:<part>...)")
}

impl<'a> Parts<'a> {
  fn part(&mut self) -> Result<&'a str> {
    let bytes = self.text.as_bytes();
    let start = self.at;
    let mut i = start;
    let mut len = 0usize;
    while i < bytes.len() && bytes[i].is_ascii_digit() {
      len = len * 10 + (bytes[i] - b'0') as usize;
      i += 1;
      if i - start > 9 {
        return Err(malformed());
      }
    }
    let digits = i - start;
    if digits == 0 || i >= bytes.len() || bytes[i] != b':' || (digits > 1 && bytes[start] == b'0') || len > MAX_PART {
      return Err(malformed());
    }
    let from = i + 1;
    // ASCII: one byte per unit
    if let Some(slice) = bytes.get(from..from + len) {
      if slice.is_ascii() {
        self.at = from + len;
        return Ok(&self.text[from..from + len]);
      }
    }
    let rest = &self.text[from..];
    let mut units = 0usize;
    let mut end = 0usize;
    for (offset, c) in rest.char_indices() {
      if units == len {
        end = offset;
        break;
      }
      units += c.len_utf16();
      end = offset + c.len_utf8();
    }
    if units != len {
      return Err(malformed()); // past the end, or a length that splits a surrogate pair
    }
    self.at = from + end;
    Ok(&rest[..end])
  }
}

impl<'a> Iterator for Parts<'a> {
  type Item = Result<&'a str>;

  fn next(&mut self) -> Option<Result<&'a str>> {
    if self.at >= self.text.len() {
      return None;
    }
    match self.part() {
      Ok(p) => Some(Ok(p)),
      Err(e) => {
        self.at = self.text.len(); // one error ends the list
        Some(Err(e))
      }
    }
  }
}

#[cfg(test)]
mod tests {
  use super::*;
  use proptest::prelude::*;

  #[test]
  fn decodes_parts_holding_any_separator() {
    let names =
      ["", "a", "x\n1\n\nincr\n1\nvictim\n3\n1,,0", "3:abc", "{tag}", "李雷", "Ольга", "😀x", "\u{0}\r\u{1b}"];
    let text = encode(&names);
    assert_eq!(decode(&text).unwrap(), names);
    assert_eq!(decode("").unwrap(), Vec::<&str>::new());
    // lengths count UTF-16 units: an astral character is two
    assert_eq!(encode(&["😀"]), "2:😀");
    assert_eq!(decode("2:😀1:a").unwrap(), ["😀", "a"]);
  }

  #[test]
  fn refuses_anything_but_a_sequence_of_parts() {
    for bad in ["a", "1", "1:", "2:a", ":a", "-1:a", "01:a", "1:a1", "1:a:", "1:😀", "3:😀", "9999999999:x", "1a:b"]
    {
      assert!(decode(bad).is_err(), "{bad:?}");
    }
  }

  proptest! {
    #[test]
    fn round_trips_every_list(list in proptest::collection::vec(any::<String>(), 0..8)) {
      let text = encode(&list);
      let back = decode(&text).unwrap();
      prop_assert_eq!(back, list);
    }
  }
}
