#!/usr/bin/env bash
# The whole test suite, on real servers: installs what it needs with apt-get where it can,
# builds the addon, starts a standalone Redis and a 3-node Redis Cluster on free loopback ports
# (a redis-server on PATH), runs the lint, the Rust suite (unit, property, conformance against
# the Lua) and the JS suite, stops the servers.
# SLUICE_TEST_REDIS_URL=redis://host:port: the standalone suites against that server instead,
# no servers started; the tests on the suite's cluster are skipped inside their files (the
# cluster-only ones counted as skipped by vitest) and, without redis-server, the files that
# start servers of their own are left out and listed. scripts/test-plan.js decides both. Bash 3.2 (macOS) runs it too.
set -euo pipefail
cd "$(dirname "$0")/.."

# redis-server (standalone and cluster), chromium (the dashboard's browser test, through
# puppeteer-core) and openssl (the TLS suite's certificates): installed with apt-get when
# missing, where apt-get is (as root, or with sudo); elsewhere the files that need them are
# skipped, or, for redis-server without SLUICE_TEST_REDIS_URL, the suite stops here and says why
need=$(node scripts/test-plan.js apt)
if [ -n "$need" ]; then
  echo "== installing $need (apt-get)"
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  # shellcheck disable=SC2086 # one word per package
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $need >/dev/null
fi
if [ -z "${SLUICE_CHROMIUM:-}" ] && ! command -v chromium >/dev/null 2>&1; then export SLUICE_TEST_NO_BROWSER=1; fi

bash scripts/setup.sh
if [ "${CI:-}" = "true" ] && [ -n "$(git status --porcelain -- index.js index.d.ts 2>/dev/null)" ]; then
  echo "generated index.js / index.d.ts differ from the committed ones: run npm run build and commit" >&2
  git --no-pager diff --stat -- index.js index.d.ts >&2
  exit 1
fi

stop_servers=true
rust_skip=()
if [ -n "${SLUICE_TEST_REDIS_URL:-}" ]; then
  echo "== Redis: the given server (SLUICE_TEST_REDIS_URL), no cluster"
  export SLUICE_REDIS_URL="$SLUICE_TEST_REDIS_URL"
  unset SLUICE_REDIS_CLUSTER
  stop_servers=false
  rust_skip=(--skip _on_cluster) # the conformance tests on a cluster
else
  echo "== starting Redis (standalone + cluster)"
  eval "$(node scripts/redis-servers.js start)"
fi
trap 'if $stop_servers; then node scripts/redis-servers.js stop; fi' EXIT
echo "standalone: $SLUICE_REDIS_URL"
echo "cluster:    ${SLUICE_REDIS_CLUSTER:-none}"

echo "== lint: rustfmt, clippy (both feature sets), prettier, tsc (tests, lib/'s contracts), lib/'s layers"
cargo fmt --check
cargo clippy --no-default-features --all-targets -- -D warnings
cargo clippy --all-targets -- -D warnings
npx prettier --check . >/dev/null
npx tsc -p tsconfig.json
npx tsc -p tsconfig.contracts.json # lib/'s contracts: kinds, store, door adapters
node scripts/layers.js

logs=$(mktemp -d)
trap 'if $stop_servers; then node scripts/redis-servers.js stop; fi; rm -rf "$logs"' EXIT

echo "== Rust suite"
# --lib --tests: the unit, property and conformance tests (there are no doc tests)
cargo test --no-default-features --lib --tests -- ${rust_skip[@]+"${rust_skip[@]}"} 2>&1 | tee "$logs/rust"

echo "== JS suite"
excluded=()
while IFS= read -r file; do excluded+=(--exclude "$file"); done < <(node scripts/test-plan.js skips 2>"$logs/skips")
NO_COLOR=1 npx vitest run ${excluded[@]+"${excluded[@]}"} 2>&1 | tee "$logs/js"

echo "== keyspace: every key sluice wrote during the suites has a TTL"
node scripts/ttl-scan.js

rust=$(grep -oE 'test result: ok\. [0-9]+ passed' "$logs/rust" | awk '{ s += $4 } END { print s + 0 }')
js=$(sed 's/\x1b\[[0-9;]*m//g' "$logs/js" | grep -E '^ +Tests +[0-9]+ passed' | grep -oE '[0-9]+ passed' | head -1 | grep -oE '[0-9]+')
js_skipped=$(sed 's/\x1b\[[0-9;]*m//g' "$logs/js" | grep -E '^ +Tests +' | grep -oE '[0-9]+ skipped' | head -1 | grep -oE '[0-9]+' || true)
echo "== summary: Rust $rust, JS ${js:-0}"
if [ ${#rust_skip[@]} -gt 0 ] || [ -s "$logs/skips" ] || [ -n "${SLUICE_TEST_NO_BROWSER:-}" ]; then
  echo "== skipped on this machine (the rest ran):"
  [ ${#rust_skip[@]} -eq 0 ] || echo "  the Rust conformance tests on a cluster (*_on_cluster): no cluster"
  [ ${#rust_skip[@]} -eq 0 ] || echo "  the JS tests on the suite's cluster, inside their files: no cluster (vitest: ${js_skipped:-0} skipped in all)"
  cat "$logs/skips"
  [ -z "${SLUICE_TEST_NO_BROWSER:-}" ] || echo "  the dashboard's browser test: no chromium (set SLUICE_CHROMIUM to a Chrome or Chromium)"
fi
echo "$((rust + ${js:-0})) passed, 0 failed"
