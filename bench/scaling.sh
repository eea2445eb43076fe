#!/usr/bin/env bash
# Scaling over storage servers: aggregate IOR bandwidth (file per task and
# shared file, 2 client hosts × 2 tasks, every byte read back checked)
# against the number of storage servers (1, 2, 4, 6), each a network
# namespace whose link is rate-limited with tc tbf and whose drives (in
# memory) are slowed by the speed model, so that links and drives rather
# than this machine's CPUs bound each server. The harness is the Go test
# TestScalingBench (cmd/poolfs/scaling_bench_test.go); docs/scaling.md
# explains the method. It prints the table and writes OUT/scaling.md,
# OUT/scaling.json and the chart OUT/scaling.svg; then the metadata
# points (TestScalingMetaBench: mdtest from 1, 2, 4 client hosts through 1,
# 2, 4 meta servers beside pgbench on the same PostgreSQL) into
# OUT/scaling-meta.md.
#
#   bench/scaling.sh [SERVERS=1,2,4,6] [OUT=./bench/out/scaling]
#
# Environment (defaults in the test): POOLFS_SCALING_SERVER_MBIT (32),
# POOLFS_SCALING_CLIENT_MBIT (256), POOLFS_SCALING_MB (16: MiB each task
# writes per server), POOLFS_SCALING_MODEL (ssd), POOLFS_SCALING_SCALE
# (0.005), POOLFS_SCALING_CASES (fpp,shared: the IOR cases to run; the
# table shows 0 for the others), POOLFS_SCALING_META (1; 0 skips the
# metadata points), POOLFS_SCALING_IOR (1; 0 runs the metadata points
# only), POOLFS_SCALING_META_POINTS (1x1,2x2,4x4,4x1: the
# metadata points to run, client hosts x metadata servers). Needs root,
# ip, tc, nsenter and PostgreSQL (scripts/deps.sh test). Bounded: each point writes 4 × SERVERS × MB MiB twice; the whole
# run is stopped after 20 minutes. Interrupted or not, it leaves no
# namespace, process or memory-backed drive behind.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
servers=${1:-1,2,4,6}
out=$(realpath -m "${2:-$root/bench/out/scaling}")
mkdir -p "$out"

# cleanup removes what a test binary that was killed left: the
# namespaces of its labs (with the processes still in them: PostgreSQL
# changes user and so outlives its parent) and its in-memory drives.
cleanup() {
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep '^netlab-' || true); do
    pid=${ns#netlab-}; pid=${pid%%-*}
    kill -0 "$pid" 2>/dev/null && continue # a live test owns it
    for p in $(ip netns pids "$ns" 2>/dev/null); do kill -9 "$p" 2>/dev/null || true; done
    ip netns del "$ns" 2>/dev/null || true
  done
  for d in /dev/shm/poolfs-scaling-*; do
    [ -e "$d" ] || continue
    pid=${d#/dev/shm/poolfs-scaling-}; pid=${pid%%-*}
    kill -0 "$pid" 2>/dev/null || rm -rf "$d"
  done
}
trap cleanup EXIT
trap 'exit 130' INT TERM

cd "$root"
tests='^TestScaling(Meta)?Bench$'
[ "${POOLFS_SCALING_META:-1}" = 0 ] && tests='^TestScalingBench$'
[ "${POOLFS_SCALING_IOR:-1}" = 0 ] && tests='^TestScalingMetaBench$'
echo "poolfs $(git rev-parse --short HEAD 2>/dev/null || echo '?'), $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) CPUs, $(uname -r)"
POOLFS_SCALING=1 POOLFS_SCALING_SERVERS=$servers POOLFS_SCALING_OUT=$out \
  go test -count=1 -failfast -run "$tests" -v -timeout 20m ./cmd/poolfs/ 2>&1 |
  grep --line-buffered -v '^=== RUN' | tee "$out/scaling.log"
[ "${POOLFS_SCALING_IOR:-1}" = 0 ] || echo "chart: $out/scaling.svg"
