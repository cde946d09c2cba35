#!/usr/bin/env bash
# Time `make demo` as a newcomer meets it: clone this repository (its committed HEAD) into an
# empty temporary folder, run `make demo` there, and print the per-stage table (wall and CPU).
#   scripts/time_demo.sh                      # the quick demo
#   scripts/time_demo.sh FULL=1               # the full 208-clip demo
#   KEEP=1 scripts/time_demo.sh               # keep the clone (its path is printed)
# Arguments are passed to make (e.g. TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu).
# pip's wheel cache (~/.cache/pip) is used as usual, so a second run times a cached install.
set -euo pipefail

repo=$(git -C "$(dirname "$0")/.." rev-parse --show-toplevel)
work=$(mktemp -d "${TMPDIR:-/tmp}/audit-demo-XXXXXX")
cleanup() { if [ "${KEEP:-}" = 1 ]; then echo "clone kept in $work/audit-engine"; else rm -rf "$work"; fi; }
trap cleanup EXIT

git clone --quiet "$repo" "$work/audit-engine"
cd "$work/audit-engine"
echo "timing make demo $* in $work/audit-engine (commit $(git rev-parse --short HEAD)); log: $work/make-demo.log"
start=$(date +%s)
set +e
make demo "$@" >"$work/make-demo.log" 2>&1
rc=$?
set -e
end=$(date +%s)
recipe=demo
for arg in "$@"; do case "$arg" in FULL=?*) recipe=demo-full ;; esac; done
if [ $rc -ne 0 ]; then
  tail -n 40 "$work/make-demo.log" >&2
  echo "make demo failed (exit $rc)" >&2
  KEEP=1
  exit $rc
fi
scripts/demo_stage.sh --table "runs/$recipe-times.tsv"
echo "make demo: $((end - start)) s wall from a fresh clone"
