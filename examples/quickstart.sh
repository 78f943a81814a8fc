#!/usr/bin/env bash
# The README's first command (`npm run quickstart`): install, build, validate the example specs.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -d node_modules ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  npm ci --no-audit --no-fund
fi
npm run build --silent
node dist/cli/adv.js validate specs/
