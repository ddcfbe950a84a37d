#!/usr/bin/env bash
# Instructions Redis executes per decision, counted by callgrind (repeatable, unlike timings
# on a shared VM). Usage: bash bench/callgrind.sh KEYS [KIND]
#   KEYS: 10000, or 1 for a hot key; KIND: pacer (default), bucket, window, leaky, sliding, concurrent
#   INFLIGHT=1 (default 256): calls in flight; CG_N (default 64000): decisions measured;
#   STATS=0: statistics off (on by default, as for users)
# Needs valgrind (apt-get install valgrind) and a built addon (npm run build).
set -euo pipefail
cd "$(dirname "$0")/.."
keys=${1:-10000}
kind=${2:-pacer}
dir=$(mktemp -d)
port=$(node -e "const s=require('net').createServer().listen(0,'127.0.0.1',()=>{console.log(s.address().port);s.close()})")
(cd "$dir" && exec valgrind --tool=callgrind --callgrind-out-file="$dir/redis.out" \
  redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no >"$dir/log" 2>&1) &
for _ in $(seq 1 100); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.2; done
pid=$(pgrep -f "valgrind.*--port $port" | head -1)
load() { URL="redis://127.0.0.1:$port" KEYS="$keys" KIND="$kind" N="$1" node bench/callgrind-load.js; }
load 10000                       # warm-up: keys exist, scripts loaded
callgrind_control -z "$pid" >/dev/null 2>&1
load "${CG_N:-64000}"
callgrind_control -d "$pid" >/dev/null 2>&1
kill "$pid"; sleep 0.5
total=$(callgrind_annotate "$(ls "$dir"/redis.out.* | head -1)" 2>/dev/null | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1}')
echo "kind=$kind keys=$keys instructions per decision: $((total / ${CG_N:-64000}))"
rm -rf "$dir"
