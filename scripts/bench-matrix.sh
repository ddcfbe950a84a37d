#!/usr/bin/env bash
# The limiter family's server-pattern benchmark (bench/run.js, suite limiters) on the
# installed Redis 7 and on the matrix's Valkey 8 and Redis 8 (the wrappers scripts/matrix.sh
# writes under ${SLUICE_MATRIX_WORK:-/var/tmp/sluice-matrix}; run `npm run test:matrix` once
# first), one after the other in the same run; bench/run.js starts each server from PATH.
# Each server's table goes to bench/results/matrix-<server>.md, the load average before each.
# Same variables as bench/run.js (defaults here: 1 round, hot key 1 in flight and 10k keys
# 256 in flight, sluice's bucket and window against rate-limiter-flexible).
set -euo pipefail
cd "$(dirname "$0")/.."
WORK=${SLUICE_MATRIX_WORK:-/var/tmp/sluice-matrix}
export SLUICE_BENCH_NO_BUILD=1 BENCH_SUITES=limiters BENCH_PATTERNS=server
export BENCH_ROUNDS=${BENCH_ROUNDS:-1} BENCH_SCENARIOS=${BENCH_SCENARIOS:-1x1,10000x256}
export BENCH_LIMITER_IMPLS=${BENCH_LIMITER_IMPLS:-sluice-bucket,sluice-window,rate-limiter-flexible}
unset SLUICE_REDIS_URL
mkdir -p bench/results
for server in redis7 valkey redis; do
  path=$PATH
  [ "$server" = redis7 ] || path="$WORK/$server/bin:$PATH"
  echo "== $(PATH=$path redis-server --version | sed 's/ sha=.*//'); $(uptime | sed 's/.*load/load/')"
  PATH=$path node bench/run.js >/dev/null
  cp bench/results/latest.md "bench/results/matrix-$server.md"
  cat "bench/results/matrix-$server.md"
done
