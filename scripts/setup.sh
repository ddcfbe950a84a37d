#!/usr/bin/env bash
# Shared set-up of the README's commands: npm dependencies, then the native addon (debug
# build; cargo makes it a no-op when nothing changed). `npm run build` makes a release build.
set -euo pipefail
cd "$(dirname "$0")/.."

command -v cargo >/dev/null 2>&1 || { echo "sluice needs a Rust toolchain (cargo) to build its addon" >&2; exit 1; }
if [ ! -x node_modules/.bin/napi ] || [ ! -x node_modules/.bin/vitest ]; then
  echo "== npm install"
  # not `npm ci`: npm 11 rejects its own lock file here (optional per-platform packages of a
  # transitive dependency of @napi-rs/cli are recorded without versions); the lock is still used
  npm install --no-audit --no-fund
fi
if [ "${SLUICE_SKIP_BUILD:-}" != "1" ]; then
  echo "== building the addon"
  npx napi build --platform --js index.js --dts index.d.ts
fi
