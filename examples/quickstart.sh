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
if adv get runs -o json | grep -q '"phase": "Failed"'; then echo "quickstart: a run failed" >&2; exit 1; fi
adv get dags -o json | grep -q '"phase": "Succeeded"' || { echo "quickstart: the pipeline DAG did not succeed" >&2; exit 1; }
echo
echo "== git log --oneline adventuretime/status"
git log --oneline adventuretime/status
echo
echo "== adv describe run hello"
adv describe run hello
echo
echo "== adv get dags"
adv get dags
echo
echo "== adv describe dag pipeline (tokenize → train → rollouts)"
adv describe dag pipeline
echo
echo "== adv dag graph pipeline"
adv dag graph pipeline
echo
echo "== the rollouts the DAG's last node published"
cat .git/adventuretime/store/runs/pipeline.rollouts/outputs/samples/samples.json
echo
echo "Your specs repo is $demo: edit runs/hello.yaml or dags/pipeline.yaml, commit, and run 'adv controller --once' there again."
