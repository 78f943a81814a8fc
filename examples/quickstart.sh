#!/usr/bin/env bash
# The README's first command (`npm run quickstart`): install, build, then the whole loop on the
# embedded default — a local specs repo, the local backend, a file store — from commit to
# Succeeded, with the status read back from git.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
if [ ! -d node_modules ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  npm ci --no-audit --no-fund
fi
npm run build --silent
adv() { node "$root/dist/cli/adv.js" "$@"; }

echo "== the example specs repo in specs/ validates"
adv validate specs/

demo=${ADV_QUICKSTART_DIR:-$root/.adv/quickstart}
rm -rf "$demo"
mkdir -p "$(dirname "$demo")"
echo
echo "== adv init $demo"
adv init "$demo" >/dev/null
cd "$demo"
git log --oneline main

echo
echo "== adv controller --once (reconcile until every run has finished)"
adv controller --once --poll-interval 200ms --log-level warn

echo
echo "== adv get runs"
adv get runs
echo
echo "== git log --oneline adventuretime/status"
git log --oneline adventuretime/status
echo
echo "== adv describe run hello"
adv describe run hello
echo
echo "Your specs repo is $demo: edit runs/hello.yaml, commit, and run 'adv controller --once' there again."
