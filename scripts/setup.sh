#!/usr/bin/env bash
# Shared set-up of the README's commands (demo, test, bench): npm dependencies from the lock
# file, then the native addon, a release build (cargo makes it a no-op when nothing changed).
# One profile for every command, so a debug build never replaces a release one under the same
# file name. `npm run build` is the same build.
set -euo pipefail
cd "$(dirname "$0")/.."

command -v cargo >/dev/null 2>&1 || { echo "building sluice from source needs a Rust toolchain (cargo); the npm package needs none" >&2; exit 1; }
if [ ! -x node_modules/.bin/napi ] || [ ! -x node_modules/.bin/vitest ]; then
  echo "== npm ci"
  # the lock lists every platform's optional packages (scripts/fix-lock.js)
  npm ci --no-audit --no-fund
fi
if [ "${SLUICE_SKIP_BUILD:-}" != "1" ]; then
  echo "== building the addon (release)"
  npx napi build --platform --release --js index.js --dts index.d.ts
fi
