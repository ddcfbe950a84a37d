#!/usr/bin/env bash
# The server matrix. Valkey 8 and Redis 8 come from Debian 13's packages, run on this
# Debian 12 machine from a minimal Debian 13 root (debootstrap, once, under
# ${SLUICE_MATRIX_ROOT:-/var/tmp/sluice-deb13}) with that root's libraries. For each server, a
# standalone server and a 3-master cluster are started and the Redis suites run against them
# (every kind standalone and cluster, script keys, eviction, ACL, direct lane, Sentinel with the
# server's own sentinel mode, HTTP doors, sluice/bullmq) and the Rust conformance tests (every
# kind's model against its Lua, standalone and cluster). Needs root (debootstrap, chroot apt-get). Prints per server what
# passed. Measured here: debootstrap 82 s, the two packages 13 s, Valkey 60 s, Redis 8 115 s.
# Then the sluice/nestjs suite on NestJS 11 (npm test runs it on 12): 17 s.
#   npm run test:matrix            both servers
#   SERVERS=valkey npm run test:matrix
#   SLUICE_MATRIX_RETRY=1 npm run test:matrix   a failed test runs once more (.ci/run sets it)
# Exits 1 if any suite failed on any server.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=${SLUICE_MATRIX_ROOT:-/var/tmp/sluice-deb13}
WORK=${SLUICE_MATRIX_WORK:-/var/tmp/sluice-matrix}
SERVERS=${SERVERS:-valkey redis}
SUITES=(limiters sliding sliding-counter quota fair pacer concurrent wrongtype block direct-lane
  script-keys eviction acl sentinel http http-cluster http-windows-atomic bullmq bullmq-fair budget)
# the Rust conformance tests: every kind's model against its Lua, standalone and cluster
CONFORMANCE=(conformance limiters_conformance windows_conformance sliding_counter_conformance
  budget_conformance adaptive_conformance registry)

if [ ! -x "$ROOT/usr/bin/valkey-server" ] || [ ! -x "$ROOT/usr/bin/redis-server" ]; then
  command -v debootstrap >/dev/null || { apt-get update -qq; DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null; }
  [ -x "$ROOT/usr/bin/apt-get" ] || debootstrap --variant=minbase trixie "$ROOT" http://deb.debian.org/debian >/dev/null
  chroot "$ROOT" sh -c 'apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends valkey-server redis-server >/dev/null'
fi

summary=()
failed=0
for server in $SERVERS; do
  bin="$WORK/$server/bin"
  mkdir -p "$bin" "$WORK/$server/scripts"
  # the server binary of the Debian 13 root, run here with that root's loader and libraries
  cat >"$bin/redis-server" <<WRAP
#!/bin/sh
exec $ROOT/lib64/ld-linux-x86-64.so.2 --library-path $ROOT/usr/lib/x86_64-linux-gnu:$ROOT/lib/x86_64-linux-gnu $ROOT/usr/bin/$server-server "\$@"
WRAP
  chmod +x "$bin/redis-server"
  version=$(PATH="$bin:$PATH" redis-server --version | sed 's/ sha=.*//')
  # the suite's server script, with its state under $WORK/$server (not the checkout's)
  cp scripts/redis-servers.js "$WORK/$server/scripts/"
  echo "== $version"
  eval "$(PATH="$bin:$PATH" node "$WORK/$server/scripts/redis-servers.js" start)"
  set +e
  # NO_COLOR: vitest colours its output under CI=true, and the summary below reads it as text
  PATH="$bin:$PATH" NO_COLOR=1 npx vitest run ${SLUICE_MATRIX_RETRY:+--retry="$SLUICE_MATRIX_RETRY"} "${SUITES[@]/#/__tests__/}" 2>&1 |
    tee "$WORK/$server/vitest.log" | grep -E '×|Test Files|Tests '
  status=${PIPESTATUS[0]}
  cargo test --no-default-features "${CONFORMANCE[@]/#/--test=}" 2>&1 | tee "$WORK/$server/cargo.log" |
    grep -E '^test result|FAILED|panicked'
  rstatus=${PIPESTATUS[0]}
  set -e
  node "$WORK/$server/scripts/redis-servers.js" stop
  [ "$status" -eq 0 ] && [ "$rstatus" -eq 0 ] || failed=1
  rust=$(grep -E '^test result' "$WORK/$server/cargo.log" | awk '{p+=$4; f+=$6} END {print p" passed, "f" failed"}' || true)
  js=$(sed 's/\x1b\[[0-9;]*m//g' "$WORK/$server/vitest.log" | grep -E '^ +Tests ' | sed 's/^ *//' || true)
  summary+=("$version: JS ${js:-(no summary)} (exit $status); Rust conformance $rust (exit $rstatus)")
done
# NestJS 11 (issue 40): `npm test` runs the sluice/nestjs suite on NestJS 12 (the lock file's);
# here it runs on NestJS 11's packages, installed in place for the run (a few seconds from npm's
# cache), and the lock file's versions are put back after, whatever the run gave. On this
# machine's redis-server (Debian's), standalone and cluster.
NEST_PACKAGES=(common core platform-express platform-fastify)
nest_locked=()
for p in "${NEST_PACKAGES[@]}"; do
  nest_locked+=("@nestjs/$p@$(node -p "require('./node_modules/@nestjs/$p/package.json').version")")
done
# --legacy-peer-deps: @nestjs/graphql and @nestjs/apollo (devDependencies of NestJS 12's GraphQL
# test, not run here) ask for NestJS 12 as a peer
restore_nest() { npm install --no-save --no-audit --no-fund --legacy-peer-deps "${nest_locked[@]}" >/dev/null 2>&1; }
trap restore_nest EXIT
npm install --no-save --no-audit --no-fund --legacy-peer-deps $(printf '@nestjs/%s@11 ' "${NEST_PACKAGES[@]}") >/dev/null
nest=$(node -p "'NestJS ' + require('@nestjs/core/package.json').version")
echo "== $nest"
eval "$(node scripts/redis-servers.js start)"
set +e
NO_COLOR=1 npx vitest run ${SLUICE_MATRIX_RETRY:+--retry="$SLUICE_MATRIX_RETRY"} __tests__/doors-nestjs.test.ts 2>&1 |
  tee "$WORK/nestjs11-vitest.log" | grep -E '×|Test Files|Tests '
nstatus=${PIPESTATUS[0]}
set -e
node scripts/redis-servers.js stop
restore_nest
trap - EXIT
[ "$nstatus" -eq 0 ] || failed=1
js=$(sed 's/\x1b\[[0-9;]*m//g' "$WORK/nestjs11-vitest.log" | grep -E '^ +Tests ' | sed 's/^ *//' || true)
summary+=("$nest (sluice/nestjs suite): JS ${js:-(no summary)} (exit $nstatus)")

echo "== matrix"
printf '%s\n' "${summary[@]}"
exit $failed
