//! The build's own steps: the Node-API link setup (with the `napi` feature), and the Lua
//! scripts expanded. Each script `lua/<name>.lua` is written to `$OUT_DIR/lua/<name>.lua` with
//! every line `-- @include <snippet>` replaced by the text of `lua/includes/<snippet>.lua`
//! (itself expanded the same way), as BullMQ assembles its scripts: the Rust side embeds the
//! expanded text (`lua_script!`, src/store/redis/script.rs), so the SHA1 Redis sees is the
//! expanded script's. A snippet not found, included twice into one script or including itself
//! fails the build.

use std::fs;
use std::path::Path;

const INCLUDE: &str = "-- @include ";

fn main() {
  #[cfg(feature = "napi")]
  napi_build::setup();
  println!("cargo:rerun-if-changed=build.rs");
  println!("cargo:rerun-if-changed=lua");
  let out = Path::new(&std::env::var("OUT_DIR").expect("OUT_DIR")).join("lua");
  fs::create_dir_all(&out).expect("create OUT_DIR/lua");
  let mut names: Vec<_> = fs::read_dir("lua")
    .expect("read lua/")
    .map(|e| e.expect("read lua/").path())
    .filter(|p| p.extension().is_some_and(|x| x == "lua"))
    .collect();
  names.sort();
  for path in names {
    let mut seen = vec![];
    let text = expand(&path, &mut seen, &mut vec![]);
    fs::write(out.join(path.file_name().expect("file name")), text).expect("write an expanded script");
  }
}

/// The text of `path` with its `-- @include` lines expanded; `seen`: the snippets this script
/// already holds, `stack`: the snippets being expanded (a cycle's witness).
fn expand(path: &Path, seen: &mut Vec<String>, stack: &mut Vec<String>) -> String {
  let src = fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
  let mut text = String::with_capacity(src.len());
  for line in src.split_inclusive('\n') {
    let Some(name) = line.trim_end().strip_prefix(INCLUDE) else {
      text.push_str(line);
      continue;
    };
    let name = name.trim().to_owned();
    let at = path.display();
    assert!(!stack.contains(&name), "{at}: `{INCLUDE}{name}` includes itself");
    assert!(!seen.contains(&name), "{at}: `{INCLUDE}{name}` a second time in one script");
    let snippet = Path::new("lua/includes").join(format!("{name}.lua"));
    assert!(snippet.is_file(), "{at}: `{INCLUDE}{name}`: no file {}", snippet.display());
    seen.push(name.clone());
    stack.push(name);
    let body = expand(&snippet, seen, stack);
    stack.pop();
    text.push_str(&body);
    if !body.ends_with('\n') {
      text.push('\n');
    }
  }
  text
}
