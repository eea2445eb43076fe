#!/usr/bin/env bash
# Several readers of one shared file through the poolfs FUSE mount: IOR's
# N-to-1 read (every task reads its part of one file, segmented: a
# contiguous block each; strided: the tasks' transfers interleaved) against
# file-per-task read (every task its own file) in the same run, with 2, 4
# and 8 task processes, through the page cache and with O_DIRECT. The
# target is an N-to-1 read of at least 90% of file-per-task.
#
#   bench/shared.sh [BLOCK=128m] [WORKDIR=./bench/out/shared]
#
# BLOCK is what each task reads (IOR -b; the shared file holds N blocks).
# POOLFS_SHARED_TRANSFERS sets the transfer sizes (default "1m 4m"),
# POOLFS_SHARED_TASKS the task counts (default "2 4 8"), POOLFS_MOUNT_FLAGS
# adds `poolfs up` flags. The pool is 12 drives, 8+2, 1 MiB units (a stripe
# holds 8 MiB). Each file is written once (-w -k), caches are dropped
# before every read, and every read is -r -C (task i reads what task i+1
# wrote, so nothing comes from the writer's caches), every byte checked.
# Each figure is the median of POOLFS_BENCH_REPS (default 1) reads. Needs
# root and /dev/fuse. Prints a Markdown table.
set -euo pipefail
block=${1:-128m}
work=${2:-./bench/out/shared}
transfers=${POOLFS_SHARED_TRANSFERS:-1m 4m}
tasks=${POOLFS_SHARED_TASKS:-2 4 8}
reps=${POOLFS_BENCH_REPS:-1}
source "$(dirname "$0")/lib.sh"
bench_build
rm -rf "$work"; mkdir -p "$work"/mnt; work=$(cd "$work" && pwd)
haltpoll_apply
cleanup() {
  haltpoll_restore
  stop_all "$work/mnt"
  rm -rf "$work/cluster"
}
trap cleanup EXIT

"$bin" up -c "$work/cluster" --listen 127.0.0.1:0 --drives 12 --scheme 8+2 --unit 1M --drive-size 2G \
  ${POOLFS_MOUNT_FLAGS:-} --mount "$work/mnt" >"$work/up.log" 2>&1 & pids+=($!)
waitmount "$work/mnt"
mkdir -p "$work/mnt/ior"

# ior ARGS... runs poolfs bench ior on the mount; prints the mean MiB/s
# of its last phase.
ior() {
  "$bin" bench ior --dir "$work/mnt/ior" -b "$block" "$@" --json "$work/ior.json" >/dev/null 2>"$work/ior.err" ||
    { cat "$work/ior.err" >&2; exit 1; }
  python3 -c "import json,sys; print(round(json.load(open(sys.argv[1]))['ior']['runs'][0]['phases'][-1]['bw_mib_s']['mean']))" "$work/ior.json"
}
median() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : int((a[NR/2]+a[NR/2+1])/2))}'; }

haltpoll_line
echo "mount: poolfs up --mount ${POOLFS_MOUNT_FLAGS:-}, 12 drives, 8+2, 1 MiB unit; block $block per task; reads -r -C, caches dropped; MiB/s"
echo
echo "| tasks | transfer | layout | I/O | N-to-1 read | file-per-task read | N-to-1 / file-per-task |"
echo "|---:|---:|---|---|---:|---:|---:|"
for n in $tasks; do
  for t in $transfers; do
    rm -rf "$work/mnt/ior"/*
    ior -N "$n" -t "$t" -F -w -k -o fpt >/dev/null
    for layout in segmented strided; do
      ior -N "$n" -t "$t" --layout "$layout" -w -k -o "shared.$layout" >/dev/null
      for io in buffered direct; do
        flag=(); [ "$io" = direct ] && flag=(--direct)
        shared=() fpt=()
        for _ in $(seq "$reps"); do
          drop; fpt+=("$(ior -N "$n" -t "$t" -F -r -C -k -o fpt "${flag[@]}")")
          drop; shared+=("$(ior -N "$n" -t "$t" --layout "$layout" -r -C -k -o "shared.$layout" "${flag[@]}")")
        done
        s=$(median "${shared[@]}") f=$(median "${fpt[@]}")
        echo "| $n | $t | $layout | $io | $s | $f | $(( f > 0 ? 100 * s / f : 0 ))% |"
      done
    done
  done
done
