#!/usr/bin/env bash
# Measures the rebuilds that `poolfs plan rebuild` predicts (BENCHMARKS.md,
# "Planning: predictions against measurements"):
#
#   bench/plan-validate.sh [WORKDIR=./bench/out/plan]
#
# Runs `poolfs bench rebuild` (emulated hdd-7200 drives at 0.02x, 8+2,
# 256 KiB unit, sequential client load, default priority, no further
# no-load failures) for 24, 60 and 120 drives, declustered and grouped,
# each layout with a fill that keeps its rebuild between about 15 s and
# 2 minutes, then prints `poolfs plan rebuild --from-bench` for each JSON:
# the measured and predicted times side by side.
set -euo pipefail
work=${1:-./bench/out/plan}
source "$(dirname "$0")/lib.sh"
bench_build
mkdir -p "$work"
run() { # DRIVES LAYOUT FILL
  local out="$work/rebuild-$1-$2"
  [ -s "$out.json" ] && [ -z "${PLAN_REMEASURE:-}" ] && return 0
  "$bin" bench rebuild --drives "$1" --layouts "$2" --fill "$3" --no-load none --out "$out" \
    > "$out.log" 2>&1 || { cat "$out.log"; exit 1; }
  cat "$out.log"
}
run 24 declustered 512M
run 24 grouped 512M
run 60 declustered 3G
run 60 grouped 1G
run 120 declustered 8G
run 120 grouped 2G
files=("$work"/rebuild-*.json)
"$bin" plan rebuild --from-bench "$(IFS=,; echo "${files[*]}")"
