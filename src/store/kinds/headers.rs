//! Each Lua script's header (its `-- KEYS`, `-- ARGV` / `-- then` and `-- Returns` lines) held
//! against the kind that encodes its calls: the numbers a call sends, the packings of indices,
//! the operation codes and the reply widths the header documents are written here from the
//! kind's own constants (the ones its encoder and decoder use), so a header that drifts from
//! its encoder, or an encoder that changes without its header, fails. The scripts read are the
//! expanded ones build.rs writes (the text Redis runs).

use super::{adaptive, budget, concurrent, fair, limit, pacer, sliding, sliding_counter};
use crate::store::redis::script::lua_script;

/// Every shipped script: its file under `lua/` and its expanded text.
const SCRIPTS: &[(&str, &str)] = &[
  ("adaptive.lua", lua_script!("adaptive")),
  ("budget.lua", lua_script!("budget")),
  ("concurrent.lua", lua_script!("concurrent")),
  ("fair.lua", lua_script!("fair")),
  ("limit.lua", lua_script!("limit")),
  ("pacer.lua", lua_script!("pacer")),
  ("pacer_block.lua", lua_script!("pacer_block")),
  ("pacer_give.lua", lua_script!("pacer_give")),
  ("pacer_undo.lua", lua_script!("pacer_undo")),
  ("quota.lua", lua_script!("quota")),
  ("rules.lua", lua_script!("rules")),
  ("sliding.lua", lua_script!("sliding")),
  ("sliding_counter.lua", lua_script!("sliding_counter")),
  ("stats.lua", lua_script!("stats")),
];

const LABELS: &[&str] = &["KEYS", "ARGV", "then", "Returns", "Notes"];

/// The header's sections (`KEYS[..]`, `ARGV[..]`, `then`, `Returns`, `Notes`), each as one line
/// of words (the comment marks and line breaks gone), in order.
fn sections(lua: &str) -> Vec<(String, String)> {
  let mut out: Vec<(String, String)> = vec![];
  for line in lua.lines().take_while(|l| l.starts_with("--")) {
    let body = line.trim_start_matches('-');
    let label = body.strip_prefix(' ').filter(|b| !b.starts_with(' ')).and_then(|b| b.split_whitespace().next());
    match label {
      Some(l) if LABELS.iter().any(|x| l.starts_with(x)) => {
        out.push((l.to_owned(), body.trim_start()[l.len()..].split_whitespace().collect::<Vec<_>>().join(" ")))
      }
      _ => {
        if let Some(last) = out.last_mut() {
          for w in body.split_whitespace() {
            last.1.push(' ');
            last.1.push_str(w);
          }
        }
      }
    }
  }
  out
}

fn script(file: &str) -> &'static str {
  SCRIPTS.iter().find(|s| s.0 == file).map(|s| s.1).expect("a listed script")
}

/// The words of `file`'s sections whose label starts with `label`.
fn section(file: &str, label: &str) -> String {
  let s = sections(script(file));
  let text: Vec<_> = s.iter().filter(|(l, _)| l.starts_with(label)).map(|(_, t)| t.as_str()).collect();
  assert!(!text.is_empty(), "{file}: no `-- {label}` section in its header");
  text.join(" ")
}

/// Asserts that `file`'s sections labelled `label` say `phrase`.
fn says(file: &str, label: &str, phrase: &str) {
  let text = section(file, label);
  assert!(
    text.contains(phrase),
    "{file}: its `-- {label}` lines do not say `{phrase}` (the encoder's layout); they say: {text}"
  );
}

/// `-2` then zeros: the reply of a call whose key holds another type, `width` numbers.
fn wrong_type_reply(width: usize) -> String {
  std::iter::once("-2").chain(std::iter::repeat_n("0", width - 1)).collect::<Vec<_>>().join(", ")
}

#[test]
fn every_script_is_listed_expanded_and_documents_keys_argv_and_returns() {
  let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/lua");
  let mut files: Vec<String> = std::fs::read_dir(dir)
    .unwrap()
    .map(|e| e.unwrap().file_name().into_string().unwrap())
    .filter(|f| f.ends_with(".lua"))
    .collect();
  files.sort();
  assert_eq!(files, SCRIPTS.iter().map(|s| s.0.to_owned()).collect::<Vec<_>>(), "every script of lua/ is listed here");
  for (file, lua) in SCRIPTS {
    assert!(!lua.contains("\n-- @include "), "{file}: build.rs left an @include line");
    let s = sections(lua);
    for label in ["ARGV", "Returns"] {
      assert!(s.iter().any(|(l, _)| l.starts_with(label)), "{file}: no `-- {label}` in its header");
    }
    // the statistics script names its keys per operation, in its ARGV lines
    assert!(s.iter().any(|(l, t)| l.starts_with("KEYS") || t.contains("KEYS[")), "{file}: its header names no KEYS");
    // the clock snippet reads ARGV[1] as the call's time: the header says so, and only then
    let clocked = lua.contains("\n-- includes/clock.lua:");
    let argv1 = s.iter().find(|(l, _)| l == "ARGV[1]" || l == "ARGV").map(|(_, t)| t.as_str()).unwrap_or("");
    assert_eq!(argv1.starts_with("now_us"), clocked, "{file}: ARGV[1] is now_us exactly when it includes the clock");
  }
}

