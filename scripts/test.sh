#!/usr/bin/env bash
# The whole test suite, on real servers: installs redis-server and chromium if missing, builds the addon,
# starts a standalone Redis and a 3-node Redis Cluster on free loopback ports, runs the Rust
# suite (unit, property, conformance against the Lua) and the JS suite, stops the servers.
set -euo pipefail
cd "$(dirname "$0")/.."

# Debian's packages the suite drives: redis-server (standalone and cluster), chromium (the
# dashboard's browser test, through puppeteer-core) and openssl (the TLS suite's certificates)
need=()
if ! command -v redis-server >/dev/null 2>&1 || ! command -v redis-cli >/dev/null 2>&1; then need+=(redis-server); fi
if [ -z "${SLUICE_CHROMIUM:-}" ] && ! command -v chromium >/dev/null 2>&1; then need+=(chromium); fi
if ! command -v openssl >/dev/null 2>&1; then need+=(openssl); fi # the TLS suite makes its CA
if [ ${#need[@]} -gt 0 ]; then
  echo "== installing ${need[*]} (apt-get)"
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}" >/dev/null
fi

bash scripts/setup.sh
if [ "${CI:-}" = "true" ] && [ -n "$(git status --porcelain -- index.js index.d.ts 2>/dev/null)" ]; then
  echo "generated index.js / index.d.ts differ from the committed ones: run npm run build and commit" >&2
  git --no-pager diff --stat -- index.js index.d.ts >&2
  exit 1
fi

echo "== starting Redis (standalone + cluster)"
eval "$(node scripts/redis-servers.js start)"
trap 'node scripts/redis-servers.js stop' EXIT
echo "standalone: $SLUICE_REDIS_URL"
echo "cluster:    $SLUICE_REDIS_CLUSTER"

echo "== lint: rustfmt, clippy (both feature sets), prettier, tsc (tests, lib/'s contracts), lib/'s layers"
cargo fmt --check
cargo clippy --no-default-features --all-targets -- -D warnings
cargo clippy --all-targets -- -D warnings
npx prettier --check . >/dev/null
npx tsc -p tsconfig.json
npx tsc -p tsconfig.contracts.json # lib/'s contracts: kinds, store, door adapters
node scripts/layers.js

logs=$(mktemp -d)
trap 'node scripts/redis-servers.js stop; rm -rf "$logs"' EXIT

echo "== Rust suite"
# --lib --tests: the unit, property and conformance tests (there are no doc tests)
cargo test --no-default-features --lib --tests 2>&1 | tee "$logs/rust"

echo "== JS suite"
NO_COLOR=1 npx vitest run 2>&1 | tee "$logs/js"

echo "== keyspace: every key sluice wrote during the suites has a TTL"
node scripts/ttl-scan.js

rust=$(grep -oE 'test result: ok\. [0-9]+ passed' "$logs/rust" | awk '{ s += $4 } END { print s + 0 }')
js=$(sed 's/\x1b\[[0-9;]*m//g' "$logs/js" | grep -E '^ +Tests +[0-9]+ passed' | grep -oE '[0-9]+ passed' | head -1 | grep -oE '[0-9]+')
echo "== summary: Rust $rust, JS ${js:-0}"
echo "$((rust + ${js:-0})) passed, 0 failed"
