//! The store's rules on Redis (`lua/rules.lua`): one operation per call on the rules' seven keys
//! (one hash slot). Operators' writes and each process's reads of the changes are rare (a
//! version read every 500 ms at most), so nothing here is batched.

use super::calls::malformed;
use super::script::{lua_script, Script};
use super::{Lane, RedisStore};
use crate::error::{Error, Result};
use crate::store::validate_key;
use fred::prelude::*;
use std::sync::LazyLock;

static RULES: LazyLock<Script> = LazyLock::new(|| Script::new(lua_script!("rules")));

/// The rules' keys: the table, its version, the log, the history, the rules' ends, the doors'
/// bans and their ends.
pub const RULES_KEYS: usize = 7;

/// Decodes one operation (encoded by lib/base/codec.js: its seven keys, then its arguments).
pub fn decode_rules(text: &str) -> Result<(Vec<String>, Vec<String>)> {
  let flat: Vec<&str> = crate::codec::decode(text)?;
  if flat.len() <= RULES_KEYS {
    return Err(Error::argument("malformed rules call"));
  }
  let keys: Vec<String> = flat[..RULES_KEYS].iter().map(|k| k.to_string()).collect();
  for key in &keys {
    validate_key(key)?;
  }
  let slot = fred::util::redis_keyslot(keys[0].as_bytes());
  if keys.iter().any(|k| fred::util::redis_keyslot(k.as_bytes()) != slot) {
    return Err(Error::argument("the rules' keys must share one hash slot"));
  }
  Ok((keys, flat[RULES_KEYS..].iter().map(|a| a.to_string()).collect()))
}

impl RedisStore {
  /// Runs one rules operation; its reply as strings.
  pub async fn rules_op(&self, keys: Vec<String>, args: Vec<String>, lane: &Lane) -> Result<Vec<String>> {
    let keys: Vec<Key> = keys.into_iter().map(Key::from).collect();
    let args: Vec<Value> = args.into_iter().map(|a| Value::String(a.into())).collect();
    let reply = self.run(lane, &RULES, keys, args).await?;
    reply
      .iter()
      .map(|v| match v {
        Value::String(s) => Ok(s.to_string()),
        Value::Bytes(b) => Ok(String::from_utf8_lossy(b).into_owned()),
        Value::Integer(x) => Ok(x.to_string()),
        _ => Err(malformed("rules")),
      })
      .collect()
  }
}

#[cfg(test)]
mod tests {
  use super::*;

  #[test]
  fn decodes_seven_keys_of_one_slot_then_the_arguments() {
    let keys = [
      "s:rules:{r}",
      "s:rules:{r}:v",
      "s:rules:{r}:log",
      "s:rules:{r}:history",
      "s:rules:{r}:ends",
      "s:rules:{r}:bans",
      "s:rules:{r}:ban-ends",
    ];
    let mut parts: Vec<&str> = keys.to_vec();
    parts.extend(["since", "-1"]);
    let (k, a) = decode_rules(&crate::codec::encode(&parts)).unwrap();
    assert_eq!(k, keys);
    assert_eq!(a, ["since", "-1"]);
    assert!(decode_rules(&crate::codec::encode(&keys)).is_err());
    let mut split = parts.clone();
    split[1] = "s:rules:{other}:v";
    assert!(decode_rules(&crate::codec::encode(&split)).is_err());
  }
}