#[test]
fn every_snippet_is_included_by_some_script() {
  fn walk(dir: &std::path::Path, found: &mut Vec<String>) {
    for e in std::fs::read_dir(dir).unwrap() {
      let p = e.unwrap().path();
      if p.is_dir() {
        walk(&p, found);
      } else {
        found.push(p.to_string_lossy().into_owned());
      }
    }
  }
  let root = concat!(env!("CARGO_MANIFEST_DIR"), "/lua/includes/");
  let mut found = vec![];
  walk(std::path::Path::new(root), &mut found);
  assert!(found.len() >= 4);
  for path in found {
    let name = path.strip_prefix(root).unwrap();
    let opening = format!("-- includes/{name}:");
    assert!(std::fs::read_to_string(&path).unwrap().starts_with(&opening), "{name} opens with `{opening}`");
    assert!(SCRIPTS.iter().any(|s| s.1.contains(&opening)), "{name} is included by no script");
  }
}

#[test]
fn headers_match_their_encoders() {
  // adaptive: the key index then WIDTH numbers per call, RESULT numbers back
  let fields = 1 + adaptive::WIDTH;
  says("adaptive.lua", "then", &format!("per call, {fields} fields"));
  assert!(script("adaptive.lua").contains(&format!("(nargs - 1) % {fields} == 0")));
  says("adaptive.lua", "then", &format!("{} pace", adaptive::PACE));
  says("adaptive.lua", "then", &format!("{} report", adaptive::REPORT));
  says("adaptive.lua", "then", &format!("{} give", adaptive::GIVE));
  says("adaptive.lua", "Returns", &wrong_type_reply(adaptive::RESULT));

  // limiter: LIMIT_FIELDS numbers per call, LIMIT_RESULT_FIELDS back
  says("limit.lua", "then", &format!("{} numbers per call", limit::LIMIT_FIELDS));
  assert!(script("limit.lua").contains(&format!("(nargs - 1) % {} ~= 0", limit::LIMIT_FIELDS)));
  says("limit.lua", "Returns", &format!("{} integers per call", limit::LIMIT_RESULT_FIELDS));
  let zeros = wrong_type_reply(limit::LIMIT_RESULT_FIELDS - 1);
  says("limit.lua", "Returns", &format!("or 0, {zeros} when the call's key holds a value of another type"));
  for (code, op) in [
    (limit::BUCKET, "bucket"),
    (limit::WINDOW, "window"),
    (limit::LEAKY, "leaky"),
    (limit::ADJUST, "adjust"),
    (limit::RESET, "reset"),
    (limit::PEEK, "peek"),
    (limit::BLOCK, "block"),
    (limit::GROUP, "group"),
    (limit::BACKOFF, "backoff"),
  ] {
    let sep = if code < 0.0 { ": " } else { " " };
    says("limit.lua", "then", &format!("{code}{sep}{op}"));
  }
  says("limit.lua", "then", &format!("{} member", limit::MEMBER));

  // pacer: a key index and a parameter set packed, quadruples of parameters, modes
  says("pacer.lua", "then", &format!("(key index * {} + parameter set) * 4 + mode", pacer::redis::KEY_SHIFT));
  assert_eq!(pacer::MEMBER_FIELDS, 4);
  says("pacer.lua", "ARGV[2]", "P quadruples <qps> <max_burst> <factor> <weight>");
  says("pacer.lua", "then", &format!("{} pace, {} rateLimit", pacer::PACE, pacer::RATE_LIMIT));
  assert_eq!(pacer::redis::REPLY_FIELDS, 2);
  says("pacer.lua", "Returns", "per member in order: delay_us (integer), watermark_before");
  // block and give-back: their ARGV lists, the script's own count check and the encoder's
  for (file, n) in [("pacer_block.lua", pacer::redis::BLOCK_ARGS), ("pacer_give.lua", pacer::redis::GIVE_ARGS)] {
    let argv = section(file, "ARGV");
    // the values, their glosses in parentheses aside
    let (mut bare, mut depth) = (String::new(), 0);
    for c in argv.chars() {
      match c {
        '(' => depth += 1,
        ')' => depth -= 1,
        _ if depth == 0 => bare.push(c),
        _ => {}
      }
    }
    assert_eq!(bare.split(',').count(), n, "{file}: ARGV lists {n} values: {argv}");
    assert!(script(file).contains(&format!("#ARGV == {n} and #KEYS == 1")), "{file} checks {n} arguments");
  }

  // concurrent: three keys per limiter, two values per operation, the packing, the codes
  says("concurrent.lua", "KEYS[3g-2]", "holders of limiter g");
  assert!(script("concurrent.lua").contains("#KEYS == 3 * G"));
  says(
    "concurrent.lua",
    "then",
    &format!("2 values per operation: <(g * {} + parameter set) * 8 + op> <id>", concurrent::SET_SHIFT),
  );
  says(
    "concurrent.lua",
    "then",
    &format!(
      "op: {} acquire, {} release, {} extend, {} poll, {} cancel, {} stats",
      concurrent::ACQUIRE,
      concurrent::RELEASE,
      concurrent::EXTEND,
      concurrent::POLL,
      concurrent::CANCEL,
      concurrent::STATS
    ),
  );
  says(
    "concurrent.lua",
    "Returns",
    &format!("-2 then zeros ({} values, {} for stats)", concurrent::REPLY_FIELDS, concurrent::CONCURRENT_RESULT_FIELDS),
  );

  // sliding: the codes, two numbers per window back
  for (code, op) in
    [(sliding::TAKE, "take"), (sliding::PEEK, "peek"), (sliding::RESET, "reset"), (sliding::BLOCK, "block")]
  {
    says("sliding.lua", "then", &format!("{code}: {op}"));
  }
  says("sliding.lua", "then", "then per window <limit> <interval_us>");
  says("sliding.lua", "Returns", "allowed (0/1), retry_after_us, then per window: remaining, retry_after_us;");

  // sliding counter: the packing, the codes, three numbers per window back
  says(
    "sliding_counter.lua",
    "then",
    &format!("<(key index * {} + parameter set) * 8 + op>", sliding_counter::KEY_SHIFT),
  );
  for (code, op) in [
    (sliding_counter::TAKE, "take"),
    (sliding_counter::PEEK, "peek"),
    (sliding_counter::RESET, "reset"),
    (sliding_counter::BLOCK, "block"),
    (sliding_counter::ADJUST, "adjust"),
  ] {
    says("sliding_counter.lua", "then", &format!("{code} {op}"));
  }
  says("sliding_counter.lua", "Returns", "then per window: remaining, retry_after_us, reset_after_us");

  // budget: five keys per budget, the packing, the codes
  assert!(script("budget.lua").contains("#KEYS % 5 == 0"));
  for k in ["KEYS[5b-4]", "KEYS[5b-3]", "KEYS[5b-2]", "KEYS[5b-1]", "KEYS[5b]"] {
    section("budget.lua", k);
  }
  says("budget.lua", "then", &format!("<(b * {} + set) * 8 + op>", budget::SET_SHIFT));
  says(
    "budget.lua",
    "then",
    &format!(
      "op: {} reserve, {} settle (amount = the actual amount), {} cancel, {} stats, {} reserve through a tenant, {} stats of a tenant",
      budget::RESERVE,
      budget::SETTLE,
      budget::CANCEL,
      budget::STATS,
      budget::RESERVE_AS,
      budget::STATS_OF
    ),
  );

  // fair: the modes
  says("fair.lua", "then", &format!("<mode ({} exact, {} approximate", fair::EXACT, fair::APPROXIMATE));
}

#[test]
fn a_drifted_header_is_caught() {
  // the parser the checks rely on: a header saying 18 where the encoder sends 17 reads as 18
  let drifted = script("adaptive.lua").replacen("per call, 17 fields", "per call, 18 fields", 1);
  let text: String = sections(&drifted).into_iter().filter(|(l, _)| l == "then").map(|(_, t)| t).collect();
  assert!(text.contains("per call, 18 fields") && !text.contains(&format!("per call, {} fields", 1 + adaptive::WIDTH)));
}

/// The fields of `kind`'s result groups `groups`, in order.
fn fields_of(kind: &str, groups: &[&str]) -> Vec<&'static str> {
  let info = super::table().into_iter().find(|k| k.name == kind).expect("a kind");
  let group = |g: &str| info.results.iter().find(|r| r.0 == g).expect("a group").1;
  groups.iter().flat_map(|g| group(g).iter().copied()).collect()
}

/// Asserts that `file`'s `Returns` lines name `fields` as words, in this order.
fn returns_in_order(file: &str, fields: &[&str]) {
  let text = section(file, "Returns");
  let words: Vec<&str> = text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).collect();
  let mut at = 0;
  for f in fields {
    match words[at..].iter().position(|w| w == f) {
      Some(i) => at += i + 1,
      None => {
        panic!("{file}: its `-- Returns` lines do not name `{f}` where the kind's result has it ({fields:?}): {text}")
      }
    }
  }
}

#[test]
fn result_names_match_the_returns_of_scripts_that_answer_them() {
  // the scripts whose reply is the layout the kind answers JS (the others are reshaped in Rust)
  returns_in_order("limit.lua", &fields_of("limit", &["entry"]));
  returns_in_order("sliding.lua", &fields_of("sliding", &["call", "window"]));
  returns_in_order("sliding_counter.lua", &fields_of("sliding_counter", &["call", "window"]));
  returns_in_order("budget.lua", &fields_of("budget", &["call", "dimension"]));
  returns_in_order("concurrent.lua", &fields_of("concurrent", &["stats"]));
  returns_in_order("fair.lua", &fields_of("fair", &["rule"]));
}
